"""Texts archived in clear (an older Lantern, older rules, redaction switched off) are redacted in place by
``lantern redact`` (``Lantern.redact_stored``, store/migrations.py ``rewrite_texts``): every secret of the text,
summary, tags, hints, meta, facts and the events' queries gone from the file's bytes, no entry lost, the rewritten
ones found again by their other words; one transaction per batch, so a run stopped part way resumes where it stopped;
a second run changes nothing."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirun import lantern as cli
from lantern import Lantern
from lantern.store import migrations

_ALNUM = "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
SECRETS = st.one_of(
    st.text(alphabet=_ALNUM, min_size=10, max_size=14).map(lambda s: f"password=Q7{s}!"),
    st.text(alphabet=_ALNUM, min_size=36, max_size=36).map(lambda s: "ghp_" + s),
    st.text(alphabet=_ALNUM, min_size=12, max_size=14).map(lambda s: f"--token Zx9{s}"),
)


def _secret_part(secret: str) -> str:
    """The bytes of ``secret`` that must not survive (past its keyword)."""
    return secret.split("=", 1)[-1].split(" ", 1)[-1]


def _clear_store(path: Path, secrets: list[str], plain: int) -> int:
    """A store with redaction off while ``secrets`` were archived (each in a turn of its own, with a tool call
    that quotes it) and ``plain`` turns without any; returns the entries."""
    with Lantern(path, "fake") as lt:
        lt.set_secret_redaction(False)
        for i, secret in enumerate(secrets):
            lt.archive(
                [
                    {"role": "user", "content": f"deploy service{i} with {secret} on port {7000 + i}"},
                    {"role": "assistant", "content": f"Set service{i} to listen on port {7000 + i} ({secret})."},
                ],
                session=f"s{i % 2}",
            )
        for i in range(plain):
            lt.archive([{"role": "user", "content": f"plain note {i} about the build cache"}], session="p")
        rec = lt.recover(f"service0 port {secrets[0]}" if secrets else "plain note", budget=500)
        lt.record_compaction(rec, session="s0", lost=[], source="api", reason="summary")
        with lt.store.transaction() as db:
            db.execute("UPDATE meta SET value = 'on' WHERE key = 'redact_secrets'")
        return lt.stats()["entries"]


def _raw(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secrets=st.lists(SECRETS, min_size=1, max_size=5, unique=True), plain=st.integers(0, 4), stop=st.integers(0, 3))
def test_secrets_archived_in_clear_are_redacted_in_place_and_a_stopped_run_resumes(monkeypatch, secrets, plain, stop):
    path = Path(tempfile.mkdtemp(prefix="redact")) / "old.db"
    entries = _clear_store(path, secrets, plain)
    assert all(_secret_part(s).encode() in _raw(path) for s in secrets)  # in clear, as an older Lantern left it
    monkeypatch.setattr(migrations, "TEXTS_BATCH", 2)
    batches = []

    def interrupt(done, total):
        batches.append(done)
        if len(batches) == stop:
            raise KeyboardInterrupt  # Ctrl-C between two batches: what they committed stays

    with Lantern(path, "fake") as lt:
        if stop:
            try:
                lt.redact_stored(progress=interrupt)
            except KeyboardInterrupt:
                pass
        checked, rewritten = lt.redact_stored()
        assert rewritten <= entries and lt.stats()["entries"] == entries  # none lost
        assert stop or rewritten >= len(secrets)
        assert lt.redact_stored() == (0, 0)  # done under these rules: a second run does nothing
        for i in range(len(secrets)):
            hits = lt.search(f"service{i} port {7000 + i}", k=5)
            assert any(f"service{i}" in h.entry.text for h in hits)
        texts = [t for _, t in lt.store.texts()]
        assert not [t for t in texts for s in secrets if _secret_part(s) in t]
        assert not [e.query for e in lt.events() for s in secrets if _secret_part(s) in e.query]
        lt.vacuum()
    raw = _raw(path)
    assert not [s for s in secrets if _secret_part(s).encode() in raw]


def test_lantern_redact_says_what_it_did_and_nothing_the_second_time(tmp_path):
    path = tmp_path / "old.db"
    _clear_store(path, ["password=Q7abcdefGHJK23!"], 1)
    first = cli("redact", db=path)
    assert first.returncode == 0 and b"entries checked, 1 rewritten" in first.stdout, first.stderr
    again = cli("redact", db=path)
    assert again.returncode == 0 and b"already redacted" in again.stdout
    assert b"Q7abcdefGHJK23" not in _raw(path)


def test_texts_in_clear_are_redacted_in_place_on_both_backends(db_location):
    """The same on PostgreSQL (every entry keeps a vector there: the stored one), through the same SQL."""
    secrets = ["password=Q7abcdefGHJK23!", "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"]
    with Lantern(db_location, "fake") as lt:
        lt.set_secret_redaction(False)
        for i, secret in enumerate(secrets):
            lt.archive([{"role": "user", "content": f"deploy service{i} with {secret} on port {7000 + i}"}], f"s{i}")
        with lt.store.transaction() as db:
            db.execute("UPDATE meta SET value = 'on' WHERE key = 'redact_secrets'")
    with Lantern(db_location, "fake") as lt:
        assert lt.redact_stored()[1] == len(secrets)
        assert lt.redact_stored() == (0, 0)
        texts = [t for _, t in lt.store.texts()]
        assert len(texts) == len(secrets) and not [t for t in texts for s in secrets if _secret_part(s) in t]
        assert any("service1" in h.entry.text for h in lt.search("service1 port 7001"))


FACT_SECRETS = st.tuples(
    st.sampled_from(["db", "staging", "admin", "redis", "smtp"]),
    st.sampled_from(["password", "passphrase", "passwd"]),  # prose the text rules redact ("the db password is X")
    st.permutations(list(_ALNUM)).map(lambda chars: "Tr0" + "".join(chars[:12]) + "x9"),  # a password's entropy
)


@settings(max_examples=10, deadline=None)
@given(facts=st.lists(FACT_SECRETS, min_size=1, max_size=3, unique_by=lambda f: f[2]))
def test_a_secret_held_as_a_fact_value_is_redacted_in_its_key_s_context(facts):
    """A fact extracted while redaction was off ("the db password is X" -> db password: X) keeps X alone in its value
    column, where no keyword precedes it: ``redact`` redacts it as the line "db password: X" (redact_fact_value)."""
    path = Path(tempfile.mkdtemp(prefix="redactfact")) / "old.db"
    with Lantern(path, "fake") as lt:
        lt.set_secret_redaction(False)
        for name, kind, secret in facts:
            lt.archive([{"role": "user", "content": f"the {name} {kind} is {secret}"}], session="s")
        held = [secret for *_, secret in facts if any(f.value == secret for f in lt.facts())]
        lt.set_secret_redaction(True)
    assert held, "no fact was extracted: the generator no longer reaches the fact path"
    with Lantern(path, "fake") as lt:
        lt.redact_stored()
        assert not [f.value for f in lt.facts() if f.value in held]
    raw = _raw(path)
    assert not [s for s in held if s.encode() in raw]
