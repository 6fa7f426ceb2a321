"""Bad input to ``Lantern.recover_compaction`` and the block's invariants, generated (issue 34, "Bad input").

Generated sessions hold paths, flags, commands, identifiers, regex and markdown metacharacters, backticks, CJK,
emoji, RTL text and line breaks, rendered as archived turns; summaries are any text. The packer's invariants are
checked on ``find_loss`` + ``pack_loss`` directly (hundreds of examples); the rest runs through the real SQLite store
and embedder, the CLI (tests/clirun.py) and the summary reader. Properties: the block never exceeds the budget;
every line is headed ``- turn N[ · where]: `` in every mode and traces to the archived entry it came from; no
packed item holds another; an excerpt adds a word; a summary is bounded (``compaction.MAX_SUMMARY_CHARS``) and read
boundedly from a file, refused with a precise error when binary or not UTF-8; a secret it quotes never comes back;
the JSON has one shape; forgotten and pruned entries give nothing; the same call twice gives the same block and
writes nothing; the scan stays linear in the live context and the archived text.
"""

from __future__ import annotations

import io
import json
import random
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern as cli
from lantern import Lantern, compaction
from lantern.compaction import MAX_SUMMARY_CHARS, SUMMARY_CUT, read_summary, summary_text
from lantern.errors import LanternError
from lantern.model import split_rendered
from lantern.recover.loss import _parts, find_loss, live_blocks
from lantern.recover.loss_pack import EXCERPTS, TITLE, VERBATIM, pack_loss
from lantern.text.clean import normalize_space
from lantern.text.tags import extract_tags

HEAD = re.compile(r"^- turn (\d+)(?: · ([^:]+))?: ")
TITLES = (TITLE, EXCERPTS, VERBATIM)

SPECIFIC = st.one_of(
    st.builds(
        lambda d, n, e: f"{d}/{n}{e}",
        st.sampled_from(["src/billing", "cmd/cli", "/srv/app"]),
        st.from_regex(r"[a-z_]{3,12}", fullmatch=True),
        st.sampled_from([".py", ".go", ".ts", ".md"]),
    ),
    st.from_regex(r"--[a-z]{2,8}(-[a-z0-9]{1,6})?", fullmatch=True),
    st.from_regex(r"[a-z]{3,8}[A-Z][a-z]{2,8}[0-9]{0,3}", fullmatch=True),
    st.sampled_from(
        [
            "a.*b[0-9]+",
            "`rm -rf build/`",
            "$(pwd)/x",
            "**bold**",
            "[link](http://x.io/a?b=1)",
            "C:\\w\\x",
            "^(foo|bar)$",
            "0x1f2e3d4c",
            "5433",
            "v1.2.3",
            "9c1b2d7e8a3f4e61b0d2",
            "端口5433",
            "ポート",
            "🔥deploy",
            "שלום/path.py",
            "\\d+\\s*",
        ]
    ),
)
PROSE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=60)


@st.composite
def turns(draw, max_turns: int = 8) -> list[tuple[int, int, str]]:
    """``(id, turn, text)`` of a session rendered as archived entries are (``Message.render``): user and
    assistant messages, tool calls (JSON arguments) and their results, or turns of tool calls only."""
    out = []
    for t in range(draw(st.integers(1, max_turns))):
        v = draw(st.lists(SPECIFIC, min_size=1, max_size=5))
        lines = []
        if draw(st.booleans()):
            lines.append(f"user: {draw(PROSE)} {v[0]}")
        args = json.dumps({"command": f"{v[-1]} && ls {v[0]}", "description": draw(PROSE)}, ensure_ascii=False)
        lines.append(f"assistant -> tool call Bash({args})")
        lines.append(f"tool result Bash: {draw(PROSE)}\n{' '.join(v)}\n{draw(PROSE)}")
        if draw(st.booleans()):
            lines.append(f"assistant: {draw(PROSE)} {v[len(v) // 2]} {draw(PROSE)}")
        out.append((t + 1, t, "\n".join(lines)))
    return out


def check_block(loss, block, budget: int) -> None:
    """Every invariant of a packed block (module docstring)."""
    text = block.text
    assert len(text) <= budget
    lines = text.split("\n") if text else []
    body = [x for x in lines if x not in TITLES]
    if text:
        assert lines[0] in (TITLE, VERBATIM)
    verbatim = bool(text) and lines[0] == VERBATIM
    # every line of every mode has one head; a line without one continues a verbatim block's text
    segments: list[str] = []
    for x in lines:
        if HEAD.match(x) or x in TITLES or not segments:
            segments.append(x)
        else:
            segments[-1] += "\n" + x
    heads = [x for x in segments if x not in TITLES]
    assert all(HEAD.match(x) for x in heads)
    assert verbatim or heads == body, [x for x in body if not HEAD.match(x)]
    # traced: the lines of each cited entry are the block's lines, and each is a line of that entry's turn
    cited = [x for e in block.lines for x in block.lines[e]]
    assert sorted(cited) == sorted(heads) and set(block.cited) == set(block.lines)
    for entry_id, their in block.lines.items():
        for x in their:
            assert int(HEAD.match(x)[1]) == block.cited[entry_id]
    packed = [it for it in loss.items if it.packed]
    for it in packed:
        assert any(it.value in x for x in block.lines[it.last.entry_id]), it.value
    for it in loss.items:
        if it.covered_by is not None:
            assert not it.packed and it.value in it.covered_by and it.covered_by in text
    if not verbatim:  # never packed twice: no packed value holds another
        values = [it.value for it in packed]
        assert not [(a, b) for a in values for b in values if a is not b and a != b and a in b]
        if EXCERPTS in lines:  # each excerpt adds a word the block above it does not hold
            at = lines.index(EXCERPTS)
            for k in range(at + 1, len(lines)):
                shown = _parts("\n".join(lines[:k]))
                excerpt = HEAD.sub("", lines[k])
                assert _parts(excerpt) - shown, lines[k]


@given(turns(), PROSE, st.integers(0, 4000), st.data())
@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_block_keeps_its_invariants(session, summary, budget, data):
    live_n = data.draw(st.integers(0, len(session)))
    live = normalize_space("\n".join(t[2] for t in session[len(session) - live_n :]))
    loss = find_loss(session, summary, live, "")
    block = pack_loss(loss, budget)
    check_block(loss, block, budget)
    again = pack_loss(loss, budget)
    assert again.text == block.text  # the same loss packs to the same block


def test_a_heavier_part_packed_first_is_covered_by_the_line_that_holds_it():
    """The flag alone and then the command holding it: the flag gives its room back (it was packed twice)."""
    call = 'assistant -> tool call Bash({"command": "go test ./... --invoice-2"})'
    session = [(1, 0, call + "\ntool result Bash: " + "ok " * 200)]  # too long to come back verbatim
    loss = find_loss(session, "", "")
    by_value = {it.value: it for it in loss.items}
    flag, command = by_value["--invoice-2"], by_value["go test ./... --invoice-2"]
    loss.items = [flag, command]  # the flag heavier
    block = pack_loss(loss, 300)
    assert block.text.split("\n")[1] == "- turn 0: go test ./... --invoice-2"
    assert command.packed and not flag.packed and flag.covered_by == command.value


@given(
    st.lists(st.text(st.sampled_from("ab c\n"), max_size=90), max_size=6),
    st.text(st.sampled_from("ab c"), max_size=300),
)
@settings(max_examples=examples(400), deadline=None)
def test_the_live_test_is_the_substring_test(texts, live):
    live = normalize_space(live + (texts[0] if texts else ""))
    assert live_blocks(texts, live) == [bool(t.strip()) and normalize_space(t) in live for t in texts]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "user: ",
                    "assistant: ",
                    "assistant -> tool call Bash(",
                    "tool result X: ",
                    "toolbox ",
                    "",
                    "user (a): ",
                ]
            ),
            PROSE,
        ),
        max_size=12,
    )
)
@settings(max_examples=examples(300), deadline=None)
def test_split_rendered_is_the_inverse_of_render(parts):
    """Each block's text is the slice of the entry from its content to its last line (a call's closing parenthesis
    dropped), in order: what the line-by-line concatenation gave, now in linear time."""
    text = "\n".join(p + body for p, body in parts)
    blocks = split_rendered(text)
    for b, after in zip(blocks, [*blocks[1:], None]):
        assert b.start == 0 or text[b.start - 1] == "\n"
        end = after.start - 1 if after is not None else len(text)
        piece = text[b.start : end]
        assert piece.endswith(b.text + (")" if b.kind == "call" and not piece.endswith(b.text) else ""))


def test_the_scan_is_linear_in_the_live_context_and_the_archive():
    """CPU time at 8x the input stays far below the 64x of a quadratic scan (a substring test per block was blocks
    × live); the best of two runs at each size, since one CPU-time sample on a shared machine can be 2x off."""

    def run(scale: int) -> float:
        rng = random.Random(scale)
        session = [
            (i + 1, i, f"user: fix item{rng.randrange(10**9)} now\nassistant: done with step{rng.randrange(10**9)}")
            for i in range(400 * scale)
        ]
        live = " ".join(f"live{rng.randrange(10**9)}" for _ in range(30_000 * scale))
        started = time.process_time()
        find_loss(session, "", live, "")
        return time.process_time() - started

    run(1)  # warm the caches and the imports
    small, large = min(run(1) for _ in range(2)), min(run(8) for _ in range(2))
    assert large < 24 * small, (small, large)


def test_one_huge_turn_is_read_in_linear_time():
    """A 5 MB tool output in one block: splitting it back (split_rendered) and finding the lines of the items
    (Loss.lines) read it a bounded number of times (both were quadratic or items × block)."""
    rng = random.Random(5)
    body = "\n".join(f"src/pkg{rng.randrange(10**6)}/mod_{i}.py --flag-{i}" for i in range(120_000))
    session = [
        (
            1,
            0,
            'user: list the tree\nassistant -> tool call Bash({"command": "find . -name \'*.py\'"})\n'
            f"tool result Bash: {body}",
        )
    ]
    tags = {1: extract_tags(session[0][2][:64_000])}  # the stored hints: a long entry's are its window's
    started = time.process_time()
    loss = find_loss(session, "", "", "", tags=tags)
    block = pack_loss(loss, 6000)
    took = time.process_time() - started
    check_block(loss, block, 6000)
    assert len(loss.items) > 100 and took < 10, took  # ~1 s here; it was ~7 s, and quadratic


def test_loss_lines_agree_with_line():
    session = [(1, 0, "tool result X: " + " ".join(f"v{i}x y{i}" for i in range(400)))]
    loss = find_loss(session, "", "")
    pairs = [(it.last, it.value) for it in loss.items]
    assert loss.lines(pairs) == [(loss.line(s, v), loss.line_key(s, v)) for s, v in pairs]


@given(
    st.lists(st.text(st.sampled_from("abcde"), min_size=1, max_size=9), min_size=40, max_size=120),
    st.sampled_from([" ", "  ", " \n"]),
    st.integers(0, 10**6),
)
@settings(max_examples=examples(300), deadline=None)
def test_an_excerpt_is_cut_at_word_boundaries_around_its_value(words, gap, seed):
    text = gap.join(words) if gap != " \n" else " ".join(words[:40]) + "\n" + " ".join(words[40:])
    value = words[random.Random(seed).randrange(len(words))]
    session = [(1, 0, "tool result X: " + text)]
    loss = find_loss(session, "", "")
    from lantern.recover.loss import Seen

    line = loss.line(Seen(1, 0, "result", "X", 0), value)
    core = line.removeprefix("… ").removesuffix(" …")
    assert value in core and core in normalize_space(text)
    whole = normalize_space(text.split("\n")[[value in x for x in text.split("\n")].index(True)])
    assert (" " + core + " ") in (" " + whole + " ")  # whole words only, cut or not
    assert line.startswith("… ") == (not whole.startswith(core)) and line.endswith(" …") == (not whole.endswith(core))


# ---------------------------------------------------------------------------------------------- through the store


def conversation(seed: int, n: int = 8) -> tuple[list[dict], list[list[str]]]:
    """Messages of ``n`` turns, each naming values of its own, and the values per turn."""
    rng = random.Random(seed)
    msgs, values = [], []
    for i in range(n):
        mine = [f"src/mod_{seed}_{i}/handler_{rng.randrange(10**6)}.py", f"--opt-{seed}-{i}", f"fnCall{seed}x{i}"]
        values.append(mine)
        msgs.append({"role": "user", "content": f"Edit {mine[0]} and add {mine[1]}."})
        msgs.append({"role": "assistant", "content": f"Done: {mine[2]} in {mine[0]} takes {mine[1]} now."})
    return msgs, values


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("rci") / "rci.db"
    with Lantern(path) as lt:
        for seed in range(2):
            lt.archive(conversation(seed)[0], session=f"c{seed}")
    return path


def test_a_summary_over_the_limit_is_cut_with_a_reason_and_still_gets_its_block(db):
    """A summary of 1,000,001 characters (a hook or the proxy reads what the host wrote) is read up to the limit:
    the block is made as for the cut summary, and says why (it was a ValueError: nothing injected)."""
    msgs, values = conversation(0)
    summary = "x " * (MAX_SUMMARY_CHARS // 2) + "y"
    with Lantern(db) as lt:
        rec = lt.recover_compaction(summary, live=msgs[-2:], session="c0", budget=2000)
        at_limit = lt.recover_compaction(summary[:MAX_SUMMARY_CHARS], live=msgs[-2:], session="c0", budget=2000)
    assert rec.text and rec.chars <= 2000 and rec.text == at_limit.text
    assert rec.reason == SUMMARY_CUT and "1,000,001 characters" in rec.detail
    assert at_limit.reason is None and values[0][0] in rec.text


@given(
    st.integers(1, 400),
    st.text(st.sampled_from("ab \n"), min_size=1, max_size=300),
    st.integers(0, 7),
    st.booleans(),
)
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_summary_past_the_limit_is_read_as_its_cut_prefix_and_what_lies_past_the_cut_counts_as_lost(
    db, limit, filler, turn, stated_before
):
    """For any limit and any summary past it: the block is the block of ``summary_text``'s cut (a prefix of at
    most ``limit`` characters that ends at a whitespace when one is near), ``reason`` summary_cut and ``detail``
    gives both lengths; a value the summary states only past the cut comes back, one stated before it does not."""
    msgs, values = conversation(0)
    value = values[turn][0]
    head = (value + " " if stated_before else "") + filler
    summary = (head * (limit // len(head) + 1))[:limit] + " " + value + " " + filler
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compaction, "MAX_SUMMARY_CHARS", limit)
        cut, detail = summary_text(summary)
        assert summary.startswith(cut) and len(cut) <= limit and f"{len(summary):,} characters" in detail
        with Lantern(db) as lt:
            rec = lt.recover_compaction(summary, live=[], session="c0", budget=4000)
            plain = lt.recover_compaction(cut, live=[], session="c0", budget=4000)
    assert rec.text == plain.text and rec.loss.to_json() == plain.loss.to_json()
    assert rec.reason == (plain.reason or SUMMARY_CUT) and detail in rec.detail
    lost = {i.value for i in rec.loss.items}
    assert (value in lost) == (value not in cut)


@given(st.binary(max_size=200))
@settings(max_examples=examples(300), deadline=None)
def test_a_summary_file_is_utf8_text_or_a_precise_error(data):
    try:
        text = read_summary("-", io.BufferedReader(io.BytesIO(data)))
    except LanternError as e:
        assert "NUL byte at offset" in str(e) or "not UTF-8 text" in str(e)
        assert b"\x00" in data or not _utf8(data)
        return
    assert b"\x00" not in data and text == data.decode("utf-8").removeprefix("\ufeff")


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class _Endless(io.RawIOBase):
    """A stream that never ends, counting what was read of it."""

    def __init__(self):
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, b):
        b[:] = b"a" * len(b)
        self.read_bytes += len(b)
        return len(b)


def test_a_summary_is_read_boundedly_never_whole():
    raw = _Endless()
    with pytest.raises(LanternError, match="over the limit"):
        read_summary("-", io.BufferedReader(raw))
    assert raw.read_bytes <= 4 * MAX_SUMMARY_CHARS + 1 + io.DEFAULT_BUFFER_SIZE


@pytest.mark.parametrize(
    "content,words",
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary data (a NUL byte at offset 8)"),
        (b"summary caf\xe9 latin-1", "not UTF-8 text (byte 0xe9 at offset 11)"),
        (b"x" * (4 * MAX_SUMMARY_CHARS + 8), "over the limit of 1,000,000 characters"),
        ("é" * (MAX_SUMMARY_CHARS + 1), "over the limit of 1,000,000 characters"),
    ],
)
def test_the_cli_refuses_a_bad_summary_file_in_one_line(db, tmp_path, content, words):
    path = tmp_path / "summary.bin"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    r = cli("recover", "--summary", path, "--session", "c0", db=db, env={"LANTERN_DAEMON": "0"})
    err = r.stderr.decode()
    assert r.returncode == 1 and words in err and "Traceback" not in err, err
    r = cli("recover", "--summary", "-", "--session", "c0", db=db, input=path.read_bytes()[:4096] + b"\x00")
    assert r.returncode == 1 and "NUL byte" in r.stderr.decode()


def test_recover_json_has_one_shape_whatever_the_result(db):
    msgs, values = conversation(0)
    shapes = {}
    with Lantern(db) as lt:
        shapes["nothing_archived"] = lt.recover_compaction("s", live=msgs[-2:], session="nobody").to_json()
        shapes["nothing_lost"] = lt.recover_compaction("s", live=msgs, session="c0").to_json()
        shapes["budget"] = lt.recover_compaction("s", live=msgs[-2:], session="c0", budget=5).to_json()
        shapes[None] = lt.recover_compaction("s", live=msgs[-2:], session="c0").to_json()
    assert {k: v["reason"] for k, v in shapes.items()} == {k: k for k in shapes}
    assert len({tuple(sorted(v)) for v in shapes.values()}) == 1, {k: sorted(v) for k, v in shapes.items()}
    assert len({tuple(sorted(v["loss"])) for v in shapes.values()}) == 1
    assert shapes["nothing_archived"]["loss"]["lost"] == 0
    r = cli("recover", "--summary", "-", "--session", "nobody", "--json", db=db, input=b"s")
    assert r.returncode == 0 and json.loads(r.stdout)["loss"]["lost"] == 0


SECRETS = st.one_of(
    st.from_regex(r"ghp_[A-Za-z0-9]{36}", fullmatch=True),
    st.from_regex(r"AKIA[A-Z2-7]{16}", fullmatch=True),
    st.from_regex(r"sk-ant-api03-[A-Za-z0-9_-]{40}", fullmatch=True),
)


@given(SECRETS, st.sampled_from(["We used {} to push.", "token={}", "`{}`", "{}\n{}"]))
@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_secret_the_summary_or_the_task_quotes_never_comes_back(db, secret, form):
    from openai_fake import FakeLLM, answer

    msgs, _ = conversation(1)
    live = [*msgs[-2:], {"role": "user", "content": f"push with {secret} please"}]
    summary = form.format(secret, secret)
    with Lantern(db) as lt, FakeLLM([answer('{"ids": [0]}')]) as fake:
        rec = lt.recover_compaction(summary, live=live, session="c1", rerank=True, llm=fake.settings())
        sent = json.dumps(fake.requests)
    assert secret not in rec.query and secret not in json.dumps(rec.to_json()) and secret not in rec.text
    assert secret not in sent and "[secret:" in rec.query


def test_forgotten_and_pruned_entries_give_nothing(tmp_path):
    msgs, values = conversation(7)
    with Lantern(tmp_path / "f.db") as lt:
        lt.archive(msgs, session="f")
        ids = [i for i, _, _ in lt.store.session_turns("f", lt.scope)]
        lt.forget(entry=ids[1])
        lt.store.db.execute("UPDATE entries SET confidence = 0.01 WHERE id = ?", (ids[2],))
        for budget in (300, 2000, 100_000):
            rec = lt.recover_compaction("", session="f", budget=budget)
            assert rec.text
            held = {v for it in rec.loss.items for v in [it.value]}
            for gone in values[1] + values[2]:
                assert gone not in rec.text and gone not in held
            assert {e.id for e in rec.entries} <= set(ids) - {ids[1], ids[2]}


def test_the_same_call_twice_gives_the_same_block_and_writes_nothing(db, tmp_path):
    import shutil
    import sqlite3

    path = tmp_path / "same.db"
    shutil.copy(db, path)
    msgs, _ = conversation(0)

    def tables():
        con = sqlite3.connect(path)
        try:
            return {
                t: con.execute(f"SELECT count(*) FROM {t}").fetchone()
                for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%fts%'")
            }, con.execute("SELECT sum(confidence), sum(access_count) FROM entries").fetchone()
        finally:
            con.close()

    before = tables()
    with Lantern(path) as lt:
        first = lt.recover_compaction("Edit the handlers.", live=msgs[-2:], session="c0", budget=1500).to_json()
        second = lt.recover_compaction("Edit the handlers.", live=msgs[-2:], session="c0", budget=1500).to_json()
    assert first == second and first["text"]
    assert tables() == before
    with Lantern(path) as lt:
        lt.recover_compaction("Edit the handlers.", live=msgs[-2:], session="c0", record=True)
        assert len(lt.events()) == 1  # a recorded call records one event


@pytest.mark.parametrize("live", ["a string", {"role": "user"}, 5, [None], [1.5], [True], [b"bytes"]])
def test_a_bad_live_context_is_a_type_error_naming_live(db, live):
    with Lantern(db) as lt, pytest.raises(TypeError, match=r"^live "):
        lt.recover_compaction("s", live=live, session="c0")


def test_a_live_context_given_as_an_iterator_counts_as_the_same_list(db):
    msgs, _ = conversation(0)
    with Lantern(db) as lt:
        listed = lt.recover_compaction("s", live=msgs[-3:], session="c0", budget=1200)
        once = lt.recover_compaction("s", live=iter(msgs[-3:]), session="c0", budget=1200)
    assert once.to_json() == listed.to_json() and once.query == listed.query


def test_a_summary_that_is_the_whole_archive_loses_nothing(db):
    with Lantern(db) as lt:
        whole = "\n".join(text for _, _, text in lt.store.session_turns("c0", lt.scope))
        rec = lt.recover_compaction(whole, session="c0")
    assert rec.text == "" and rec.reason == "nothing_lost" and rec.loss.kept > 0 and rec.loss.items == []


def test_the_cli_names_a_summary_file_it_cannot_read(db, tmp_path):
    for path in (tmp_path / "missing.txt", tmp_path):
        r = cli("recover", "--summary", path, "--session", "c0", db=db)
        err = r.stderr.decode()
        assert r.returncode == 1 and f"summary {path}: cannot read it" in err and "Traceback" not in err, err
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"\xef\xbb\xbf")  # a BOM alone: no summary, everything not live is lost
    r = cli("recover", "--summary", empty, "--session", "c0", "--json", db=db)
    assert r.returncode == 0 and json.loads(r.stdout)["loss"]["lost"] > 0


def test_eval_names_an_unknown_dataset_before_a_missing_extra(monkeypatch, tmp_path):
    import importlib

    eval_command = importlib.import_module("lantern.cli.eval")  # the module, not the builtin the package shadows
    monkeypatch.setattr(eval_command, "importable", lambda module: False)  # as without the eval extra
    r = cli("eval", "bogus", "--data", tmp_path, "--out", tmp_path / "out")
    err = r.stderr.decode()
    assert r.returncode == 2 and "unknown dataset 'bogus'" in err and "realcompact" in err and "extra" not in err


@pytest.mark.parametrize("session", [5, b"c0", 1.5, ["c0"]])
def test_a_session_that_is_not_a_string_is_a_type_error(db, session):
    with Lantern(db) as lt:
        for call in (lambda: lt.recover_compaction("s", session=session), lambda: lt.recover("q", session=session)):
            with pytest.raises(TypeError, match="^session must be a string, got "):
                call()


@given(st.sampled_from(["c0", "c1"]), PROSE, st.integers(0, 3000), st.integers(0, 16))
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_line_of_the_block_comes_back_with_its_entry(db, session, summary, budget, live_n):
    msgs, _ = conversation(int(session[1]))
    with Lantern(db) as lt:
        rec = lt.recover_compaction(summary, live=msgs[len(msgs) - live_n :], session=session, budget=budget)
        ids = {i: turn for i, turn, _ in lt.store.session_turns(session, lt.scope)}
    assert rec.chars == len(rec.text) <= budget and (rec.text == "") == (rec.reason is not None)
    lines = [x for x in rec.text.split("\n") if x not in TITLES] if rec.text else []
    assert all(HEAD.match(x) for x in lines)
    assert sorted(x for e in rec.entries for x in e.text.split("\n") if e.text) == sorted(lines)
    for e in rec.entries:
        assert e.text and ids[e.id] == e.turn and all(int(HEAD.match(x)[1]) == e.turn for x in e.text.split("\n"))


def test_recovering_while_another_handle_archives_the_session(tmp_path):
    """Reads only: a recovery beside a writer on the same file sees a consistent session (every cited entry is
    archived, the block within its budget), and the writer loses nothing."""
    import threading

    path = tmp_path / "c.db"
    with Lantern(path) as lt:
        lt.archive(conversation(0, 3)[0], session="c")
    errors: list[BaseException] = []
    done = threading.Event()

    def write() -> None:
        try:
            with Lantern(path) as lt:
                for k in range(1, 7):
                    lt.archive(conversation(k, 2)[0], session="c")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    writer = threading.Thread(target=write)
    writer.start()
    reads = 0
    with Lantern(path) as lt:
        while not done.is_set() or reads == 0:
            rec = lt.recover_compaction("the handlers", session="c", budget=1200)
            cited = {e.id for e in rec.entries}
            assert rec.chars <= 1200 and cited <= {i for i, _, _ in lt.store.session_turns("c", lt.scope)}
            reads += 1
        writer.join()
        assert not errors and len(lt.store.session_turns("c", lt.scope)) == 3 + 6 * 2
