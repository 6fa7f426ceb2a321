"""``Lantern.ingest(DIR)`` and ``lantern ingest DIR``: the walk (recursive, sorted, regular files only, symlink loops
and
second links read once, FIFOs never opened), per-file format detection into the real store with the fake embedder, the
skipped files and their reasons, a Claude Code project read once with its subagents, resume without duplicates, the
progress in bytes, and the CLI's summary and exit codes (in-process: tests/clirun.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern
from lantern import Lantern
from lantern.archive.directory import DirectoryResult, summary_lines, walk
from lantern.model import ArchiveResult

FIXTURES = Path(__file__).parent / "fixtures"
PARSE = FIXTURES / "parse"
PROJECT = FIXTURES / "claude_code_project"
SID = "3b9e5d24-8c1f-4a6e-b0d7-5f2a9c41e803"
TRANSCRIPTS = ["anthropic.json", "openai.json", "sharegpt.json", "swe_agent.traj", "codex_rollout.jsonl", "aider.md"]


@pytest.fixture
def tree(tmp_path) -> Path:
    """A folder as users have them: transcripts of several formats at several depths, a Claude Code project with
    its subagent folder, and files that are not transcripts (code, notes, binary, empty, a meta file), a FIFO, a
    broken link, a second link to a transcript and a symlink loop."""
    root = tmp_path / "chats"
    (root / "b" / "deep" / "deeper").mkdir(parents=True)
    (root / "a").mkdir()
    for i, name in enumerate(TRANSCRIPTS):
        shutil.copy(PARSE / name, root / ("a" if i % 2 else "b/deep") / name)
    shutil.copytree(PROJECT, root / "b" / "deep" / "deeper" / "-home-dev-api")
    (root / "notes.txt").write_text("remember to buy milk\n", encoding="utf-8")
    (root / "a" / "script.py").write_text("import os\nprint(os.getcwd())\n", encoding="utf-8")
    (root / "a" / "blob.bin").write_bytes(bytes(range(256)) * 8)
    (root / "empty.json").write_text("", encoding="utf-8")
    (root / "b" / "numbers.json").write_text("[1, 2, 3]", encoding="utf-8")
    os.mkfifo(root / "a" / "pipe.jsonl")  # never opened: reading a FIFO with no writer would block
    (root / "gone.json").symlink_to(root / "nowhere.json")
    (root / "b" / "same-openai.json").symlink_to(root / "a" / "openai.json")
    (root / "b" / "deep" / "deeper" / "up").symlink_to(root)  # a loop back to the top
    return root


WALKED = [
    "empty.json",
    "notes.txt",
    "a/aider.md",
    "a/blob.bin",
    "a/openai.json",
    "a/script.py",
    "a/swe_agent.traj",
    "b/numbers.json",
    "b/deep/anthropic.json",
    "b/deep/codex_rollout.jsonl",
    "b/deep/sharegpt.json",
    f"b/deep/deeper/-home-dev-api/{SID}.jsonl",
]
INGESTED = [
    "a/aider.md",
    "a/openai.json",
    "a/swe_agent.traj",
    "b/deep/anthropic.json",
    "b/deep/codex_rollout.jsonl",
    "b/deep/sharegpt.json",
    f"b/deep/deeper/-home-dev-api/{SID}.jsonl",
]


def rel(result: DirectoryResult, group: str) -> dict[str, str]:
    return {str(f.path.relative_to(result.root)): f.reason for f in getattr(result, group)}


def test_walk_lists_regular_files_sorted_and_survives_loops(tree):
    files, skipped = walk(tree)
    assert [str(p.relative_to(tree)) for p in files] == WALKED  # a folder's files by name, then its subfolders
    reasons = {str(f.path.relative_to(tree)): f.reason for f in skipped}
    assert reasons["a/pipe.jsonl"] == "not a regular file (FIFO)"
    assert reasons["gone.json"].startswith("broken symlink")
    assert reasons["b/same-openai.json"] == "same file as a/openai.json"
    assert reasons["b/deep/deeper/up"].startswith("folder already read")
    sub = f"b/deep/deeper/-home-dev-api/{SID}/subagents/agent-a3c7e91.jsonl"
    assert reasons[sub] == f"read with its session transcript b/deep/deeper/-home-dev-api/{SID}.jsonl"
    with pytest.raises(NotADirectoryError):
        walk(tree / "notes.txt")


def test_ingest_of_a_directory_equals_ingesting_each_file_and_resumes_without_duplicates(tree, tmp_path):
    seen: list[tuple[int, int]] = []
    with Lantern(tmp_path / "dir.db") as memory:
        result = memory.ingest(tree, progress=lambda done, total: seen.append((done, total)))
        sessions = memory.store.sessions()
        again = memory.ingest(tree)
    assert [str(f.path.relative_to(tree)) for f in result.ingested] == INGESTED  # walk order
    skipped = rel(result, "skipped")
    assert skipped["a/script.py"].startswith("not a transcript: line 1: invalid JSON")
    assert skipped["a/blob.bin"] == "not a transcript: binary data (contains NUL bytes)"
    assert skipped["empty.json"] == "not a transcript: empty"
    assert skipped["b/numbers.json"] == "no turns found (3 items skipped)"
    assert skipped["notes.txt"].startswith("not a transcript")
    assert result.failed == []
    assert f"{SID}/sidechain-a3c7e91" in sessions  # the subagent came with its session, once

    # a file in a subfolder is named by its path under the folder; one named by a session id keeps the id
    assert "a/aider" in sessions and SID in sessions
    # the same files ingested one by one into another database, each under its directory session: the same
    # sessions and the same counts
    with Lantern(tmp_path / "each.db") as each:
        counts = {}
        for f in result.ingested:
            name = (
                "/".join((*f.path.relative_to(tree).parent.parts, f.path.stem))
                if f.path.parent != tree and f.path.stem != SID
                else None
            )
            counts[f.path.name] = each.ingest(f.path, name).added
        assert each.store.sessions() == sessions
    assert counts == {f.path.name: f.result.added for f in result.ingested} and result.added == sum(counts.values())

    assert again.added == 0 and again.duplicates == result.added  # a second run (or a resumed one) adds nothing
    total = seen[-1][1]
    assert seen[-1] == (total, total) and total == sum(os.stat(p).st_size for p in walk(tree)[0])
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))  # one bar that only moves forward


def test_session_prefixes_each_files_session(tree, tmp_path):
    with Lantern(tmp_path / "m.db") as memory:
        result = memory.ingest(tree / "a", session="import-7")
        sessions = memory.store.sessions()
    assert sorted(f.result.session for f in result.ingested) == [
        "import-7/aider",
        "import-7/openai",
        "import-7/swe_agent",
    ]
    assert all(s.startswith("import-7/") for s in sessions)


def test_a_file_that_vanishes_mid_walk_fails_alone_and_earlier_files_stay_committed(tree, tmp_path):
    victim = tree / "b" / "numbers.json"

    def progress(done: int, total: int) -> None:
        victim.unlink(missing_ok=True)  # gone after the walk listed it, before its turn

    with Lantern(tmp_path / "m.db") as memory:
        result = memory.ingest(tree, progress=progress)
        entries = memory.stats()["entries"]
    assert rel(result, "failed") == {"b/numbers.json": "No such file or directory"}
    assert len(result.ingested) == len(TRANSCRIPTS) + 1 and entries >= result.added > 0


def test_summary_lists_every_file_with_its_reason(tree, tmp_path):
    with Lantern(tmp_path / "m.db") as memory:
        lines = summary_lines(memory.ingest(tree))
    assert lines[0].startswith(f"{tree}: 7 files ingested (") and " 0 failed" in lines[0]
    assert "  a/pipe.jsonl: not a regular file (FIFO)" in lines
    assert any(line.startswith("  a/openai.json: ") and "session a/openai" in line for line in lines)
    assert lines.index("skipped:") > lines.index("ingested:")
    skipped = [line.split(":")[0].strip() for line in lines[lines.index("skipped:") + 1 :]]
    assert skipped[:6] == [
        "empty.json",
        "gone.json",
        "notes.txt",
        "a/blob.bin",
        "a/pipe.jsonl",
        "a/script.py",
    ]  # walk order


# ------------------------------------------------------------------------------------------------ CLI


def cli(*args: str, db: Path) -> subprocess.CompletedProcess:
    """``lantern --db DB ARGS`` in-process (tests/clirun.py), $LANTERN_DB and $LANTERN_USER unset; text output."""
    proc = lantern(*args, db=db, env={"LANTERN_DB": None, "LANTERN_USER": None}, columns=None)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def test_cli_ingest_dir_prints_the_summary_and_exits_0(tree, tmp_path):
    db = tmp_path / "cli.db"
    r = cli("ingest", str(tree), db=db)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"{tree}: 7 files ingested (") and "  a/blob.bin: not a transcript" in r.stdout
    r = cli("ingest", str(tree), "--json", db=db)
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["added"] == 0 and data["duplicates"] > 0
    assert {f["path"] for f in data["skipped"]} >= {"a/script.py", "a/pipe.jsonl", "b/same-openai.json", "notes.txt"}
    with Lantern(db) as memory:
        assert memory.stats()["entries"] == data["duplicates"]
        hits = memory.search("which port does postgres listen on", k=3)
        assert len(hits) == 3 and any("5433" in h.entry.text for h in hits), [h.entry.text[:80] for h in hits]


def test_cli_ingest_dir_without_transcripts_exits_1_and_leaves_no_database(tmp_path):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "main.py").write_text("print('hi')\n", encoding="utf-8")
    (folder / "README.md").write_text("# Project\n\nNothing to see.\n", encoding="utf-8")
    db = tmp_path / "none.db"
    r = cli("ingest", str(folder), db=db)
    assert r.returncode == 1 and "no transcript with turns found under" in r.stderr
    assert "  main.py: not a transcript" in r.stdout and "  README.md: not a transcript" in r.stdout
    assert not db.exists() and not Path(str(db) + "-wal").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("ingest", str(empty), db=db)
    assert r.returncode == 1 and f"{empty}: 0 files ingested" in r.stdout and not db.exists()


def test_same_named_files_in_different_folders_stay_apart(tmp_path):
    """A breaker's finding: every repository's .aider.chat.history.md went into one session, and a turn of the
    second repository equal to one of the first was counted as already archived."""
    tree = tmp_path / "code"
    chat = "# aider chat started at 2024-08-06 08:47:10\n\n#### ok thanks\n\nYou are welcome.\n\n#### which port for {name}?\n\n{name} listens on {port}.\n"  # noqa: E501
    for name, port in (("repoA", 5433), ("repoB", 6543)):
        (tree / name).mkdir(parents=True)
        (tree / name / ".aider.chat.history.md").write_text(chat.format(name=name, port=port))
    with Lantern(tmp_path / "m.db", embedder="minilm") as memory:
        result = memory.ingest(tree)
        assert result.added == 4 and result.duplicates == 0
        sessions = memory.store.sessions()
        assert {s.split("/")[0] for s in sessions} == {"repoA", "repoB"}, sessions
        assert "5433" in memory.recover("which port", session="repoA").text
        assert "5433" not in memory.recover("which port", session="repoB").text


def test_subagent_files_the_session_does_not_read_are_not_reported_as_read(tree, tmp_path):
    """A breaker's finding: an agent file deeper than subagents.MAX_DEPTH folders, or under a symlinked folder, was
    listed as "read with its session transcript" although its text never reached the store."""
    subagents = tree / "b" / "deep" / "deeper" / "-home-dev-api" / SID / "subagents"
    agent = (subagents / "agent-a3c7e91.jsonl").read_text(encoding="utf-8")
    deep = subagents / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    (deep / "agent-deep5.jsonl").write_text(agent.replace("a3c7e91", "deep5"), encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "agent-linked1.jsonl").write_text(agent.replace("a3c7e91", "linked1"), encoding="utf-8")
    (subagents / "linkdir").symlink_to(outside)
    _, skipped = walk(tree)
    reasons = {str(f.path.relative_to(tree)): f.reason for f in skipped}
    prefix = f"b/deep/deeper/-home-dev-api/{SID}/subagents/"
    assert reasons[prefix + "agent-a3c7e91.jsonl"].startswith("read with its session transcript")
    for name in ("a/b/c/d/e/agent-deep5.jsonl", "linkdir/agent-linked1.jsonl"):
        assert "not read" in reasons[prefix + name], reasons[prefix + name]


def test_claude_code_s_compaction_agent_is_skipped_as_such(tree):
    """``agent-acompact-<id>.jsonl`` re-reads the whole conversation: skipped, and the reason says so (not the
    catch-all of files that are no subagent transcript)."""
    subagents = tree / "b" / "deep" / "deeper" / "-home-dev-api" / SID / "subagents"
    agent = (subagents / "agent-a3c7e91.jsonl").read_text(encoding="utf-8")
    (subagents / "agent-acompact-5d21f0.jsonl").write_text(agent.replace("a3c7e91", "acompact-5d21f0"), "utf-8")
    _, skipped = walk(tree)
    reasons = {str(f.path.relative_to(tree)): f.reason for f in skipped}
    reason = reasons[f"b/deep/deeper/-home-dev-api/{SID}/subagents/agent-acompact-5d21f0.jsonl"]
    assert "compaction agent" in reason and "not a subagent transcript" not in reason, reason


def test_a_file_replaced_by_a_folder_mid_walk_fails_alone(tree, tmp_path):
    """A breaker's finding: the folder was ingested as a nested directory and ``--json`` then crashed."""
    victim = tree / "b" / "numbers.json"

    def progress(done: int, total: int) -> None:
        if victim.is_file():
            victim.unlink()
            victim.mkdir()
            shutil.copy(PARSE / TRANSCRIPTS[0], victim / TRANSCRIPTS[0])

    with Lantern(tmp_path / "m.db") as memory:
        result = memory.ingest(tree, progress=progress)
    assert rel(result, "failed") == {"b/numbers.json": "no longer a regular file"}
    assert all(isinstance(f.result, ArchiveResult) for f in result.ingested)
    json.dumps(result.to_json())


def test_version_control_dependency_and_virtualenv_folders_are_listed_not_walked(tree, tmp_path):
    """A walk of a repository does not list every git object and installed package as "not a transcript": each such
    folder is one skipped line with its reason; given as the directory itself, it is walked."""
    repo = tree / "b"
    for name in (".git/objects/ab", "node_modules/left-pad", "env/lib/python3.11/site-packages", "__pycache__"):
        (repo / name).mkdir(parents=True)
    (repo / ".git" / "objects" / "ab" / "cdef").write_bytes(b"x\x9c" + bytes(40))
    (repo / "node_modules" / "left-pad" / "package.json").write_text('{"name": "left-pad"}', encoding="utf-8")
    (repo / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    shutil.copy(PARSE / "openai.json", repo / "node_modules" / "left-pad" / "chat.json")
    files, skipped = walk(tree)
    assert [str(p.relative_to(tree)) for p in files] == WALKED  # nothing inside them is listed
    reasons = {str(f.path.relative_to(tree)): f.reason for f in skipped}
    for folder in ("b/.git", "b/node_modules", "b/__pycache__"):
        assert reasons[folder].startswith("folder not walked: ") and "version-control" in reasons[folder]
    assert "virtual environment" in reasons["b/env"]
    assert not any(k.startswith(("b/.git/", "b/node_modules/", "b/env/")) for k in reasons)
    inside, _ = walk(repo / "node_modules")  # the folder itself, given as the directory: walked
    assert sorted(str(p.relative_to(repo / "node_modules")) for p in inside) == [
        "left-pad/chat.json",
        "left-pad/package.json",
    ]
    with Lantern(tmp_path / "vc.db") as memory:
        result = memory.ingest(tree)
    assert [str(f.path.relative_to(tree)) for f in result.ingested] == INGESTED
    assert "b/node_modules" in rel(result, "skipped")


def test_summary_escapes_control_and_bidi_characters_in_file_names(tmp_path):
    """A file named with a newline or an RTL override is one escaped summary line (a breaker's finding: the raw
    name split the summary's lines and reordered them on screen)."""
    root = tmp_path / "odd"
    root.mkdir()
    shutil.copy(PARSE / "openai.json", root / "two\nlines.json")
    (root / "evil\u202enosj.txt").write_text("not a transcript\n", encoding="utf-8")
    with Lantern(tmp_path / "odd.db") as memory:
        lines = summary_lines(memory.ingest(root))
    assert all("\n" not in line and "\u202e" not in line for line in lines)
    assert any(line.startswith("  two\\nlines.json: ") for line in lines)
    assert any(line.startswith("  evil\\u202enosj.txt: not a transcript") for line in lines)


def test_file_names_that_are_not_utf8_stay_distinct_sessions(tmp_path):
    """Two files whose names hold Latin-1 bytes used to become one session named "caf\ufffd"; the bytes are now
    written as \\xNN escapes, in a directory ingest and a single-file ingest alike."""
    import os

    from lantern import Lantern

    d = tmp_path / "logs"
    d.mkdir()
    for raw, port in ((b"caf\xe9.jsonl", 5433), (b"caf\xe8.jsonl", 6380)):
        path = os.path.join(os.fsencode(d), raw)
        with open(path, "wb") as f:
            f.write(
                b'{"role": "user", "content": "the service runs on port %d"}\n'
                b'{"role": "assistant", "content": "noted"}\n' % port
            )
    lantern = Lantern(tmp_path / "db.sqlite")
    lantern.ingest(d)
    sessions = {s for (s,) in lantern.store.db.execute("SELECT DISTINCT session FROM entries")}
    assert sessions == {"caf\\xe9", "caf\\xe8"}
    single = Lantern(tmp_path / "single.sqlite")
    assert single.ingest(Path(os.fsdecode(os.path.join(os.fsencode(d), b"caf\xe9.jsonl")))).session == "caf\\xe9"


_BAD_FILES = {
    "binary": st.binary(min_size=1, max_size=40).map(lambda b: b + b"\x00" + b),
    "invalid UTF-8": st.binary(min_size=0, max_size=20).map(lambda b: b"{" + b + b"\xff\xfe\x80}"),
    "empty": st.sampled_from([b"", b"   \n", b"\n\n\t"]),
    "invalid JSON": st.text(alphabet="abcxyz ;=", min_size=1, max_size=30).map(lambda t: ("q" + t).encode()),
    "no messages": st.sampled_from([b'{"a": 1}', b"[1, 2]", b"7", b'"text"', b'{"messages": 3}', b"null"]),
    "too deep": st.integers(2000, 5000).map(lambda n: b"[" * n + b"]" * n),
}


@given(
    kind=st.sampled_from(sorted(_BAD_FILES)),
    data=st.data(),
    stem=st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
    suffix=st.sampled_from([".json", ".jsonl", ".txt", ".md"]),
    # every format but aider, which reads any text
    fmt=st.sampled_from([None, "claude-code", "sharegpt", "openai", "anthropic", "codex", "swe_agent"]),
)
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_bad_file_is_named_once_with_its_reason_once(tmp_path, kind, data, stem, suffix, fmt):
    """Whatever is wrong with a file, the line about it names the file once and says it is not a transcript once:
    the folder summary said "not a transcript: not a text transcript (binary data ...)", a single .json without
    messages was an error naming no file at all."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    path = folder / f"{stem}{suffix}"
    path.write_bytes(data.draw(_BAD_FILES[kind]))
    db = tmp_path / "bad.db"
    fmt_args = ("--format", fmt) if fmt else ()
    single = cli("ingest", str(path), *fmt_args, db=db)
    whole = cli("ingest", str(folder), *fmt_args, db=db)
    lines = [line for line in single.stderr.splitlines() if line.startswith("error:")]
    lines += [line for line in whole.stdout.splitlines() if line.startswith(f"  {path.name}:")]
    assert len(lines) == 2, (single, whole)
    for line in lines:
        assert "Traceback" not in line and line.count(path.name) == 1, line
        low = line.lower()
        assert low.count("not a ") <= 1 and low.count("transcript") <= 1, line
