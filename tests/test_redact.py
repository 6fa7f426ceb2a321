"""Privacy of the archive (issue 5, parts 1 and 2): secrets never stored in clear, private spans never stored.

On the real store (a Lantern on a temp file, WAL, the real MiniLM model) with the corpora of
tests/fixtures/secrets/ (made up by us; see make_corpus.py there): every corpus secret is absent from every table
(entries, FTS content and vocabulary, meta, ...) and from the raw bytes of the .db and -wal files; a question about
it recovers its placeholder; look-alikes (git hashes, UUIDs, sha256, ports, versions, base64 images, ...) stay
intact; private spans are never stored; the per-database opt-out works.
"""

from __future__ import annotations

import json
import re
import socket
import sqlite3
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from budget import examples
from embed_once import remembering
from lantern import Lantern, Message, ToolCall, ToolResult
from lantern.archive.redact import (
    META_SALT,
    META_SWITCH,
    PLACEHOLDER_RE,
    PROSE_END,
    VALUE_END,
    RedactionPolicy,
    find_secrets,
    make_policy,
    redact_json,
    redact_text,
    remove_private,
    set_secret_redaction,
)
from lantern.config import Config
from lantern.store.fulltext import fts_rows
from lantern.store.packed import unpack
from lantern.store.sqlite import Store

FIXTURES = Path(__file__).parent / "fixtures" / "secrets"
CASES = [json.loads(line) for line in (FIXTURES / "secrets.jsonl").read_text(encoding="utf-8").splitlines() if line]
LOOKALIKES = [
    json.loads(line) for line in (FIXTURES / "lookalikes.jsonl").read_text(encoding="utf-8").splitlines() if line
]
ZERO_FP = ("git-hash", "uuid", "sha256", "port")  # the facts Lantern exists to bring back: target 0 false positives


def forms(secret: str) -> list[bytes]:
    """The byte forms a secret could take in the database file: UTF-8 as is, and JSON-escaped (tool arguments)."""
    out = {secret.encode(), json.dumps(secret, ensure_ascii=False)[1:-1].encode()}
    return [b for b in out if b]


def _random_looking(s: str) -> bool:
    return any(c.isdigit() for c in s) and any(c.isalpha() for c in s)


def fts_pieces(secret: str) -> set[str]:
    """The distinctive FTS5 tokens (unicode61: alphanumeric runs, lower-cased) of a secret: 8+ characters with
    letters and digits (not "insecure" of "django-insecure-…", a word the turn also uses)."""
    return {t.lower() for t in re.findall(r"[A-Za-z0-9]+", secret) if len(t) >= 8 and _random_looking(t)}


def windows(secret: str, n: int = 6) -> set[str]:
    """Every n-character piece of a secret with letters and digits: a secret redacted only in part (a password cut
    at a ``&``) still leaves some of these behind."""
    return {secret[i : i + n] for i in range(max(len(secret) - n + 1, 1)) if _random_looking(secret[i : i + n])}


def all_rows(path: Path) -> tuple[str, set[str]]:
    """Every value of every table (as text) and the FTS5 vocabulary of a database, read by a second connection."""
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    parts = []
    for t in tables:
        cur = db.execute(f'SELECT * FROM "{t}"')
        names = [d[0] for d in cur.description]
        for row in cur:
            for name, v in zip(names, row):
                if t == "entries":  # summary and tags deflated, the content hash a digest: their values as read
                    v = Store.entry_value(name, v)
                parts.append(v.decode("latin-1") if isinstance(v, bytes) else str(v))
    db.execute("CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, entries_fts, row)")
    vocab = {r[0] for r in db.execute("SELECT term FROM temp.vocab")}
    db.close()
    return "\n".join(parts), vocab


def raw_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    wal = path.with_name(path.name + "-wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


# ---------------------------------------------------------------------------------------------- corpus


def assert_left_intact(db, texts):
    """Each of ``texts`` is no secret: ``find_secrets`` finds none, and archived through ``Lantern`` it is stored
    as written, nothing redacted."""
    policy = make_policy(b"k")
    assert not [t for t in texts if find_secrets(t, policy)]
    with Lantern(db) as lantern:
        for i, t in enumerate(texts):
            r = lantern.archive(
                [{"role": "user", "content": t}, {"role": "assistant", "content": "noted"}], session=f"s{i}"
            )
            assert r.redacted == 0 and lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text.startswith(
                f"user: {t}\n"
            ), t


def test_corpus_is_large_and_varied():
    assert len(CASES) >= 50
    assert sum(len(c["secrets"]) for c in CASES) >= 90
    wheres = " ".join(c["where"] for c in CASES)
    for context in (
        "tool output",
        "user message",
        "tool-call arguments",
        "JSON",
        "YAML",
        ".env",
        "log line",
        "Chinese",
    ):
        assert context in wheres, context
    assert len({c["kind"] for c in CASES}) >= 25
    assert {lk["category"] for lk in LOOKALIKES} >= {"git-hash", "uuid", "sha256", "port", "version", "base64-image"}


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    """Every corpus case archived in its own session, on one real database (left open: WAL not checkpointed)."""
    path = tmp_path_factory.mktemp("redact") / "secrets.db"
    lantern = Lantern(path)
    results = {c["id"]: lantern.archive(c["messages"], session=c["id"]) for c in CASES}
    yield lantern, path, results
    lantern.close()


def test_every_secret_is_absent_from_every_table_and_the_raw_file(archived):
    lantern, path, results = archived
    assert all(r.added == 1 and r.redacted >= 1 for r in results.values())
    rows, vocab = all_rows(path)
    raw = raw_bytes(path)  # the .db and its -wal: the WAL holds every page written since the last checkpoint
    assert len(raw) > 100_000
    # the pieces of a secret are looked for without the database's own random hex (its salt and the entries'
    # sha256 content hashes, which depend on the salt): a 6-hex piece of a hex secret (Twilio, Slack) matches
    # one of those 62 hashes by chance in about 1 run of 14 (measured: '66c8d7' inside a content hash)
    db = sqlite3.connect(path)
    noise = [Store.entry_value("content_hash", h) for (h,) in db.execute("SELECT content_hash FROM entries")] + [
        lantern.store.get_meta(META_SALT)
    ]
    db.close()
    rows_w, raw_w = rows, raw
    for h in noise:
        rows_w, raw_w = rows_w.replace(h, " "), raw_w.replace(h.encode(), b" ")
    kept = "\n".join(k for c in CASES for k in c["keep"])  # a kept value may share a piece with a secret: Stripe's
    leaks = []  # publishable pk_live_51… and secret sk_live_51… share "live_51"
    for c in CASES:
        for s in c["secrets"]:
            if s in rows or any(f in raw for f in forms(s)) or fts_pieces(s) & vocab:
                leaks.append((c["id"], s[:12]))
            leaks += [
                (c["id"], w) for w in windows(s) if w not in kept and (w in rows_w or any(f in raw_w for f in forms(w)))
            ]
    assert not leaks
    # the facts around them are kept: hosts, ports, users, dates
    lost = [(c["id"], k) for c in CASES for k in c["keep"] if k not in rows and json.dumps(k)[1:-1] not in rows]
    assert not lost


def test_placeholders_name_the_kind_and_a_fingerprint(archived):
    lantern, path, results = archived
    for c in CASES:
        entry = lantern.store.entries(results[c["id"]].entry_ids)[results[c["id"]].entry_ids[0]]
        marks = PLACEHOLDER_RE.findall(entry.text)
        assert any(m.startswith(f"[secret:{c['kind']} ") for m in marks), (c["id"], marks)
        assert entry.summary and all(s not in entry.summary for s in c["secrets"])
        assert all(t.value not in c["secrets"] for t in entry.tags)


def _questions_finding_placeholders(lantern, results) -> tuple[int, int, int]:
    """How many CASES' questions bring back a placeholder of their secret: over every session, within the case's
    session without the injection decision, and within it with the default decision."""
    found_global, found_session, floored_session = 0, 0, 0
    for c in CASES:
        entry = lantern.store.entries(results[c["id"]].entry_ids)[results[c["id"]].entry_ids[0]]
        marks = {m for m in PLACEHOLDER_RE.findall(entry.text) if m.startswith(f"[secret:{c['kind']} ")}
        found_global += any(m in lantern.recover(c["question"]).text for m in marks)
        found_session += any(m in lantern.recover(c["question"], session=c["id"], min_score=0).text for m in marks)
        floored_session += any(m in lantern.recover(c["question"], session=c["id"]).text for m in marks)
    print(
        f"\n[redact] question -> placeholder: {found_global}/{len(CASES)} over all {len(CASES)} sessions, "
        f"{found_session}/{len(CASES)} within the case's session ({floored_session} with the injection decision)"
    )
    return found_global, found_session, floored_session


def test_a_question_about_a_secret_recovers_its_placeholder(archived):
    """Every placeholder is found by a question about its secret (within the case's session, without the injection
    decision: what it injects is recover/relevance.py's concern), and nearly every one over all sessions."""
    lantern, path, results = archived
    found_global, found_session, _ = _questions_finding_placeholders(lantern, results)
    assert found_session == len(CASES)
    assert found_global >= 0.9 * len(CASES)


@pytest.mark.real_models  # the injection decision's cosines are calibrated on the real models
def test_the_injection_decision_keeps_the_questions_about_a_secret(tmp_path):
    """With the default decision, measured 2026-12-07: all 62 (the all-or-nothing floor before it held back the two
    Chinese questions of huggingface-zh and zh-koling-wei, whose evidence is short of clear: they get the short
    block)."""
    with Lantern(tmp_path / "secrets.db") as lantern:
        remembering(lantern.embedder)  # each question is recovered three ways: its vectors computed once
        results = {c["id"]: lantern.archive(c["messages"], session=c["id"]) for c in CASES}
        found_global, found_session, floored_session = _questions_finding_placeholders(lantern, results)
    assert found_session == len(CASES)
    assert floored_session >= len(CASES) - 1
    assert found_global >= 0.9 * len(CASES)


def test_redaction_is_stable_within_a_database_and_salted_per_database(tmp_path):
    secret = "sk-proj-" + "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7dE9fG"
    turn = [
        {"role": "user", "content": f"rotate the key {secret} of the tern service"},
        {"role": "assistant", "content": "ok"},
    ]
    again = [{"role": "user", "content": f"is {secret} still in use by tern?"}, {"role": "assistant", "content": "no"}]
    with Lantern(tmp_path / "a.db") as a, Lantern(tmp_path / "b.db") as b:
        ra = a.archive(turn, session="s")
        assert ra.redacted == 1
        assert a.archive(turn, session="s").duplicates == 1  # same placeholder, same content hash
        a.archive(again, session="s")
        b.archive(turn, session="s")
        texts_a = [e.text for e in a.store.entries(range(1, 10)).values()]
        marks_a = [PLACEHOLDER_RE.findall(t)[0] for t in texts_a]
        mark_b = PLACEHOLDER_RE.findall(next(iter(b.store.entries(range(1, 10)).values())).text)[0]
        assert marks_a[0] == marks_a[1]
        assert re.fullmatch(r"\[secret:openai-key …E9fG#[0-9a-f]{4}\]", marks_a[0])
        assert len(a.store.get_meta(META_SALT)) == 32 and a.store.get_meta(META_SALT) != b.store.get_meta(META_SALT)
        # a different salt gives a different fingerprint (1 in 65,536 chance of a tie for a given secret)
        assert mark_b != marks_a[0]


def test_passwords_show_no_tail_and_url_credentials_keep_host_and_port():
    policy = make_policy(b"k")
    text, n = redact_text("DATABASE_URL=postgres://ledger:Hunter2Hunter2Hunter2Hunter2@db.internal:5433/ledger", policy)
    assert n == 1
    assert re.fullmatch(
        r"DATABASE_URL=postgres://ledger:\[secret:url-password #[0-9a-f]{4}\]@db\.internal:5433/ledger", text
    )
    text, _ = redact_text("DB_PASSWORD=Tr0ub4dor&3-correct-horse-battery", policy)
    assert re.fullmatch(r"DB_PASSWORD=\[secret:password #[0-9a-f]{4}\]", text)


def test_a_password_ending_in_punctuation_keeps_no_character_in_clear(tmp_path):
    """Trailing ``.:!?`` (prose: also ``,;)`` and quotes) may be the password's last character: the placeholder
    covers it, and the fingerprint leaves it out, so a sentence-final password and the bare one match."""
    policy = make_policy(b"k")
    bare = redact_text("ok, password: Hunter2Secret", policy)[0].removeprefix("ok, password: ")
    for text in (
        "ok, password: Hunter2Secret!",
        "ok, password: Hunter2Secret.",
        "ok, password = Hunter2Secret?",
        "I set password: Hunter2Secret!! then left",
        "the password is Hunter2Secret!",
        "(the password is Hunter2Secret)",
        "the password was Hunter2Secret;",
        "密码是Hunter2Secret!",
    ):
        out, n = redact_text(text, policy)
        assert n == 1 and "Secret" not in out and "!" not in out and "?" not in out, (text, out)
        assert bare in out, (text, out)  # the same fingerprint as the bare password
    # quoted: the quotes delimit the value, all of it is the secret, the sentence's punctuation stays
    out, _ = redact_text('the password is "Hunter2Secret!".', policy)
    assert re.fullmatch(r'the password is "\[secret:password #[0-9a-f]{4}\]"\.', out) and bare not in out
    with Lantern(tmp_path / "p.db") as lantern:
        r = lantern.archive(
            [
                {"role": "user", "content": "ok, password: Hunter2Secret! keep it safe"},
                {"role": "assistant", "content": "noted, the password is Hunter2Secret."},
            ],
            session="s",
        )
        text = lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
    marks = PLACEHOLDER_RE.findall(text)
    assert r.redacted == 2 and "Hunter2" not in text and "!" not in text and len(marks) == 2 and marks[0] == marks[1]


# ---------------------------------------------------------------------------------------------- breaker forms (redact6)
SECRET = "Hunter2Secret"


def stored_forms(
    path: Path, texts: Sequence[str], secret: str = SECRET
) -> tuple[list[tuple[str, str]], bytes, int, str]:
    """Each text archived as its own user turn (own session) on a real store at ``path``. Returns each turn's
    stored (text, summary), the database's salt, the number of FTS rows matching ``secret`` and every FTS body."""
    with Lantern(path) as lantern:
        out = []
        for i, t in enumerate(texts):
            r = lantern.archive(
                [{"role": "user", "content": t}, {"role": "assistant", "content": "noted"}], session=f"s{i}"
            )
            e = lantern.store.entries(r.entry_ids)[r.entry_ids[0]]
            out.append((e.text, e.summary or ""))
        salt = bytes.fromhex(lantern.store.get_meta(META_SALT))
        db = sqlite3.connect(path)
        fts_hits = db.execute(
            "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (f'"{secret.lower()}"',)
        ).fetchone()[0]
        fts_body = " ".join(  # what the contentless index was given: its rows as built from the entries
            body + " " + tags
            for entry_id, summary, text, tag_json in db.execute("SELECT id, summary, text, tags FROM entries")
            for _, body, tags in fts_rows(entry_id, unpack(summary), text, [v for _, v in json.loads(unpack(tag_json))])
        )
        db.close()
    return out, salt, fts_hits, fts_body


def bare_mark(salt: bytes, secret: str = SECRET) -> str:
    """The placeholder of ``secret`` on its own (``password: SECRET`` mid-line) under ``salt``."""
    return PLACEHOLDER_RE.findall(redact_text(f"ok, password: {secret}", make_policy(salt))[0])[0]


def assert_redacted_everywhere(
    path: Path, texts: Sequence[str], secret: str = SECRET, pieces: Sequence[str] = ()
) -> tuple[list[str], bytes]:
    """Archive ``texts`` on a real store; assert ``secret`` is nowhere (entry text, summary, FTS body, FTS
    vocabulary, every table, the raw .db/-wal bytes) and each turn holds a ``[secret:password #FP]`` placeholder.
    ``pieces``: parts of a secret the turns hold in another form (the ``Sesame`` of ``Hunter2 Sesame!``, the
    ``&3;x`` of ``Tr0ub4dor&3;x``), each asserted absent from the same places. Returns the stored texts and the
    database's salt."""
    stored, salt, fts_hits, fts_body = stored_forms(path, texts, secret)
    rows, vocab = all_rows(path)
    raw = raw_bytes(path)
    for t, (text, summary) in zip(texts, stored):
        assert secret not in text and secret not in summary, (t, text, summary)
        assert re.search(r"\[secret:password #[0-9a-f]{4}\]", text), (t, text)
        for p in pieces:
            assert p not in text and p not in summary, (t, p, text, summary)
    assert fts_hits == 0 and secret not in fts_body and secret.lower() not in fts_body.lower()
    assert secret not in rows and secret.encode() not in raw and not fts_pieces(secret) & vocab
    assert not [w for w in windows(secret) if w in rows]
    for p in pieces:
        assert p not in rows and p.lower() not in fts_body.lower() and not any(f in raw for f in forms(p)), p
    return [text for text, _ in stored], salt


def test_prose_password_after_a_colon_is_redacted(tmp_path):
    """``password is: X`` / ``密码是：X``: a colon (ASCII or full-width) after is / was / 是 is the separator, not
    the first character of the value; the value gets the fingerprint of the bare password."""
    texts = [
        "the password is: Hunter2Secret!",
        "密码是：Hunter2Secret!",
        "the passwd was:Hunter2Secret",
        "口令为： Hunter2Secret",
    ]
    stored, salt = assert_redacted_everywhere(tmp_path / "colon.db", texts)
    bare = bare_mark(salt)
    for t, text in zip(texts, stored):
        assert bare in text and "!" not in text, (t, text)
    assert stored[0].startswith("user: the password is: [secret:password") and stored[1].startswith(
        "user: 密码是：[secret:password"
    )


QUOTED = [
    "the password is “Hunter2Secret!”",
    "password is «Hunter2Secret!»",
    "password is « Hunter2Secret! »",
    "the password was ‘Hunter2Secret!’",
    "密码是「Hunter2Secret!」",
    "密码是『Hunter2Secret!』",
    "密码为“Hunter2Secret!”",
    "the password is „Hunter2Secret!“",
]


def test_prose_password_in_curly_guillemet_and_cjk_quotes_is_redacted(tmp_path):
    """Typographic quotes delimit the value as ASCII quotes do: all of it is the secret (the fingerprint keeps its
    ``!``, as for ``"Hunter2Secret!"``), and the quotes themselves stay."""
    stored, salt = assert_redacted_everywhere(tmp_path / "quotes.db", QUOTED)
    quoted = PLACEHOLDER_RE.findall(redact_text('the password is "Hunter2Secret!"', make_policy(salt))[0])[0]
    for t, text in zip(QUOTED, stored):
        assert quoted in text and "!" not in text, (t, text)
        opener = next(c for c in t if c in "“«‘「『„")
        closer = {"“": "”", "«": "»", "‘": "’", "「": "」", "『": "』", "„": "“"}[opener]
        assert opener in text and closer in text, (t, text)


ADVERB_FORMS = [
    "password is - Hunter2Secret!",
    "the password is — Hunter2Secret",
    "the new password is now Hunter2Secret!",
    "the password is still Hunter2Secret",
    "the password is currently Hunter2Secret.",
    "the password was set to Hunter2Secret",
    "the password is now set to Hunter2Secret!",
    "the password was changed to Hunter2Secret",
    "the password is now: Hunter2Secret",
]


def test_prose_password_after_a_dash_or_a_bounded_adverb_is_redacted(tmp_path):
    stored, salt = assert_redacted_everywhere(tmp_path / "adverb.db", ADVERB_FORMS)
    bare = bare_mark(salt)
    for t, text in zip(ADVERB_FORMS, stored):
        assert bare in text and "!" not in text, (t, text)
        assert text.split("[secret:")[0] == "user: " + t.split(SECRET)[0], (t, text)  # the words before it are kept


PROSE_NOT_SECRETS = [
    "the password is weak",
    "the password is in the vault",
    "the password is now stored in the vault",
    "the password is still the same as before",
    "the password is currently unknown",
    "the password was set to expire in 30 days",
    "the password is - as always - in the vault",
    "the password is now in 1Password",
    "the password issue123 is fixed",
    "the password is: see the wiki",
    "the password was changed to something longer",
    "the password is “weak”",
    "密码是「正确的」",
]


def test_prose_about_a_password_without_one_is_left_intact(tmp_path):
    """The adverbs are a short list and the value rules are unchanged (an English value needs a digit or a
    symbol): sentences about a password, not holding one, are stored as they are."""
    assert_left_intact(tmp_path / "neg.db", PROSE_NOT_SECRETS)


def test_a_config_line_password_has_the_fingerprint_of_the_same_password_mid_line(tmp_path):
    """``password: X!`` at a line start (and ``PASSWORD=X!`` in a .env) gets the fingerprint of ``X``, as mid-line:
    the fingerprint of an unquoted value never holds its trailing ``.:!?``; the placeholder still covers all of
    the value to the end of the line, so nothing of it stays in clear."""
    texts = [
        "password: Hunter2Secret!",
        "PASSWORD=Hunter2Secret!",
        "db:\n  password: Hunter2Secret!",
        "export DB_PASSWORD=Hunter2Secret?",
        "ok, password: Hunter2Secret!",
        "PASSWORD=Hunter2Secret",
    ]
    stored, salt = assert_redacted_everywhere(tmp_path / "config.db", texts)
    bare = bare_mark(salt)
    for t, text in zip(texts, stored):
        assert bare in text and "!" not in text and "?" not in text, (t, text)
    # a value with "!" inside and at its end: all of it is covered; the fingerprint leaves out only the last "!"
    other = "PASSWORD=Hunter2!Secret!"
    text, _ = redact_text(other, make_policy(salt))
    assert text == "PASSWORD=" + bare_mark(salt, "Hunter2!Secret")


def test_a_config_line_password_on_the_allow_list_by_its_full_value_stays(tmp_path):
    """The allow-list sees the whole value as well as the fingerprinted one: ``redact_allow=("hunter2-local!",)``
    keeps ``PASSWORD=hunter2-local!`` although its fingerprint leaves out the ``!``."""
    cfg = Config(redact_allow=("hunter2-local!",))
    with Lantern(tmp_path / "allow.db", config=cfg) as lantern:
        r = lantern.archive(
            [{"role": "user", "content": "PASSWORD=hunter2-local!"}, {"role": "assistant", "content": "ok"}],
            session="s",
        )
        assert r.redacted == 0
        assert lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text.startswith("user: PASSWORD=hunter2-local!\n")


BACKTICKED = [
    "password: `Hunter2Secret`",
    "ok, password: `Hunter2Secret`",
    "the password is `Hunter2Secret`",
    "密码是`Hunter2Secret`",
]


def test_a_backtick_quoted_password_is_redacted_and_its_fingerprint_has_no_backtick(tmp_path):
    stored, salt = assert_redacted_everywhere(tmp_path / "tick.db", BACKTICKED)
    bare = bare_mark(salt)
    for t, text in zip(BACKTICKED, stored):
        assert f"`{bare}`" in text, (t, text)  # the backticks stay around the placeholder


ENCLOSED = [
    "run `PASSWORD=Hunter2Secret` first",
    'he wrote "password: Hunter2Secret!" on it',
    'x `db_password = "Hunter2Secret"` y',
    "set 'db_password=Hunter2Secret' in the file",
    "`password: Hunter2Secret`",
]


def test_an_assignment_enclosed_in_quotes_or_backticks_is_redacted(tmp_path):
    """A quote or backtick before the key that does not close after it (``run `PASSWORD=X` first``) encloses the
    whole assignment, it does not quote the key: the value is still found."""
    stored, salt = assert_redacted_everywhere(tmp_path / "enclosed.db", ENCLOSED)
    bare = bare_mark(salt)
    for t, text in zip(ENCLOSED, stored):
        assert bare in text, (t, text)
    assert stored[0].startswith("user: run `PASSWORD=[secret:password #") and "` first" in stored[0]


# ---------------------------------------------------------------------------------------------- breaker forms (redact7)
def keyword_mark(salt: bytes, secret: str) -> str:
    """The placeholder of ``secret`` in ASCII double quotes after a keyword (``password: "SECRET"``): the
    fingerprint of exactly what the quotes enclose."""
    return PLACEHOLDER_RE.findall(redact_text(f'ok, password: "{secret}"', make_policy(salt))[0])[0]


SPACED = [
    "密码是「Hunter2 Sesame!」",
    'the password is "Hunter2 Sesame!"',
    "the password was 'Hunter2 Sesame!'",
    "the password is “Hunter2 Sesame!”",
    "password is « Hunter2 Sesame! »",
    "密码为“Hunter2 Sesame!”",
    "密码是『Hunter2 Sesame!』",
    "the passphrase is `Hunter2 Sesame!`",
    "the password is „Hunter2 Sesame!“.",
]
PASSPHRASES = [
    'the password is "correct horse battery staple"',
    "the passphrase is ‘correct horse battery staple’",
    "密码是「correct horse battery staple」",
    "the password is now: 'correct horse battery staple'",
]


def test_a_quoted_prose_password_with_spaces_is_redacted_whole(tmp_path):
    """A value in matching quotes (any supported pair) is all that they enclose, spaces included — a
    passphrase — up to 128 characters on one line; its fingerprint is that of the same value after a keyword."""
    stored, salt = assert_redacted_everywhere(tmp_path / "spaced.db", SPACED, "Hunter2", pieces=["Sesame"])
    mark = keyword_mark(salt, "Hunter2 Sesame!")
    for t, text in zip(SPACED, stored):
        assert mark in text and "!" not in text, (t, text)
        opener = next(c for c in t if c in "\"'`“«‘「『„")
        closer = {"“": "”", "«": "»", "‘": "’", "「": "」", "『": "』", "„": "“"}.get(opener, opener)
        assert opener in text and closer in text, (t, text)  # the quotes stay around the placeholder
    stored, salt = assert_redacted_everywhere(
        tmp_path / "phrase.db", PASSPHRASES, "correct horse", pieces=["horse battery", "battery staple", "staple"]
    )
    mark = keyword_mark(salt, "correct horse battery staple")
    assert all(mark in text for text in stored), stored
    policy = make_policy(b"k")
    # an apostrophe is not the closing quote; the bounds: a quote not closed on its line within 128 characters
    # does not enclose the value (then it is the unquoted run after the quote, as before)
    out, _ = redact_text("the password is 'don't panic 42' ok", policy)
    assert re.fullmatch(r"the password is '\[secret:password #[0-9a-f]{4}\]' ok", out), out
    out, _ = redact_text('the password is "Hunter2 and\nthe rest" ok', policy)
    assert re.fullmatch(r'the password is "\[secret:password #[0-9a-f]{4}\] and\nthe rest" ok', out), out
    long = 'the password is "Hunter2 ' + "word " * 30 + '" ok'
    out, _ = redact_text(long, policy)
    assert out.startswith('the password is "[secret:password #') and "word " * 30 in out, out


QUOTED_NOT_SECRETS = [
    "the password is “weak”",
    "密码是「正确的」",
    'the password is "abc"',
    "the password is 'short'",
    "the password is “  ”",
    'he said the password is "required" and "8+ chars"',
]


def test_quoted_prose_about_a_password_without_one_is_left_intact(tmp_path):
    assert_left_intact(tmp_path / "qneg.db", QUOTED_NOT_SECRETS)


MIDLINE = [
    "ok DB_PASSWORD=Tr0ub4dor&3;x then",
    "ok, password: Tr0ub4dor&3;x.",
    "use db_password=Tr0ub4dor&3;x, then",
    "(PASSWORD=Tr0ub4dor&3;x)",
    "connect(user=u, password=Tr0ub4dor&3;x)",
    "ok `PASSWORD=Tr0ub4dor&3;x` ok",
    "then export DB_PASSWORD=Tr0ub4dor&3;x; make run",
    "DB_PASSWORD=Tr0ub4dor&3;x",
    "ok password = Tr0ub4dor&3;x!",
]


def test_an_unquoted_password_mid_line_runs_to_the_next_space(tmp_path):
    """``, ; & ( ) [ ] { } < >`` are legal in a password: an unquoted value after a strong key runs to the next
    space (or quote, backslash) wherever it stands, as at a line start; the fingerprint leaves out its trailing
    ``.,;:!?)]}``, so all these forms give the fingerprint of ``Tr0ub4dor&3;x``. A shell ``;`` after the value
    (a space follows it) ends the value and stays in the text (redact.py ``separated_end``)."""
    stored, salt = assert_redacted_everywhere(
        tmp_path / "midline.db", MIDLINE, "Tr0ub4dor", pieces=["&3;x"]
    )  # 4+ characters: a 3-byte piece turns up in the vectors by chance
    mark = keyword_mark(salt, "Tr0ub4dor&3;x")
    for t, text in zip(MIDLINE, stored):
        assert mark in text, (t, text)
    assert stored[0].startswith(f"user: ok DB_PASSWORD={mark} then\n")
    assert stored[5].startswith(f"user: ok `PASSWORD={mark}` ok\n")  # the enclosing backticks stay
    assert stored[6].startswith(f"user: then export DB_PASSWORD={mark}; make run\n")
    policy = make_policy(salt)
    # a value too short on its own is judged whole ("ab;cd!"); code stays: variables, calls, types, indexing
    out, _ = redact_text("ok password=ab;cd!x then", policy)
    assert out == "ok password=" + keyword_mark(salt, "ab;cd!x") + " then"
    for code in (
        "login(password=pw123, user=u)",
        "f(password=getpass())",
        "def f(password: str) -> None:",
        "x = dict(password=config[key])",
        "export DB_PASSWORD=abc; run",
        "Secret: always, cache",
    ):
        assert not find_secrets(code, policy), code
    # a URL query: a password takes the rest of the query with it (more is redacted, nothing is left); a token
    # (a weak key, whose value must look random) still stops at "&"
    out, _ = redact_text("GET /login?password=Tr0ub4dor&3;x&next=/home HTTP/1.1", policy)
    assert "&3;x" not in out and out.endswith(" HTTP/1.1")
    out, _ = redact_text("GET /cb?access_token=ghx1234567890abcdefXYZ&expires_in=3600", policy)
    assert out.endswith("&expires_in=3600") and "ghx123" not in out


QUOTE_INSIDE = [
    "password: `Hunt'er2Secret`",
    "ok, password: `Hunt'er2Secret` then",
    'password: "Hunt\'er2Secret"',
    'x `db_password = "Hunt\'er2Secret"` y',
    "the password is `Hunt'er2Secret`",
    'run --password "Hunt\'er2Secret" now',
    '{"password": "Hunt\'er2Secret", "port": 5433}',
]


def test_a_quoted_password_holding_another_quote_is_redacted(tmp_path):
    """A quoted value ends at its own closing quote: a quote of another kind inside it (``'`` inside backticks or
    double quotes, ``"`` inside single quotes) and a backslash-escaped one of its own kind (JSON ``"Hunt\\"er"``)
    are part of it (the value was not redacted at all: the quoted form failed and no unquoted one starts with a
    quote)."""
    secret = "Hunt'er2Secret"
    stored, salt = assert_redacted_everywhere(tmp_path / "inner.db", QUOTE_INSIDE, secret, pieces=["er2Secret"])
    mark = keyword_mark(salt, secret)
    for t, text in zip(QUOTE_INSIDE, stored):
        assert mark in text, (t, text)
    assert stored[0].startswith(f"user: password: `{mark}`\n") and "5433" in stored[-1]
    policy = make_policy(salt)
    for text in (
        "DB_PASSWORD='Hunt\"er2Secret'",
        "run --password 'Hunt\"er2Secret'",
        '{"password": "Hunt\\"er2Secret"}',
        '{"password": "Hunter2\\nSecret"}',
    ):
        out, n = redact_text(text, policy)
        assert n == 1 and "er2" not in out and "Secret" not in out, (text, out)
    out, _ = redact_text('{"password": "Hunt\\"er2Secret", "user": "bob"}', policy)
    assert json.loads(out)["user"] == "bob"  # still valid JSON, the next value intact


ZH_VERBS = [
    "密码现在是Hunter2Secret",
    "密码改成了Hunter2Secret",
    "密码改为Hunter2Secret",
    "密码设置为Hunter2Secret",
    "新密码是Hunter2Secret",
    "密码已经改成了Hunter2Secret!",
    "wifi 密码被重置为 Hunter2Secret，记一下",
    "密码还是Hunter2Secret",
    "口令已改为：Hunter2Secret",
    "密码换成了「Hunter2Secret」",
    "密码目前是 Hunter2Secret。",
]
ZH_NOT_SECRETS = [
    "密码现在是错的",
    "密码改成了更长的",
    "密码现在还是错的",
    "密码已经改了",
    "密码被重置了",
    "密码改成了 abc",
    "密码现在是「正确的」",
]


def test_chinese_prose_password_after_an_adverb_or_a_verb_is_redacted(tmp_path):
    """Between 密码 and its value, at most two adverbs from a short list (现在, 还, 已经, 被, 目前, …) and one verb
    (是, 为, 改成(了), 改为, 设置为, 重置为, 换成(了), …); the value rules are unchanged (4 ASCII characters), so
    sentences about a password without one are kept."""
    stored, salt = assert_redacted_everywhere(tmp_path / "zh.db", ZH_VERBS)
    bare = bare_mark(salt)
    for t, text in zip(ZH_VERBS, stored):
        assert bare in text and "!" not in text, (t, text)
        assert text.split("[secret:")[0] == "user: " + t.split(SECRET)[0], (t, text)  # the words before it are kept
    assert_left_intact(tmp_path / "zhneg.db", ZH_NOT_SECRETS)


TYPO_AFTER_KEY = [
    "password: “Hunter2Secret!”",
    "ok, password: “Hunter2Secret!” then",
    "db_password = «Hunter2Secret!»",
    "password: « Hunter2Secret! »",
    "password: ‘Hunter2Secret!’.",
    "password: „Hunter2Secret!“",
    "PASSWORD=「Hunter2Secret!」",
    "密码：『Hunter2Secret!』",
]


def test_a_password_in_typographic_quotes_after_a_keyword_has_the_enclosed_values_fingerprint(tmp_path):
    """After ``password:`` (or ``=``), curly quotes, guillemets, ``„…“`` and CJK brackets delimit the value as ASCII
    quotes do: the placeholder replaces what they enclose (its fingerprint was that of the value with its quotes,
    and the quotes went into the placeholder) and a space inside no longer leaves the rest in clear."""
    stored, salt = assert_redacted_everywhere(tmp_path / "typo.db", TYPO_AFTER_KEY)
    mark = keyword_mark(salt, "Hunter2Secret!")
    for t, text in zip(TYPO_AFTER_KEY, stored):
        opener = next(c for c in t if c in "“«‘「『„")
        closer = {"“": "”", "«": "»", "‘": "’", "「": "」", "『": "』", "„": "“"}[opener]
        assert mark in text and opener in text and closer in text and "!" not in text, (t, text)
    spaced = ["password: “Hunter2 Sesame!”", "password: 「Hunter2 Sesame!」", "db_passwd = «Hunter2 Sesame!»"]
    stored, salt = assert_redacted_everywhere(tmp_path / "typo-spaced.db", spaced, "Hunter2", pieces=["Sesame"])
    assert all(keyword_mark(salt, "Hunter2 Sesame!") in text for text in stored), stored


HYPHEN_NOT_SECRETS = [
    "the password is re-used",
    "the password is 8-64 chars",
    "the password is re-used across sites.",
    "the password is up-to-date",
    "the password is case-sensitive.",
    "the password was auto-generated",
    "the password is 12-128 characters long",
    "the password is user's choice",
    "the password is Self-Signed",
]
HYPHEN_SECRETS = [
    "the password is hunter-2",
    "the password is correct-horse-battery-staple",
    "the password is p@ss-word",
    "the password is 1234-5678",
    "the password is Hunter2-Secret.",
    "the password is re-used2",
    'the password is "re-used"',
]


def test_a_hyphenated_word_or_a_length_range_is_not_a_prose_password(tmp_path):
    """An unquoted English value needs the character mix of a secret: a hyphen joining 2 or 3 words, an
    apostrophe in a word or a range of lengths is not one (those sentences were stored with a placeholder,
    losing the user's words); a digit among letters, another symbol, 4+ hyphenated words (a passphrase), digits
    that are not a range, or quotes still are."""
    assert_left_intact(tmp_path / "hyphen.db", HYPHEN_NOT_SECRETS)
    for t in HYPHEN_SECRETS:
        value = t.split("is ", 1)[1].strip('."')
        out, n = redact_text(t, make_policy(b"k"))
        assert n == 1 and value not in out and out.startswith("the password is "), (t, out)
        assert PLACEHOLDER_RE.findall(out)[0] == keyword_mark(b"k", value), (t, out)
    stored, _ = assert_redacted_everywhere(tmp_path / "hyphen-secrets.db", ["the password is Hunter2Secret-x!"])
    assert "-x" not in stored[0]


def test_a_quoted_flag_value_in_json_tool_arguments_is_redacted(tmp_path):
    """``--password "X"`` inside a JSON string (a tool call's ``{"cmd": "… --password \\"X\\" …"}``) has
    backslash-escaped quotes: the flag's quoted form takes them as the keyword's does (it was stored in clear)."""
    cmds = ['mysql -h db --password "Hunter2Secret" -e "select 1"', "deploy --token='Hunter2Secret' --port 5433"]
    with Lantern(tmp_path / "flags.db") as lantern:
        for i, cmd in enumerate(cmds):
            call = {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})},
            }
            r = lantern.archive(
                [
                    {"role": "user", "content": "run it"},
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": f"c{i}", "content": "ok"},
                ],
                session=f"s{i}",
            )
            assert r.redacted == 1, cmd
        salt = bytes.fromhex(lantern.store.get_meta(META_SALT))
    rows, vocab = all_rows(tmp_path / "flags.db")
    assert (
        SECRET not in rows
        and SECRET.encode() not in raw_bytes(tmp_path / "flags.db")
        and not fts_pieces(SECRET) & vocab
    )
    assert "5433" in rows and "select 1" in rows
    policy = make_policy(salt)
    for cmd in cmds:
        args, _ = redact_text(json.dumps({"cmd": cmd}), policy)
        assert bare_mark(salt).split("#")[1] in json.loads(args)["cmd"], args  # valid JSON, the same fingerprint


APOSTROPHE_INSIDE = [
    "password: 'Hunt'er2Secret'",
    "ok, db_password = 'Hunt'er2Secret' then",
    "run --password 'Hunt'er2Secret' now",
]


def test_an_apostrophe_inside_a_single_quoted_password_does_not_end_it(tmp_path):
    """Inside single quotes, a ``'`` followed by a letter or digit does not close the value when a later ``'``
    does (``'Hunt'er2Secret'`` left ``er2Secret'`` in clear), as in prose; code with several quoted values is
    unchanged (a closing quote is followed by ``,`` ``}`` or a space)."""
    secret = "Hunt'er2Secret"
    stored, salt = assert_redacted_everywhere(tmp_path / "apos.db", APOSTROPHE_INSIDE, secret, pieces=["er2Secret"])
    mark = keyword_mark(salt, secret)
    assert all(f"'{mark}'" in text for text in stored), stored
    policy = make_policy(salt)
    out, _ = redact_text("x = {'password': 'Hunter2Secret', 'user': 'bob'}", policy)
    assert out == "x = {'password': '" + keyword_mark(salt, SECRET) + "', 'user': 'bob'}"
    out, _ = redact_text("password: 'Hunter2Secret', note: 'don't'", policy)
    assert out.endswith("', note: 'don't'")


def test_json_tool_arguments_stay_valid_json():
    policy = make_policy(b"k")
    for c in CASES:
        for m in c["messages"]:
            for call in m.get("tool_calls") or []:
                args, _ = redact_text(call["function"]["arguments"], policy)
                json.loads(args)


# ---------------------------------------------------------------------------------------------- look-alikes
def test_lookalikes_are_left_intact_on_the_real_store(tmp_path):
    """False-positive rate per category: a look-alike string is a false positive when archiving changes it."""
    with Lantern(tmp_path / "look.db") as lantern:
        stored: dict[str, str] = {}
        for lk in LOOKALIKES:
            r = lantern.archive(
                [{"role": "user", "content": f"look at this ({lk['id']})"}, {"role": "tool", "content": lk["text"]}],
                session=lk["id"],
            )
            stored[lk["id"]] = lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
    total, fp = Counter(), Counter()
    for lk in LOOKALIKES:
        for k in lk["keep"]:
            total[lk["category"]] += 1
            fp[lk["category"]] += k not in stored[lk["id"]]
    report = ", ".join(f"{c} {fp[c]}/{total[c]}" for c in sorted(total))
    print(f"\n[redact] look-alike false positives: {report}; all {sum(fp.values())}/{sum(total.values())}")
    assert all(fp[c] == 0 for c in ZERO_FP), report
    assert sum(fp.values()) == 0, report
    assert not [lk["id"] for lk in LOOKALIKES if find_secrets(lk["text"], make_policy(b"k"))]


# ---------------------------------------------------------------------------------------------- private spans
PRIVATE = "my home address is 12 Rue Oberkampf and my badge is 4471-ZX"


def test_private_spans_are_never_stored(tmp_path):
    path = tmp_path / "p.db"
    with Lantern(path) as lantern:
        r = lantern.archive(
            [
                Message("user", f"Deploy the gannet service. <private>{PRIVATE}</private> Use port 5433."),
                Message(
                    "assistant",
                    "",
                    tool_calls=[
                        ToolCall(
                            "bash",
                            json.dumps({"cmd": f"echo '<PRIVATE>{PRIVATE}</PRIVATE>' >/dev/null; make deploy"}),
                            "c1",
                        )
                    ],
                ),
                Message("tool", tool_results=[ToolResult(f"deployed\n<private>{PRIVATE}", "c1", "bash")]),
                Message("assistant", "Deployed gannet on port 5433."),
            ],
            session="s",
        )
        assert r.redacted == 3
        text = lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
        assert "Use port 5433" in text and "make deploy" in text and "deployed" in text
        assert "private>" not in text.lower()
        rec = lantern.recover("gannet home address badge")
        assert "Oberkampf" not in rec.text
        rows, vocab = all_rows(path)
        raw = raw_bytes(path)
    for word in ("Oberkampf", "4471-ZX"):
        assert word not in rows and word.encode() not in raw
    assert "oberkampf" not in vocab
    assert b"Oberkampf" not in path.read_bytes()  # after close (checkpoint) too


def test_private_markers_nested_unclosed_stray_and_configurable():
    assert remove_private("a <private>b <private>c</private> d</private> e") == ("a  e", 1)
    assert remove_private("keep <PRIVATE>drop all of this") == ("keep ", 1)
    assert remove_private("stray </private> closer") == ("stray  closer", 0)
    assert remove_private("no markers") == ("no markers", 0)
    policy = make_policy(b"k", private_markers=[("<private>", "</private>"), ("[[secret-note]]", "[[/secret-note]]")])
    assert redact_text("x [[Secret-Note]]hidden[[/secret-note]] y <private>z</private>", policy) == ("x  y ", 2)


def test_custom_private_marker_through_config(tmp_path):
    cfg = Config(private_markers=(("<private>", "</private>"), ("#nolog{", "}#")))
    with Lantern(tmp_path / "c.db", config=cfg) as lantern:
        r = lantern.archive(
            [
                {"role": "user", "content": "the heron door code #nolog{ 8841 }# is on the wiki"},
                {"role": "assistant", "content": "noted"},
            ],
            session="s",
        )
        text = lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
    assert "8841" not in text and "is on the wiki" in text


# ---------------------------------------------------------------------------------------------- opt-out, config
def test_opt_out_per_database(tmp_path):
    secret = "ghp_" + "Q7r8A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    msgs = [
        {"role": "user", "content": f"token {secret} for the crane repo <private>not this</private>"},
        {"role": "assistant", "content": "ok"},
    ]
    path = tmp_path / "optout.db"
    with Lantern(path) as lantern:
        assert lantern.redaction.secrets
        set_secret_redaction(lantern, False)
        r = lantern.archive(msgs, session="s")
        assert r.redacted == 1  # the private span only
    with Lantern(path) as again:  # the switch is a property of the database
        assert again.store.get_meta(META_SWITCH) == "off" and not again.redaction.secrets
        text = again.store.entries(r.entry_ids)[r.entry_ids[0]].text
        assert secret in text and "not this" not in text
        set_secret_redaction(again, True)
        r2 = again.archive([{"role": "user", "content": f"again {secret}"}], session="t")
        assert secret not in again.store.entries(r2.entry_ids)[r2.entry_ids[0]].text
    with Lantern(tmp_path / "other.db") as other:  # other databases are not affected
        assert other.redaction.secrets


def test_extra_patterns_and_allow_list_through_config(tmp_path):
    cfg = Config(
        redact_patterns=(("acme-license", r"ACME-LIC-(?P<secret>[0-9A-F]{16})"),),
        redact_allow=("sk_test_51AllowedFixtureKey00000000", "re:hunter2-.*"),
    )
    with Lantern(tmp_path / "cfg.db", config=cfg) as lantern:
        r = lantern.archive(
            [
                {
                    "role": "user",
                    "content": (
                        "license ACME-LIC-0123456789ABCDEF, fixture key sk_test_51AllowedFixtureKey00000000, "
                        "DB_PASSWORD=hunter2-local and API_SECRET=Zq8Lm2Np4Rt6Vx8Bz0Cd"
                    ),
                }
            ],
            session="s",
        )
        text = lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
    assert "0123456789ABCDEF" not in text and re.search(r"ACME-LIC-\[secret:acme-license #[0-9a-f]{4}\]", text)
    assert "sk_test_51AllowedFixtureKey00000000" in text and "DB_PASSWORD=hunter2-local" in text
    assert "Zq8Lm2Np4Rt6Vx8Bz0Cd" not in text
    assert r.redacted == 2


# ---------------------------------------------------------------------------------------------- other paths
def test_ingest_redacts_a_transcript_file(tmp_path):
    case = next(c for c in CASES if c["id"] == "postgres-compose")
    f = tmp_path / "session.json"
    f.write_text(json.dumps({"messages": case["messages"]}), encoding="utf-8")
    with Lantern(tmp_path / "i.db") as lantern:
        r = lantern.ingest(f)
        assert r.added == 1 and r.redacted == 1
        text = lantern.store.entries(r.entry_ids)[r.entry_ids[0]].text
    assert case["secrets"][0] not in text and "@db.internal:5433/ledger" in text


def test_live_context_with_a_secret_still_excludes_its_entry(tmp_path):
    case = next(c for c in CASES if c["id"] == "dotenv-db-password")
    with Lantern(tmp_path / "l.db") as lantern:
        lantern.archive(case["messages"], session="s")
        assert lantern.recover(case["question"]).entries
        # the live context holds the secret in clear; it is redacted the same way, so the entry is recognised
        assert not lantern.recover(case["question"], exclude=case["messages"]).entries


# ---------------------------------------------------------------------------------------------- files and process (part
# 3)
def test_database_wal_and_shm_files_are_private(tmp_path):
    path = tmp_path / "fresh" / "m.db"
    with Lantern(path) as lantern:
        lantern.archive(CASES[0]["messages"], session="s")
        modes = {p.name: p.stat().st_mode & 0o777 for p in path.parent.iterdir()}
        assert set(modes) == {"m.db", "m.db-wal", "m.db-shm"}
        assert set(modes.values()) == {0o600}, modes
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_no_network_connection_at_any_time(tmp_path, monkeypatch):
    """Sockets blocked: archive (with detect-secrets' plugins, whose verify() would call provider APIs: we only use
    their regexes), ingest, recover, search, explain, forget, stats, the demo and an evaluation all run."""
    attempts = []

    def refuse(*a, **k):
        attempts.append(a[1:] if a else k)
        raise OSError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"messages": CASES[1]["messages"]}), encoding="utf-8")
    with Lantern(tmp_path / "n.db") as lantern:
        for c in CASES:
            lantern.archive(c["messages"], session=c["id"])
        lantern.ingest(f)
        assert lantern.recover(CASES[0]["question"]).entries
        lantern.search(CASES[2]["question"])
        lantern.explain(CASES[3]["question"])
        lantern.forget(session=CASES[4]["id"])
        lantern.stats()
    from io import StringIO

    from rich.console import Console

    from lantern import demo

    assert demo.run(tmp_path / "demo.db", console=Console(file=StringIO()))
    from lantern.eval.run import main as run_eval

    fixture = Path(__file__).parent / "fixtures" / "eval" / "locomo_mini.json"
    results = run_eval(
        "locomo",
        fixture,
        tmp_path / "eval",
        split="all",
        keep=2,
        systems=["lantern", "bm25"],
        cache_dir=tmp_path / "cache",
        plots=False,
    )
    assert results["systems"]["lantern"]["overall"]["n"] > 0
    assert attempts == []
    assert not attempts


# ---------------------------------------------------------------------------------------------- properties
@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "password=",
                "PASSWORD: ",
                'api_key = "',
                "token=",
                "sk-proj-",
                "ghp_",
                "postgres://u:",
                "@db:5433/x",
                "Bearer ",
                "-----BEGIN RSA PRIVATE KEY-----\n",
                "\n-----END RSA PRIVATE KEY-----",
                "<private>",
                "</private>",
                "密码是",
                "Ab3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5bC7d",
                "hunter2",
                " ",
                "\n",
                '"',
                "'",
                ":",
                "=",
                "9f3ab2c1d0e4",
                "5433",
                "[secret:password #ab12]",
                "\\n",
                "é",
                "端口",
            ]
        ),
        max_size=14,
    ).map("".join)
)
@example(text='password=password="')  # json_safe drops the closing quote from the span: the value too
def test_redaction_is_idempotent_and_total(text):
    policy = make_policy(b"k")
    once, _ = redact_text(text, policy)
    twice, n = redact_text(once, policy)
    assert twice == once and n == 0
    for f in find_secrets(text, policy):
        span = text[f.start : f.end]  # the value, plus only the trailing punctuation its fingerprint leaves out
        assert f.value and span.startswith(f.value) and set(span[len(f.value) :]) <= set(PROSE_END + VALUE_END)


def test_the_memo_answers_a_repeated_text_exactly_and_stays_within_its_budget(monkeypatch):
    """The proxy redacts the live context on every request and a conversation resends the same messages: the
    policy's memo answers a text seen before with the very result of a fresh redaction, never shares answers
    between policies (another salt is another fingerprint), skips texts over MEMO_MAX_TEXT and drops the least
    recently used once MEMO_BYTES are taken (strings plus a per-entry cost, so two million 2-character texts no
    longer pass for 4 MB); a copy or a pickle of a policy gets an empty memo of its own."""
    import lantern.archive.redact as redact

    text = "deploy with OPENAI_API_KEY=sk-proj-" + "a1B2c3D4e5" * 4 + " and keep port 5433"
    policy, other = make_policy(b"salt-one"), make_policy(b"salt-two")
    first = redact_text(text, policy)
    assert first[1] == 1 and "sk-proj-" not in first[0] and "5433" in first[0]
    assert policy.memo.get(text) == first and redact_text(text, policy) == first
    assert other.memo.get(text) is None
    assert redact_text(text, other)[0] != first[0]  # another salt: another fingerprint, not the memo's answer
    assert redact._redact(text, policy) == first  # what the memo holds is what a fresh redaction gives

    monkeypatch.setattr(redact, "MEMO_MAX_TEXT", 10)
    long = "x" * 11 + " password=Hunter2Secret"
    redact_text(long, policy)
    assert policy.memo.get(long) is None

    monkeypatch.setattr(redact, "MEMO_MAX_TEXT", 65_536)
    texts = [f"note {i}: " + "y" * 30 for i in range(5)]  # 38 ASCII characters each, no secret
    each = sys.getsizeof(texts[0]) + redact.MEMO_ENTRY_BYTES  # the result is the text itself: counted once
    monkeypatch.setattr(redact, "MEMO_BYTES", 2 * each + 10)  # two fit
    small = make_policy(b"s")
    for t in texts:
        redact_text(t, small)
    assert [small.memo.get(t) is not None for t in texts] == [False, False, False, True, True]

    import copy
    import pickle

    for twin in (copy.deepcopy(small), pickle.loads(pickle.dumps(small))):
        assert twin == small and twin.memo is not small.memo and twin.memo.get(texts[-1]) is None
    small.memo.clear()
    assert small.memo.get(texts[-1]) is None


def test_import_and_copy_redact_what_a_database_without_redaction_kept(tmp_path):
    """An export from a database that opted out of redaction (or from another tool) is redacted on import, in
    every field; ``copy_store`` redacts the copied events' queries too. Fails on the import that trusted its file."""
    from lantern.api import copy_store
    from lantern.scope import Scope
    from lantern.store.events import add_event

    secret = "ghp_Zq7Xk2Lm9Np4Rt8Vw3Ys6Ab1Cd5Ef0Gh1234"
    password = "Tr0ub4dor&3x!"
    src = tmp_path / "clear.db"
    with Lantern(src) as lt:
        set_secret_redaction(lt, False)
        r = lt.archive(
            [
                {"role": "user", "content": f"deploy with {secret} and DB_PASSWORD={password} on port 5433"},
                {"role": "assistant", "content": "ok, port 5433"},
            ],
            session="s",
        )
        with lt.store.transaction() as db:
            add_event(
                db,
                time=1.0,
                session="s",
                scope=Scope("", "", ""),
                source="test",
                reason="compaction",
                lost=r.entry_ids,
                query=f"which token, {secret}?",
                injected=[],
                chars=10,
                budget=100,
            )
        lt.export(tmp_path / "e.jsonl")
    assert secret in (tmp_path / "e.jsonl").read_text(encoding="utf-8")  # the control: the export holds it

    with Lantern(tmp_path / "imported.db") as lt:
        result = lt.import_(tmp_path / "e.jsonl")
        assert result.added == 1
        (entry,) = lt.store.entries(list(result.entry_ids.values())).values()
        assert "[secret:github-token" in entry.text and "5433" in entry.text
    copy_store(src, tmp_path / "copied.db")
    with Lantern(tmp_path / "copied.db") as lt:
        (event,) = lt.events()
        assert secret not in event.query and "which token" in event.query
    for db in ("imported.db", "copied.db"):
        raw = raw_bytes(tmp_path / db)
        assert secret.encode() not in raw and password.encode() not in raw, db


SECRET_LEAF = "ghp_Zq7Xk2Lm9Np4Rt8Vw3Ys6Ab1Cd5Ef0Gh1234"
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["plain", "port 5433", f"token {SECRET_LEAF}", ""]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["a", "b", "k"]), inner, max_size=3),
    max_leaves=20,
)


def _redact_json_by_definition(value, policy):
    """The definition, recursively: every string redacted, keys kept, an unchanged container returned as it is."""
    if isinstance(value, str):
        return redact_text(value, policy)
    if isinstance(value, list):
        pairs = [_redact_json_by_definition(v, policy) for v in value]
        n = sum(k for _, k in pairs)
        return ([v for v, _ in pairs] if n else value), n
    if isinstance(value, dict):
        pairs = {key: _redact_json_by_definition(v, policy) for key, v in value.items()}
        n = sum(k for _, k in pairs.values())
        return ({key: v for key, (v, _) in pairs.items()} if n else value), n
    return value, 0


@given(JSON_VALUES)
@settings(max_examples=examples(200), deadline=None)
def test_redact_json_is_its_definition_and_keeps_unchanged_values_as_they_are(value):
    policy = RedactionPolicy()
    got, n = redact_json(value, policy)
    want, m = _redact_json_by_definition(value, policy)
    assert (got, n) == (want, m)
    assert SECRET_LEAF not in json.dumps(got)
    if n == 0:
        assert got is value


@pytest.mark.parametrize("depth", [900, 5_000])
def test_redact_json_reads_any_depth(depth):
    """A message's ``meta`` 900 deep (json reads up to ~1,000) raised RecursionError in the recursive walk."""
    value: object = f"token {SECRET_LEAF}"
    for k in range(depth):
        value = [value] if k % 2 else {"k": value}
    got, n = redact_json(value, RedactionPolicy())
    while not isinstance(got, str):  # down to the leaf without recursion (json.dumps would need it)
        got = got[0] if isinstance(got, list) else got["k"]
    assert n == 1 and SECRET_LEAF not in got and got.startswith("token ")


SECRET_WORDS = ["password", "passwd", "pass", "passphrase", "token", "api-key", "secret", "access-key"]


@given(
    st.lists(st.sampled_from(["db", "redis", "admin", "master", "x2"]), max_size=3),
    st.sampled_from(["", "require", "store", "key"]),
    st.sampled_from(SECRET_WORDS),
    st.sampled_from(["=", " "]),
    st.text("abcdefghkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789#%", min_size=12, max_size=24),
)
@settings(max_examples=examples(200), deadline=None)
def test_a_flag_named_by_a_secret_word_has_its_value_redacted(words, joined, word, sep, value):
    """Newcomer finding: `redis-server --requirepass Zq8#kLm2Pw9x` was archived in clear (the flags were a list of
    whole names). Any flag whose name ends in a secret word, after hyphenated words or a joined prefix, is one."""
    assume(sum(c.isdigit() for c in value) >= 2 and sum(c.isalpha() for c in value) >= 4)
    flag = "--" + "".join(f"{w}-" for w in words) + joined + word
    out, n = redact_text(f"run it: server {flag}{sep}{value} --verbose", RedactionPolicy())
    assert value not in out and n >= 1 and flag in out and "--verbose" in out


@pytest.mark.parametrize(
    "text",
    [
        "cli --token-file /etc/app/token",
        "docker login --password-stdin < pw.txt",
        "x --no-password --verbose",
        "rsync --bypass cache",
        "git --pass-through origin",
    ],
)
def test_flags_that_only_look_like_secret_flags_are_kept(text):
    assert redact_text(text, RedactionPolicy()) == (text, 0)


_PASSWORD_CHARS = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789!@#%^*-_+=~"


@given(
    password=st.text(alphabet=_PASSWORD_CHARS, min_size=6, max_size=18).map(lambda p: "Zq7!" + p),
    inner=st.sampled_from(["", ";", "&", ","]),
    form=st.sampled_from(
        ["password={}", "PASSWORD={}", "export DB_PASSWORD={}", "--password {}", "--password={}", "the password is {}"]
    ),
    sep=st.sampled_from(";,&"),
    follower=st.sampled_from([" also", " ls -la", "\n", "", "  # note", " && make"]),
)
@settings(max_examples=examples(300), deadline=None)
def test_a_separator_after_an_unquoted_secret_stays_in_the_text(password, inner, form, sep, follower):
    """An unquoted secret ends before a ``;``, ``,`` or ``&`` that a space, a line end or the text's end follows
    (``password=X; also``: the ``;`` ends the shell command and stays), while one inside the value (``X&3;x``) is
    part of it: nothing of the password stays in clear, the separator is kept, and the fingerprint is the same as
    without it."""
    secret = password + (inner + "Tq9" if inner else "")
    text = form.format(secret) + sep + follower
    out, n = redact_text(text, make_policy(b"k"))
    assert n == 1 and secret not in out and out.endswith(sep + follower), (text, out)
    outside = re.sub(r"\[secret:[^\]]*\]", "", out)  # the placeholder's own words ("secret") are not the password's
    assert not any(part in outside for part in ("Tq9", password[4:]) if len(part) >= 3), (text, out)
    alone, _ = redact_text(form.format(secret), make_policy(b"k"))
    assert out == alone + sep + follower, (text, out, alone)


@given(
    value=st.from_regex(r"[a-z]{3,8}[0-9]{1,3}[a-z]{0,8}", fullmatch=True),
    key=st.sampled_from(["password", "db_password", "secret", "api_key", "token"]),
    op=st.sampled_from([";", "&&", "||"]),
    follower=st.sampled_from([" also", " make test", "", "\n", " ls -la"]),
)
@settings(max_examples=examples(150), deadline=None)
def test_a_shell_assignment_is_judged_the_same_whatever_command_follows_it(value, key, op, follower):
    """Holes finding: ``password=hunter2secret; also`` stayed in clear while ``password=hunter2secret`` alone was
    redacted: the list operator after it made the line read as code, and a lower-case value in code reads as a
    variable. A shell assignment (no space at the ``=``) is judged as the same assignment alone on its line,
    whatever command a ``;``, ``&&`` or ``||`` adds; code (``password = input; foo``) keeps its reading."""
    policy = make_policy(b"k")
    alone, n_alone = redact_text(f"{key}={value}", policy)
    out, n = redact_text(f"{key}={value}{op}{follower}", policy)
    assert n == n_alone and out == alone + op + follower, (alone, out)
    code, _ = redact_text(f"{key} = input; foo", policy)
    assert code == f"{key} = input; foo"
