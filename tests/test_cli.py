"""The ``lantern`` command as a user runs it: a real database file, the fake embedder (tests/conftest.py); in the test
process (tests/clirun.py: typer's CliRunner, a real pseudo-terminal where the command must see one), and as real
processes for what only a process shows (the entry point, a missing extra at import time, file modes in a user
namespace, a full disk in a mount namespace; ``test_in_process_runs_print_what_a_process_prints`` checks the two
agree)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern
from lantern import Lantern
from lantern.embed import default_embedder_name, embedder_class

LANTERN = [sys.executable, "-m", "lantern.cli"]
FIXTURES = Path(__file__).parent / "fixtures" / "parse"


def run(*args, db: Path, check: bool = True, input: bytes | None = None) -> subprocess.CompletedProcess:
    proc = lantern(*args, db=db, input=input, columns=200)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr.decode()}")
    return proc


@pytest.fixture()
def transcript(tmp_path):
    path = tmp_path / "chat.jsonl"
    lines = [
        {"role": "user", "content": "Which port did we give the staging Redis?"},
        {"role": "assistant", "content": "Staging Redis listens on port 6380, set in deploy/staging/redis.conf."},
        {"role": "user", "content": "And the log level?"},
        {"role": "assistant", "content": "LOG_LEVEL=debug in .env.staging."},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_ingest_recover_search_stats_round_trip(tmp_path, transcript):
    db = tmp_path / "cli.db"
    out = run("ingest", str(transcript), "--json", db=db)
    result = json.loads(out.stdout)
    assert len(result.pop("entry_ids")) == 2
    assert result == {"session": "chat", "added": 2, "duplicates": 0, "skipped": 0, "redacted": 0, "warnings": []}
    again = json.loads(run("ingest", str(transcript), "--json", db=db).stdout)
    assert (again["added"], again["duplicates"]) == (0, 2)

    rec = json.loads(run("recover", "redis port for staging", "--json", db=db).stdout)
    assert set(rec) == {"text", "chars", "reason", "detail", "relevance", "entries"} and rec["reason"] is None
    assert "6380" in rec["text"] and rec["chars"] == len(rec["text"]) <= 6000
    assert set(rec["entries"][0]) == {"id", "session", "turn", "score", "text"}
    assert rec["entries"][0]["session"] == "chat"

    hits = json.loads(run("search", "LOG_LEVEL", "--json", db=db).stdout)
    assert "LOG_LEVEL" in hits[0]["summary"]

    explain = run("search", "redis port", "--explain", db=db).stdout.decode()
    assert "packed" in explain and "RRF" in explain

    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["entries"] == 2 and stats["embedder"] == embedder_class(default_embedder_name()).id

    assert "1 entry forgotten" in run("forget", "--yes", "--entry", str(rec["entries"][0]["id"]), db=db).stdout.decode()


def test_bad_input_is_one_clear_line_not_a_traceback(tmp_path):
    db = tmp_path / "cli.db"
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    proc = run("ingest", str(binary), db=db, check=False)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "Traceback" not in err and "error:" in err

    proc = run("ingest", str(tmp_path / "missing.jsonl"), db=db, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr.decode()

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"role": "user", "content": "ok"}\n{not json\n', encoding="utf-8")
    proc = run("ingest", str(broken), db=db)
    assert "1 item skipped" in proc.stdout.decode()
    assert "line 2" in proc.stderr.decode()


def test_embedder_mismatch_from_cli(tmp_path, transcript):
    db = tmp_path / "cli.db"
    run("ingest", str(transcript), db=db)
    proc = lantern("--embedder", "minilm", "stats", db=db, columns=None)
    assert proc.returncode == 1 and "reindex" in proc.stderr.decode()
    out = run("reindex", "--embedder", "minilm", db=db).stdout.decode()
    assert "2 entries re-embedded with minilm-l6-v2-int8" in out
    assert "6380" in json.loads(run("recover", "redis port", "--json", db=db).stdout)["text"]
    # the target given twice, differently, is a usage error, not a silent pick (newcomer finding)
    proc = lantern("--embedder", "minilm", "reindex", "--embedder", "use", db=db, columns=None)
    assert proc.returncode == 2 and b"differ" in proc.stderr


def test_demo_tells_the_story_first_then_prints_real_figures(tmp_path):
    """Issue 37: per session, the compaction, then one line per lost fact (back from which turn, or not), before
    the figures; the block only with --show-block; the 97 calls -> 86 turns explained."""
    proc = lantern("demo", columns=200)
    assert proc.returncode == 0, proc.stderr.decode()
    out = proc.stdout.decode()
    assert "facts lost" in out and "archive latency per turn: p50" in out
    assert "No network, no LLM calls." in out
    lost, recovered = map(int, re.search(r"│ all .*?│\s+(\d+) │\s+(\d+) \(", out).groups())
    assert lost > 0 and 0 < recovered <= lost
    story = out[: out.index("facts lost")]
    back = re.findall(r"^  ✓ (.+?)\s+lost with turn \d+, back in the block's turn \d+$", story, re.M)
    gone = re.findall(r"^  ✗ (.+?)\s+lost with turn \d+, not in the block$", story, re.M)
    assert (len(back), len(back) + len(gone)) == (recovered, lost)
    assert story.count("the context was compacted") == 3 and "injected block for" not in out
    assert "86 turns from the 97 archive calls (11 calls repeated a turn" in out
    shown = lantern("demo", "--show-block", columns=200).stdout.decode()
    assert shown.count("injected block for") == 3 and shown.index("injected block for") < shown.index("facts lost")


def test_search_table_shows_bracketed_text_and_secret_placeholders(tmp_path):
    db = tmp_path / "cli.db"
    chat = tmp_path / "keys.jsonl"
    chat.write_text(
        json.dumps(
            {"role": "user", "content": "the OpenAI key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z [todo] rotate it"}
        )
        + "\n"
    )
    run("ingest", str(chat), db=db)
    out = run("search", "openai key rotate", db=db).stdout.decode()
    assert "[secret:openai-key" in out and "[todo]" in out
    assert "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" not in out


def test_a_failed_or_empty_ingest_leaves_no_new_database(tmp_path):
    """Newcomer finding: a missing file, a file with no turns, or a forced wrong --format exit non-zero and leave
    no empty database behind; an existing database is kept as it was."""
    db = tmp_path / "new.db"
    missing = run("ingest", str(tmp_path / "nofile.json"), db=db, check=False)
    assert missing.returncode != 0 and not db.exists()
    wrong = tmp_path / "foo.json"
    wrong.write_text('{"foo": 1}\n', encoding="utf-8")
    bad = run("ingest", str(wrong), db=db, check=False)
    assert bad.returncode == 1 and "messages" in bad.stderr.decode() and not db.exists()
    empty = tmp_path / "broken.jsonl"
    empty.write_text('{"role": "user", "content": "x"\n{"role": 7}\n', encoding="utf-8")
    nothing = run("ingest", str(empty), db=db, check=False)
    assert nothing.returncode == 1 and "no turns found" in nothing.stderr.decode() and not db.exists(), nothing.stderr
    good = tmp_path / "chat.jsonl"
    good.write_text(json.dumps({"role": "user", "content": "the staging port is 5433"}) + "\n", encoding="utf-8")
    run("ingest", str(good), db=db)
    again = run("ingest", str(empty), db=db, check=False)
    assert again.returncode == 1 and db.exists()  # an existing database is never removed
    assert "5433" in run("search", "staging port", db=db).stdout.decode()


def test_reindex_refuses_a_missing_or_zero_byte_database_and_makes_none(tmp_path):
    """``reindex`` is not a command that creates a database: a mistyped --db or a zero-byte file is an error (before:
    it made an empty Lantern database there and reported "0 entries re-embedded")."""
    missing = tmp_path / "typo.db"
    proc = run("reindex", db=missing, check=False)
    assert proc.returncode == 1 and f"no database at {missing}" in proc.stderr.decode(), proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    empty = tmp_path / "empty.db"
    empty.touch()
    proc = run("reindex", "--embedder", "minilm", db=empty, check=False)
    assert proc.returncode == 1 and f"{empty} is an empty file, not a Lantern database" in proc.stderr.decode()
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]


def test_a_failed_import_leaves_no_new_database_nor_a_zero_byte_file_turned_into_one(tmp_path):
    """A failed ``import`` (a bad line, a missing file) removes the database it created, with its -wal / -shm and
    the folders made for it, and makes a zero-byte --db zero bytes again (before: the zero-byte file stayed an empty
    Lantern database, tied to an embedder; so did one after an ingest of a file without turns). A database that was
    there stays as it was."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"not an export"\n', encoding="utf-8")
    dbs = tmp_path / "dbs"
    dbs.mkdir()
    for source in (str(bad), str(tmp_path / "nofile.jsonl")):
        for db in (dbs / "new.db", dbs / "sub" / "dir" / "new.db"):
            proc = run("import", source, db=db, check=False)
            assert proc.returncode == 1 and "Traceback" not in proc.stderr.decode(), proc.stderr
            assert list(dbs.iterdir()) == [], (source, db, list(dbs.rglob("*")))
        empty = dbs / "empty.db"
        empty.touch()
        proc = run("import", source, db=empty, check=False)
        assert proc.returncode == 1, proc.stderr
        assert empty.stat().st_size == 0 and [p.name for p in dbs.iterdir()] == ["empty.db"], list(dbs.iterdir())
        empty.unlink()
    nothing = tmp_path / "nothing.json"
    nothing.write_text("[]\n", encoding="utf-8")
    empty = dbs / "empty.db"
    empty.touch()
    assert run("ingest", str(nothing), db=empty, check=False).returncode == 1
    assert empty.stat().st_size == 0 and [p.name for p in dbs.iterdir()] == ["empty.db"]

    db = archived_db(tmp_path)  # a database that was there: kept as it was
    before = json.loads(run("stats", "--json", db=db).stdout)["entries"]
    assert run("import", str(bad), db=db, check=False).returncode == 1
    assert json.loads(run("stats", "--json", db=db).stdout)["entries"] == before


def test_eval_without_the_eval_extra_fails_before_any_work(tmp_path):
    """A newcomer's finding: without scipy the whole evaluation ran, then failed at its statistics (minutes lost,
    nothing written). Now one line naming the extra, exit 1, before the data is even read."""
    code = (
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('scipy', 'matplotlib'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from lantern.cli import main\n"
        "sys.argv = ['lantern'] + sys.argv[1:]\n"
        "main()\n"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "eval",
            "locomo",
            "--data",
            str(tmp_path / "missing.json"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "lantern eval needs the eval extra (scipy, matplotlib). Install it into this environment: " in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "command, hidden, extra",
    [
        (["mcp"], "mcp", "mcp"),
        (["serve"], "fastapi", "proxy"),
        (["ui"], "fastapi", "ui"),
        (["eval", "locomo", "--data", "x.json", "--out", "o"], "scipy", "eval"),
        (["stats"], "psycopg", "postgres"),
    ],
)
def test_a_command_without_its_extra_names_the_exact_install_command(tmp_path, command, hidden, extra):
    """``make demo`` installs the core only; ``lantern mcp`` / ``serve`` then name the command that installs their
    extra into this very environment: this Python's pip, and the checkout it was installed from (or the
    distribution ``lantern-memory`` when it came from a wheel)."""
    from lantern.errors import install_command

    code = (
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name.split('.')[0] == {hidden!r}:\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from lantern.cli import main\n"
        "sys.argv = ['lantern'] + sys.argv[1:]\n"
        "main()\n"
    )
    db = "postgresql://u:pw@127.0.0.1:1/x" if extra == "postgres" else str(tmp_path / "m.db")
    proc = subprocess.run(
        [sys.executable, "-c", code, "--db", db, *command],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    want = install_command(extra)
    assert proc.returncode == 1, proc.stderr
    assert f"needs the {extra} extra" in proc.stderr or f"the {extra} extra" in proc.stderr or extra == "postgres"
    assert want in proc.stderr.replace("\n", ""), proc.stderr
    assert "Traceback" not in proc.stderr and "pw@" not in proc.stderr
    assert want.startswith(sys.executable) or "pip install -e" in want


def test_recover_says_why_a_small_budget_recovered_nothing(tmp_path, transcript):
    """A newcomer's finding: ``--budget 150`` printed a bare "nothing recovered" although a 67-character entry
    matched; the block's title line took the room. The line now says so and names a budget that fits."""
    db = tmp_path / "cli.db"
    run("ingest", str(transcript), db=db)
    small = run("recover", "which port for staging redis?", "--budget", "150", db=db)
    err = small.stderr.decode()
    assert small.stdout == b"" and "nothing recovered: --budget 150 leaves no room for an entry" in err
    suggested = int(re.search(r"use --budget (\d+) or more", err).group(1))
    fits = run("recover", "which port for staging redis?", "--budget", str(suggested), db=db)
    assert "Staging" in fits.stdout.decode()  # an entry packed (at the least budget, its shortest excerpt)
    below = run("recover", "which port for staging redis?", "--budget", str(suggested - 1), db=db)
    assert below.stdout == b"" and f"use --budget {suggested} or more" in below.stderr.decode()  # the least one


def test_the_budget_a_small_recovery_suggests_is_the_least_that_packs(tmp_path):
    """Breaker finding: ``--budget 200`` suggested 216 where 215 packed. The suggestion is read off the one empty
    recovery (``Recovery.least_budget``: its candidates packed again, not ranked again), so for queries whose first
    entry has any length and any too-small budget it is the exact least budget: it packs, one less does not."""
    import random

    from lantern import Lantern

    rng = random.Random(7)
    with Lantern(tmp_path / "b.db", embedder="minilm") as lt:
        for n in range(12):
            filler = " ".join(rng.choice(["alpha", "beta", "gamma", "delta"]) for _ in range(rng.randint(0, 60)))
            lt.archive([{"role": "user", "content": f"service{n} listens on port {6000 + n}. {filler}"}], f"s{n}")
        checked = 0
        for n in rng.sample(range(12), 6):
            query = f"which port does service{n} listen on?"
            for budget in (60, rng.randint(61, 150)):
                empty = lt.explain(query, budget=budget)
                if empty.text:
                    continue
                checked += 1
                least = empty.least_budget
                assert least is not None and least > budget, (query, budget)
                assert lt.explain(query, budget=least).text, (query, budget, least)
                assert not lt.explain(query, budget=least - 1).text, (query, budget, least)
                assert f"use --budget {least} or more" in lt.why_empty(empty), (query, budget, least)
        assert checked >= 6, checked  # every query's 60 characters at least: too small for its title and one entry


def test_recover_as_of_before_every_turn_names_the_as_of_filter(tmp_path, transcript):
    """Newcomer finding: ``recover --as-of`` a time before every turn said "no archived turn is a candidate (all
    excluded or none archived)"; it names the --as-of time and when the turns it would find date from. When the
    other filters find nothing either (a session that does not exist), the message stays the general one."""
    db = tmp_path / "cli.db"
    run("ingest", str(transcript), db=db)
    proc = run("recover", "redis port for staging", "--as-of", "2020-01-01", db=db)
    err = proc.stderr.decode()
    assert (
        proc.stdout == b"" and "nothing recovered: no archived turn is older than the --as-of time 2020-01-01 " in err
    ), err
    assert re.search(r"without --as-of the candidates date from \d{4}-\d\d-\d\d \d\d:\d\d UTC on", err), err
    assert "none archived" not in err
    other = run(
        "recover", "redis port for staging", "--as-of", "2020-01-01", "--session", "nope", db=db
    ).stderr.decode()
    assert "no archived turn is a candidate" in other and "--as-of" not in other, other
    assert "6380" in run("recover", "redis port for staging", "--as-of", "2999-01-01", db=db).stdout.decode()


def test_ingest_and_reindex_write_no_empty_line_when_not_on_a_terminal(tmp_path, transcript):
    """Newcomer finding: piped, ``lantern ingest FILE`` wrote an empty line on stderr (where the progress bar would
    be) and ``lantern reindex`` one on stdout after its result; not on a terminal they show no bar and write nothing
    beyond their result line."""
    db = tmp_path / "cli.db"
    proc = run("ingest", str(transcript), db=db)
    assert proc.stderr == b"", proc.stderr
    assert (
        proc.stdout.decode() == f"{transcript}: 2 turns archived, 0 already archived, 0 items skipped (session chat)\n"
    )
    proc = run("reindex", db=db)
    assert proc.stderr == b"" and re.fullmatch(r"2 entries re-embedded with \S+\n", proc.stdout.decode()), (
        proc.stdout,
        proc.stderr,
    )


def test_ingest_warnings_quoting_the_input_are_printed_as_text_not_markup(tmp_path):
    """A warning quotes the input (an unknown role ``[/]wiz``): it was read as rich markup, so ingest died with
    "internal error MarkupError" after archiving, and removed the new database it had just filled. It is printed
    as text; the turns stay archived."""
    db = tmp_path / "cli.db"
    chat = tmp_path / "roles[bold].jsonl"
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [{"role": "user", "content": "the staging port is 5433"}, {"role": "[/][red]wiz", "content": "x"}]
        )
        + "\n",
        encoding="utf-8",
    )
    proc = run("ingest", str(chat), db=db)
    assert proc.stderr.decode() == "warning: line 2: unknown role '[/][red]wiz'; skipped\n", proc.stderr
    assert json.loads(run("stats", "--json", db=db).stdout)["entries"] == 1
    nothing = tmp_path / "none[bold].json"
    nothing.write_text("[]\n", encoding="utf-8")
    err = run("ingest", str(nothing), db=db, check=False).stderr.decode()
    assert f"error: no turns found in {nothing}" in err, err


def test_version_is_the_installed_distributions():
    """``lantern --version`` prints the version of the installed distribution lantern-memory (pyproject.toml's
    name) and exits 0, before any command and without looking at a database."""
    from importlib.metadata import version

    proc = subprocess.run([*LANTERN, "--db", "/nonexistent/dir/x.db", "--version"], capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout.decode() == f"lantern {version('lantern-memory')}\n"
    assert re.fullmatch(r"\d+(\.\d+)+\S*", version("lantern-memory"))
    assert "--version" in subprocess.run([*LANTERN, "--help"], capture_output=True, timeout=60).stdout.decode()


def test_stats_lines_are_aligned_and_counts_agree_with_their_noun(tmp_path):
    """Every ``stats`` line has its colon in one column (pending_recoveries is longer than the other keys), and
    the counts printed by forget / export / import / ingest say 1 entry, 2 entries."""
    db = tmp_path / "one.db"
    chat = tmp_path / "one.jsonl"
    chat.write_text(
        json.dumps({"role": "user", "content": "the staging port is 5433"}) + "\n{broken\n", encoding="utf-8"
    )
    assert "1 turn archived, 0 already archived, 1 item skipped" in run("ingest", str(chat), db=db).stdout.decode()
    shown = run("stats", db=db).stdout.decode().splitlines()
    lines = [line for line in shown if ":" in line]  # the others: bytes_per_turn_by_table's, one per table, below
    assert len(lines) < len(shown) and lines[-1].strip() == "bytes_per_turn_by_table:"
    keys = [line.split(":")[0].strip() for line in lines]
    assert {"entries", "pending_recoveries", "sessions", "bytes_per_turn"} <= set(keys)
    assert len({line.index(":") for line in lines}) == 1, lines
    assert [line for line in lines if line.split(":")[0].strip() == "entries"][0].endswith(": 1")
    out = tmp_path / "one.export.jsonl"
    assert "1 entry exported" in run("export", str(out), db=db).stderr.decode()
    assert "0 entries imported, 1 already stored (2 lines)" in run("import", str(out), db=db).stdout.decode()
    assert run("forget", "--yes", "--session", "one", db=db).stdout.decode() == "1 entry forgotten\n"


def archived_db(tmp_path: Path, name: str = "cli.db") -> Path:
    db = tmp_path / name
    chat = tmp_path / f"{name}.jsonl"
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                {"role": "user", "content": "Which port did we give the staging Redis?"},
                {"role": "assistant", "content": "Staging Redis listens on port 6380."},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    run("ingest", str(chat), db=db)
    return db


def test_recover_on_a_read_only_database_file_prints_the_block_and_one_warning(tmp_path, unprivileged):
    """Recovery writes access counts and confidence; on a read-only file it skips that write (one warning line on
    stderr), prints its block and exits 0."""
    db = archived_db(tmp_path)
    db.chmod(0o444)
    proc = subprocess.run(
        [*unprivileged, *LANTERN, "--db", str(db), "recover", "staging redis port"],
        capture_output=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert "6380" in proc.stdout.decode()
    err = proc.stderr.decode().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ") and "readonly" in err[0], err


def test_recover_on_a_locked_database_waits_two_seconds_not_seventy(tmp_path):
    """Another writer holds the write lock for longer than the CLI runs: recover still prints its block, with one
    warning line, after a wait of about 2 s for the lock (before: ~75 s, then an error)."""
    import sqlite3
    import time

    db = archived_db(tmp_path)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        t0 = time.monotonic()
        proc = run("recover", "staging redis port", db=db)
        elapsed = time.monotonic() - t0
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "6380" in proc.stdout.decode()
    err = proc.stderr.decode().splitlines()
    assert len(err) == 1 and err[0].startswith("warning: ") and "locked" in err[0], err
    assert elapsed < 40, elapsed


def test_a_database_in_a_read_only_directory_is_named_as_such(tmp_path, unprivileged):
    """SQLite must create the -wal and -shm files beside the database: in a read-only directory the error names
    the directory, not "not a readable SQLite database"."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = archived_db(folder)
    assert not db.with_name(db.name + "-wal").exists()  # closed cleanly: no WAL left to read through
    folder.chmod(0o555)
    try:
        for command in (["stats"], ["recover", "staging redis port"], ["search", "redis"]):
            proc = subprocess.run(
                [*unprivileged, *LANTERN, "--db", str(db), *command], capture_output=True, timeout=300
            )
            err = proc.stderr.decode()
            assert proc.returncode == 1 and "Traceback" not in err, err
            assert f"its directory {folder} is not writable" in err and "not a readable SQLite database" not in err, err
    finally:
        folder.chmod(0o755)


def test_a_database_another_process_holds_exclusively_is_named_locked(tmp_path, monkeypatch):
    """A connection elsewhere in locking_mode EXCLUSIVE keeps every other reader out: the read commands say the
    database is locked by another process (retry), not "not a readable SQLite database (database is locked)". The
    holder is a real process; the commands wait 1 s for the lock here instead of the 10 s busy_timeout (the wait is
    not what this test is about: it made the test take 20 s)."""
    from lantern.store import sqlite as store_sqlite

    db = archived_db(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_EXCLUSIVELY, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline() == "held\n"
        monkeypatch.setattr(store_sqlite, "BUSY_TIMEOUT_MS", 1000)
        for command in (["stats"], ["recover", "staging redis port"]):
            proc = run(*command, db=db, check=False)
            err = proc.stderr.decode()
            assert proc.returncode == 1 and "Traceback" not in err, (command, err)
            assert f"{db}: the database is locked: another process holds an exclusive lock on it" in err, (command, err)
            assert "retry" in err and "not a readable SQLite database" not in err, (command, err)
    finally:
        holder.communicate("", timeout=60)  # stdin closed: the holder closes its connection and exits
    assert holder.returncode == 0
    assert "6380" in run("recover", "staging redis port", db=db).stdout.decode()  # the lock gone, it opens


HOLD_EXCLUSIVELY = """
import sqlite3, sys
holder = sqlite3.connect(sys.argv[1], isolation_level=None)
holder.execute("PRAGMA locking_mode = EXCLUSIVE")
holder.execute("SELECT count(*) FROM entries").fetchone()  # WAL + EXCLUSIVE: the first read takes the lock for good
print("held", flush=True)
sys.stdin.read()
holder.close()
"""


def test_a_database_on_a_full_disk_is_named_as_such(tmp_path):
    """On a full disk SQLite cannot create the -shm file (SQLITE_IOERR_SHMSIZE, "disk I/O error"): the read commands
    say the disk is full. A real full disk: a 1 MiB tmpfs filled to the last block, mounted in a user and mount
    namespace (skipped where those cannot be made)."""
    import shutil

    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True).returncode
    ):
        pytest.skip("no user and mount namespaces: cannot mount a small tmpfs to fill")
    db = archived_db(tmp_path, "src.db")
    mnt = tmp_path / "full"
    mnt.mkdir()
    lantern = " ".join(f"'{a}'" for a in LANTERN)
    script = f"""
        mount -t tmpfs -o size=1m tmpfs '{mnt}' || exit 77
        cp '{db}' '{mnt}/full.db'
        dd if=/dev/zero of='{mnt}/filler' bs=4096 2>/dev/null
        [ "$(df --output=avail '{mnt}' | tail -1 | tr -d ' ')" = 0 ] || exit 78
        {lantern} --db '{mnt}/full.db' stats; echo "exit $?"
        {lantern} --db '{mnt}/full.db' search redis; echo "exit $?"
    """
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )
    if proc.returncode in (77, 78):
        pytest.skip(f"could not mount and fill a tmpfs: {proc.stderr.decode()}")
    out, err = proc.stdout.decode(), proc.stderr.decode()
    assert out.count("exit 1") == 2 and "Traceback" not in err, (out, err)
    lines = err.splitlines()
    assert len(lines) == 2 and all(
        f"{mnt}/full.db: cannot open it: the disk holding {mnt} is full" in line for line in lines
    ), err
    assert "not a readable SQLite database" not in err


def test_open_errors_name_their_cause():
    """The message of each SQLite error on open (store/sqlite.py ``_open_error``), for the errors a test cannot
    produce for real here: SQLITE_FULL, an I/O error on a disk with room left, and Python 3.10's errors (no error
    code on the exception, only the message). A file that is not a database stays "not a readable SQLite
    database"."""
    import sqlite3

    from lantern.store.sqlite import _open_error

    def error(message: str, code: int | None) -> sqlite3.OperationalError:
        e = sqlite3.OperationalError(message)
        if code is not None:
            e.sqlite_errorcode = code
        return e

    path = str(Path(__file__))  # a folder with room left and writable
    cases = [
        (error("database or disk is full", 13), "is full"),
        (error("database or disk is full", None), "is full"),
        (error("disk I/O error", 4874), "an I/O error"),
        (error("disk I/O error", 266), "an I/O error"),
        (error("disk I/O error", None), "an I/O error"),
        (error("database is locked", 5), "the database is locked"),
        (error("database is locked", None), "the database is locked"),
        (error("database table is locked", 6), "the database is locked"),
        (sqlite3.DatabaseError("file is not a database"), "is not a readable SQLite database"),
    ]
    for e, expected in cases:
        message = str(_open_error(path, e))
        assert expected in message and str(e) in message, (e, message)
        assert ("not a readable" in message) == (expected == "is not a readable SQLite database"), (e, message)


def test_read_commands_refuse_a_zero_byte_file_and_leave_it_empty(tmp_path):
    """A zero-byte --db given to recover / search / stats / facts / export is an error; before, SQLite took it for a
    new database and the read command turned it into an empty Lantern database."""
    empty = tmp_path / "empty.db"
    empty.touch()
    for command in (["stats"], ["recover", "port"], ["search", "port"], ["facts"], ["export", "-"]):
        proc = run(*command, db=empty, check=False)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and f"{empty} is an empty file, not a Lantern database" in err, (command, err)
        assert empty.stat().st_size == 0 and not empty.with_name("empty.db-wal").exists()
    # a WAL beside the empty file (SQLite would delete it on open) or a symlink to the empty file: refused as well
    wal = empty.with_name("empty.db-wal")
    wal.write_bytes(b"\0" * 4096)
    link = tmp_path / "link.db"
    link.symlink_to(empty)
    for db in (empty, link):
        proc = run("stats", db=db, check=False)
        assert proc.returncode == 1 and "is an empty file, not a Lantern database" in proc.stderr.decode(), db
    assert empty.stat().st_size == 0 and wal.stat().st_size == 4096
    wal.unlink()
    assert run("ingest", str(tmp_path / "chat.jsonl"), db=empty, check=False).returncode == 1  # no such file: no db
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "the port is 5433"}) + "\n", encoding="utf-8")
    run("ingest", str(chat), db=empty)  # ingest creates a database, in an empty file as in a missing one
    assert json.loads(run("stats", "--json", db=empty).stdout)["entries"] == 1


def test_a_name_that_is_not_utf8_is_a_usage_error(tmp_path):
    """``--session $'\\xff'`` (bytes that are not UTF-8) is a usage error naming the option, not an encoding error
    nor a silent empty result; nothing is written."""
    db = archived_db(tmp_path)
    before = json.loads(run("stats", "--json", db=db).stdout)
    chat = tmp_path / "cli.db.jsonl"
    for command in (
        ["recover", "port", "--session"],
        ["search", "port", "--session"],
        ["forget", "--session"],
        ["export", "-", "--session"],
        ["ingest", str(chat), "--session"],
        ["recover", "port", "--user"],
        ["forget", "--agent"],
        ["facts"],
    ):
        proc = lantern(*command, b"caf\xe9", db=db, columns=200)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and "Traceback" not in err and "codec" not in err, (command, err)
        assert "not UTF-8 text: b'caf\\xe9'" in err, (command, err)
    after = json.loads(run("stats", "--json", db=db).stdout)
    assert (after["entries"], after["sessions"]) == (before["entries"], before["sessions"])


HOSTILE = (
    "port 6380 \x1b[2J\x1b[31mred\x1b[0m bell\x07 cr\rback \u202eevil\u202c tab\there \u9020 \u200d 端口"
    " \u2028line\u2029para"
)
# what must never reach a terminal raw from the archive (the escapes rich writes itself are SGR styles: ESC [ ... m)
TERMINAL_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
RICH_STYLE = re.compile("\x1b\\[[0-9;]*m")  # the bold / dim / italic of the tables' headers and captions


def on_a_terminal(*args: str, db: Path, columns: int = 400) -> str:
    """The stdout of ``lantern --db DB ARGS`` run with stdout on a pseudo-terminal (``sys.stdout.isatty()`` is true)
    ``columns`` wide, with the CR the terminal's line discipline adds before each LF taken out again."""
    proc = lantern(*args, db=db, terminal="stdout", columns=columns)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode().replace("\r\n", "\n")


def on_a_terminal_process(*args: str, db: Path, columns: int = 400) -> str:
    """:func:`on_a_terminal` as a real process: ``python -m lantern.cli`` with its stdout on a pseudo-terminal."""
    import pty

    main, child = pty.openpty()
    proc = subprocess.Popen(
        [*LANTERN, "--db", str(db), *args],
        stdout=child,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": str(columns)},
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_recover_escapes_control_characters_on_a_terminal_only(tmp_path):
    """An archived ANSI sequence, BEL, CR, bidi override or line / paragraph separator (U+2028 / U+2029) reaches a
    terminal as visible escapes (shown, as for the file names of ingest DIR); newlines, tabs and other text stay.
    Piped (to an LLM), the text is printed as is."""
    db = tmp_path / "hostile.db"
    chat = tmp_path / "hostile.jsonl"
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [{"role": "user", "content": "which port for redis?"}, {"role": "assistant", "content": HOSTILE}]
        )
        + "\n",
        encoding="utf-8",
    )
    run("ingest", str(chat), db=db)
    piped = run("recover", "redis port", db=db).stdout.decode()
    assert HOSTILE in piped

    shown = on_a_terminal("recover", "redis port", db=db)
    assert not TERMINAL_UNSAFE.search(shown), repr(shown)
    assert (
        "port 6380 \\x1b[2J\\x1b[31mred\\x1b[0m bell\\x07 cr\\rback \\u202eevil\\u202c tab\there \u9020 \u200d 端口"
        " \\u2028line\\u2029para" in shown
    ), repr(shown)
    assert shown.count("\n") == piped.count("\n")


def test_search_explain_facts_and_json_escape_archived_text_on_a_terminal_only(tmp_path):
    """The search and --explain tables (summaries, sessions), the facts table (keys, values, sources) and the --json
    of recover, search and facts print archived text; on a terminal its escape sequences, C1 and bidi controls and
    U+2028 / U+2029 are visible escapes (before: raw, so an archived turn could clear, retitle or reorder the
    user's terminal). The JSON stays the same value (\\uXXXX escapes). Piped, the output is as before: raw."""
    db = tmp_path / "hostile.db"
    chat = tmp_path / "hostile.jsonl"
    session = "s\x1b[1m\u202eX"
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                {"role": "user", "content": "which port for redis? \x1b]0;pwned\x07"},
                {"role": "assistant", "content": HOSTILE},
                {"role": "user", "content": "REDIS_HOST=cache\x9b2J\u202e.internal"},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    run("ingest", str(chat), "--session", session, db=db)

    for command in (["search", "redis port"], ["search", "redis port", "--explain"]):
        piped = run(*command, db=db).stdout.decode()
        assert "\x1b[2J" in piped and "\x1b]0;pwned" in piped and session in piped, command  # a pipe: as before
        shown = on_a_terminal(*command, db=db)
        assert not TERMINAL_UNSAFE.search(RICH_STYLE.sub("", shown)), (command, repr(shown))
        assert "\\x1b[2J\\x1b[31mred" in shown and "\\x1b]0;pwned\\x07" in shown, (command, repr(shown))
        assert "s\\x1b[1m\\u202eX" in shown, (command, repr(shown))

    piped = run("facts", db=db).stdout.decode()
    assert "cache\x9b2J\u202e.internal" in piped and session in piped
    shown = on_a_terminal("facts", db=db)
    assert not TERMINAL_UNSAFE.search(RICH_STYLE.sub("", shown)), repr(shown)
    assert "cache\\x9b2J\\u202e.internal" in shown and "s\\x1b[1m\\u202eX" in shown, repr(shown)

    for command in (["recover", "redis port", "--json"], ["search", "redis port", "--json"], ["facts", "--json"]):
        piped = run(*command, db=db).stdout.decode()
        assert re.search("[\x9b\u202e\u2028]", piped), command  # JSON leaves C1, bidi and U+2028 raw: as before
        shown = on_a_terminal(*command, db=db)
        assert not TERMINAL_UNSAFE.search(shown.rstrip("\n")), (command, repr(shown))
        texts = [
            [r.get("text"), r.get("summary"), r.get("value"), r.get("session")]
            for r in (lambda v: v["entries"] if isinstance(v, dict) else v)(json.loads(shown))
        ]
        assert texts == [
            [r.get("text"), r.get("summary"), r.get("value"), r.get("session")]
            for r in (lambda v: v["entries"] if isinstance(v, dict) else v)(json.loads(piped))
        ], command


def test_a_failure_after_turns_were_committed_keeps_the_new_database(tmp_path):
    """The undo of a failed ingest/import removes a database the command created only while it holds no entry:
    turns committed before the failure (an ingest's earlier slices) are never deleted with it."""
    from lantern import Lantern
    from lantern.store.undo import Before as _Before

    path = tmp_path / "new" / "memory.db"
    before = _Before(path)
    lantern = Lantern(path)
    lantern.archive([{"role": "user", "content": "the api listens on port 5433"}], session="s")
    lantern.close()
    before.undo()
    assert path.exists() and Lantern(path).stats()["entries"] == 1
    empty = tmp_path / "empty.db"
    before = _Before(empty)
    Lantern(empty).close()
    before.undo()
    assert not empty.exists()


def test_a_failed_ingest_through_a_symlink_undoes_the_file_it_points_to_and_keeps_the_link(tmp_path):
    """--db a dangling symlink: the failed ingest used to delete the symlink and leave the database it had made at
    the target (with its -wal / -shm); a symlink to a zero-byte file got the target truncated but its -wal / -shm
    left beside the target. Now the target is undone and the symlink kept (breaker finding)."""
    nothing = tmp_path / "nothing.json"
    nothing.write_text("[]", encoding="utf-8")
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "target.db")
    out = run("ingest", str(nothing), db=link, check=False)
    assert out.returncode == 1 and "no turns found" in out.stderr.decode(), out.stderr
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["link.db", "nothing.json"]

    (tmp_path / "other").mkdir()
    zero = tmp_path / "other" / "zero.db"
    zero.touch()
    zlink = tmp_path / "zlink.db"
    zlink.symlink_to(zero)
    out = run("ingest", str(nothing), db=zlink, check=False)
    assert out.returncode == 1, out.stderr
    assert zlink.is_symlink() and zero.stat().st_size == 0
    assert sorted(p.name for p in zero.parent.iterdir()) == ["zero.db"]


def test_undo_keeps_a_new_database_another_connection_is_filling(tmp_path):
    """Two ingests into the same new --db: the one that fails (no turns) used to delete the database while the other
    had it open and had not committed yet; the other then reported its turns archived into a deleted file (data
    loss). A database another connection has open is not this command's to undo (breaker finding)."""
    from lantern import Lantern
    from lantern.store.undo import Before as _Before

    path = tmp_path / "new" / "memory.db"
    before = _Before(path)
    Lantern(path).close()  # this command made it and archived nothing ...
    other = Lantern(path)  # ... while another process opened it and is still preparing its first batch
    try:
        before.undo()
        assert path.exists()
        other.archive([{"role": "user", "content": "the api listens on port 5433"}], session="s")
    finally:
        other.close()
    assert Lantern(path).stats()["entries"] == 1

    alone = tmp_path / "alone.db"
    before = _Before(alone)
    Lantern(alone).close()
    before.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]


def piped(*args: str, db: Path | None = None, columns: str | None = None) -> str:
    """The stdout of ``lantern ARGS`` to a pipe, stdin not a terminal either, $COLUMNS unset unless ``columns``."""
    proc = lantern(*args, db=db, columns=columns)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def table_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]


def summary_cells(out: str, row: int = 0) -> str:
    """The text of the summary column (the last) of the table's ``row``-th row, its wrapped pieces joined."""
    body = [line for line in table_lines(out) if line.startswith("│")]
    starts = [i for i, line in enumerate(body) if line.split("│")[1].strip()]  # a row starts where its id is
    end = starts[row + 1] if row + 1 < len(starts) else len(body)
    return " ".join(line.split("│")[-2].strip() for line in body[starts[row] : end])


def test_search_tables_fit_the_console_piped_and_on_a_terminal(tmp_path):
    """Newcomer finding: the --explain table was cut at the console's width (forced to at least 140 columns), its
    summary column stopping mid-word and its right border and legend gone, on a terminal and piped. It now fits:
    to a pipe 160 columns ($COLUMNS when set) instead of rich's 80; on a terminal, the terminal's width, the summary
    column wrapping and, on a narrow one, the low-value columns left out and named under the table."""
    db = tmp_path / "wide.db"
    chat = tmp_path / "wide.jsonl"
    words = "the staging deployment of the billing service reads its Redis password from a vault path " * 3
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [
                {"role": "user", "content": "Where does the billing service read its Redis password? " + words},
                {
                    "role": "assistant",
                    "content": "From vault/secret/billing/staging/redis-password-rotated-quarterly. " + words,
                },
                {"role": "user", "content": "And the session timeout for billing?"},
                {"role": "assistant", "content": "BILLING_SESSION_TIMEOUT_SECONDS=1800 in config/billing/staging.env."},
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    run("ingest", str(chat), "--session", "billing-service-staging-deployment-notes", db=db)
    summaries = [
        r["summary"] for r in json.loads(run("search", "billing redis password", "--explain", "--json", db=db).stdout)
    ]

    def check(out: str, width: int, explain: bool) -> None:
        lines = table_lines(out)
        assert lines and all(len(line) <= width for line in lines), (width, out)  # piped, prose lines stay whole
        assert all(line[-1] in "┓┃┩│┘" for line in lines), out  # every line keeps its right border
        if explain:
            assert " ".join(summary_cells(out).split()).replace(" ", "") == summaries[0].replace("\n", " ").replace(
                " ", ""
            ), out

    out = piped("search", "billing redis password", "--explain", db=db)
    check(out, 160, True)
    assert max(map(len, out.splitlines())) > 140  # the room of a pipe is used, not 80 columns
    assert "ranks per signal: sem = semantic" in out and "(– unranked)" in out and "left out" not in out
    check(piped("search", "billing redis password", "--explain", db=db, columns="120"), 120, True)
    check(piped("search", "billing redis password", db=db), 160, False)

    out = on_a_terminal("search", "billing redis password", "--explain", db=db, columns=100)
    check(RICH_STYLE.sub("", out), 100, True)
    assert "left out to fit 100 columns: " in " ".join(RICH_STYLE.sub("", out).split()) and "(--json has them)" in out
    assert "σ" not in table_lines(RICH_STYLE.sub("", out))[1]  # the header row: σ is the first column left out
    for columns in (80, 60):
        out = RICH_STYLE.sub("", on_a_terminal("search", "billing redis password", "--explain", db=db, columns=columns))
        check(out, columns, True)
        header = table_lines(out)[1]
        assert all(f" {name} " in header for name in ("id", "session", "turn", "RRF", "summary")), header
    out = RICH_STYLE.sub("", on_a_terminal("search", "billing redis password", db=db, columns=180))
    check(out, 180, False)
    assert "left out" not in out


def test_demo_table_headers_are_whole_when_piped(tmp_path):
    """Newcomer finding: under ``make demo`` piped, rich fell back to 80 columns and the demo table's headers were
    cut to ``conte…``; piped, the console is 160 columns wide."""
    out = piped("demo", "--no-show-block", "--demo-db", str(tmp_path / "demo.db"))
    header = next(line for line in out.splitlines() if line.startswith("┃"))
    for name in ("session", "turns", "t*", "context chars", "facts lost", "recovered", "block chars", "recover ms"):
        assert f" {name} " in header, header
    assert "…" not in "".join(table_lines(out)) and all(len(line) <= 160 for line in table_lines(out))
    # and its prose lines are whole, however long (rich wrapped "... 15,763 characters\nleft." at the width)
    prose = [line for line in out.splitlines() if line.strip() and line not in table_lines(out)]
    assert prose[0].startswith("Lantern demo: ") and prose[0].endswith("demo.db"), prose[0]
    sessions = [line for line in prose if re.match(r"\d{4}-\d\d-\d\d ", line)]
    assert len(sessions) == 3 and all(line.endswith(" left.") for line in sessions), sessions
    assert not any(re.fullmatch(r"\s*\S+\.", line) for line in prose), prose  # no line of one stray word


@given(parts=st.lists(st.from_regex(r"[a-z][a-z0-9_-]{8,40}", fullmatch=True), min_size=2, max_size=6))
@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_piped_line_is_never_wrapped(tmp_path, parts):
    """To a pipe or a file, a line is written whole, whatever its length (text/terminal.py ``console``): an ingest
    of a file with no turns at a long path gave its ``error: no turns found in`` on one line and the path on the
    next, as the demo's header lines were cut mid-phrase at the console's width."""
    folder = tmp_path.joinpath(*parts)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nothing.json"
    path.write_text("[1, 2]", encoding="utf-8")
    r = lantern("ingest", str(path), db=tmp_path / "w.db", columns=None)
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 1 and any(
        line.startswith("error: no turns found in ") and str(path) in line for line in lines
    ), lines
    assert any(line.startswith(f"{path}: 0 turns archived") for line in r.stdout.decode().splitlines()), r.stdout


def test_the_demo_never_archives_into_an_existing_store(tmp_path):
    """Newcomer finding: ``demo --demo-db chat.db`` archived the aider demo into a user's store (5 -> 91 entries),
    and a second run into its own store reported duplicate checks as archive latency. An existing non-empty file is
    refused, byte for byte untouched."""
    db = archived_db(tmp_path)
    before = db.read_bytes()
    proc = lantern("demo", "--demo-db", str(db), "--no-show-block")
    assert proc.returncode == 1 and "already exists: the demo builds a new database" in proc.stderr.decode()
    assert db.read_bytes() == before


@pytest.mark.parametrize("args", [["--help"], ["recover", "--help"], ["stats", "--json"]])
def test_a_reader_that_left_is_not_an_error(tmp_path, args):
    """Newcomer finding: `lantern demo | head -1` exited 1 with no message (rich's Console.on_broken_pipe), while
    `search | head` exited 0. Whatever prints, a stdout whose reader is gone ends the command quietly with 0."""
    db = archived_db(tmp_path)
    r, w = os.pipe()
    os.close(r)  # no reader at all: the first write fails, whatever the pipe's buffer
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "--db", str(db), *args], stdout=w, stderr=subprocess.PIPE, timeout=300
        )
    finally:
        os.close(w)
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()


def test_an_error_is_still_an_error_when_stdout_is_dev_null(tmp_path):
    with open(os.devnull, "wb") as null:
        proc = subprocess.run(
            [sys.executable, "-m", "lantern.cli", "--db", str(tmp_path / "none" / "x.db"), "stats"],
            stdout=null,
            stderr=subprocess.PIPE,
            timeout=300,
        )
    assert proc.returncode == 1 and b"error" in proc.stderr


def test_the_rank_legend_explains_every_column():
    """Newcomer finding: the --explain legend read `prf = prf`. Each rank column's legend says more than its name."""
    from lantern.cli.render import SIGNAL_COLUMNS, SIGNAL_LEGEND

    for name, column in SIGNAL_COLUMNS.items():
        assert SIGNAL_LEGEND.get(name, name) != column, name


def test_an_empty_compaction_recovery_names_the_session_it_read(tmp_path):
    """Newcomer finding: `recover --summary FILE` with no --session said "the session has no archived turn"
    without naming the one it read (the default, not the transcript's)."""
    db = archived_db(tmp_path)
    summary = tmp_path / "summary.txt"
    summary.write_text("We set up the database.")
    for extra, name in (([], "the 'default' session"), (["--session", "nope"], "session 'nope'")):
        proc = lantern("--db", str(db), "recover", "--summary", str(summary), *extra)
        assert proc.returncode == 0 and f"{name} has no archived turn" in proc.stderr.decode(), proc.stderr


@pytest.mark.parametrize("content", [None, b"\x00\x01binary", b"not json at all"])
def test_a_wrong_live_file_is_named_by_its_option(tmp_path, content):
    """Newcomer finding: a missing --live file said only "nope.jsonl: cannot read file", where --summary's error
    names its option. Every --live error names --live."""
    db = archived_db(tmp_path)
    live = tmp_path / "live.jsonl"
    if content is not None:
        live.write_bytes(content)
    for args in (["recover", "port?"], ["recover", "--summary", "-"]):
        proc = lantern("--db", str(db), *args, "--live", str(live), input=b"a summary")
        assert proc.returncode == 1 and proc.stderr.decode().startswith("error: --live: "), proc.stderr


def test_an_unknown_embedder_is_a_usage_error(tmp_path):
    """Newcomer finding: ``lantern --embedder bogus recover x`` exited 1, where every other bad option value (e.g.
    ``--format bogus``) is a usage error, exit 2. The global --embedder, reindex --embedder and eval
    --second-embedder are checked when parsed, with the Python API's message; no database is made or opened."""
    db = archived_db(tmp_path)
    message = "unknown embedder 'bogus'; choose one of minilm, use, e5, routed, routed-v1, fake"
    for args in (
        ["--embedder", "bogus", "recover", "x"],
        ["--embedder", "bogus", "ingest", str(tmp_path / "cli.db.jsonl")],
        ["reindex", "--embedder", "bogus"],
        [
            "eval",
            "jsonl",
            "--data",
            str(tmp_path / "cli.db.jsonl"),
            "--out",
            str(tmp_path / "o"),
            "--second-embedder",
            "bogus",
        ],
    ):
        proc = lantern(*args, db=tmp_path / "new.db", columns=200)
        err = proc.stderr.decode()
        assert proc.returncode == 2 and message in err and "Invalid value for '--" in err, (args, err)
    assert not (tmp_path / "new.db").exists() and not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match=message):  # the same words as the Python API's
        from lantern.embed import get_embedder

        get_embedder("bogus")
    # a known name in any case, or an embedder id, passes the check (and meets the database's own embedder)
    for name in ("MiniLM", "minilm-l6-v2-int8"):
        proc = lantern("--embedder", name, "stats", db=db, columns=None)
        assert proc.returncode == 1 and "was created with embedder" in proc.stderr.decode(), name


def test_feedback_names_its_missing_choice_and_its_unknown_ids_and_takes_agent_and_project(tmp_path):
    """Newcomer findings: ``feedback 1`` said "Missing option '--useful'" (--not-useful is as good); ``feedback 999
    --useful`` said "1 of the ids are not entries of this user"; the MCP tool's agent / project scope (which
    Lantern.feedback takes) had no CLI options."""
    db = tmp_path / "fb.db"
    chat = tmp_path / "fb.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "the staging api listens on port 5433"}) + "\n")
    run("ingest", str(chat), "--agent", "coder", "--project", "web", db=db)
    entry = json.loads(run("search", "staging port", "--json", db=db).stdout)[0]["id"]

    proc = run("feedback", str(entry), db=db, check=False)
    err = " ".join(proc.stderr.decode().split())
    assert proc.returncode == 2 and "give --useful or --not-useful" in err and "Missing option" not in err, err

    proc = run("feedback", "999", "--useful", db=db)
    assert proc.stdout.decode() == "0 entries marked useful\n"
    assert proc.stderr.decode() == "warning: entry 999 is not an entry of this user; nothing changed for it\n"
    proc = run("feedback", str(entry), "999", "998", "999", "--not-useful", db=db)
    assert proc.stdout.decode() == "1 entry marked not useful\n"
    assert (
        proc.stderr.decode()
        == "warning: 2 of the ids are not entries of this user (999, 998); nothing changed for them\n"
    )

    proc = run("feedback", str(entry), "--useful", "--agent", "reviewer", db=db)
    assert proc.stdout.decode() == "0 entries marked useful\n"
    assert proc.stderr.decode() == (
        f"warning: entry {entry} is not an entry of this user under agent 'reviewer'; nothing changed for it\n"
    )
    proc = run("feedback", str(entry), "--useful", "--project", "api", "--user", "bob", db=db)
    assert proc.stderr.decode() == (
        f"warning: entry {entry} is not an entry of user 'bob' in project 'api'; nothing changed for it\n"
    )
    before = json.loads(run("search", "staging port", "--explain", "--json", db=db).stdout)[0]["success"]
    proc = run("feedback", str(entry), "--useful", "--agent", "coder", "--project", "web", db=db)
    assert proc.stdout.decode() == "1 entry marked useful\n" and proc.stderr.decode() == ""
    assert json.loads(run("search", "staging port", "--explain", "--json", db=db).stdout)[0]["success"] > before


def test_an_empty_recovery_names_the_scope_filter_that_left_the_entries_out(tmp_path, transcript):
    """Newcomer finding: with every entry under another user (or agent, project, session), recover said "no archived
    turn is a candidate (all excluded or none archived)", as if nothing were archived. It names the filter and how
    many entries lie outside it (one COUNT query, on the empty path only)."""
    db = tmp_path / "scoped.db"
    run("ingest", str(transcript), "--user", "alice", "--agent", "coder", "--project", "web", db=db)

    def why(*args: str, env: dict | None = None) -> str:
        proc = lantern(
            "recover", "redis port for staging", *args, db=db, columns=None, env={"LANTERN_USER": None, **(env or {})}
        )
        assert proc.returncode == 0 and proc.stdout == b"", proc.stderr.decode()
        return proc.stderr.decode().strip()

    assert why("--user", "bob") == (
        "nothing recovered: no archived turn is a candidate for user 'bob' (2 entries are "
        "under other users: --user or $LANTERN_USER picks the user)"
    )
    assert why(env={"LANTERN_USER": "bob"}) == why("--user", "bob")
    assert why() == (
        'nothing recovered: no archived turn is a candidate for the default user "" (2 entries are under '
        "other users: --user or $LANTERN_USER picks the user)"
    )
    assert why("--user", "alice", "--agent", "reviewer") == (
        "nothing recovered: no archived turn is a candidate for agent 'reviewer' (this user's 2 entries are outside it)"
    )
    assert why("--user", "alice", "--agent", "coder", "--project", "api") == (
        "nothing recovered: no archived turn is a candidate for agent 'coder' and project 'api' (this user's 2 entries "
        "are outside them)"
    )
    assert why("--user", "alice", "--session", "nope") == (
        "nothing recovered: no archived turn is a candidate in session 'nope' (2 entries are in other sessions)"
    )
    assert (
        "6380"
        in run("recover", "redis port for staging", "--user", "alice", "--session", "chat", db=db).stdout.decode()
    )
    run("forget", "--yes", "--user", "alice", db=db)
    assert why() == "nothing recovered: no archived turn is a candidate (the database holds no entry)"


def test_ingest_prints_the_file_and_session_names_as_visible_escapes_on_a_terminal(tmp_path):
    """Newcomer finding: ``lantern ingest FILE`` printed the path and the session name (the file name by default)
    raw on a terminal, so a file name holding an escape sequence drove the terminal; like ``ingest DIR`` and the
    other commands, it prints them through ``shown`` there. Piped, the line is as before."""
    chat = tmp_path / "chat\x1b[2J\x1b]0;pwned\x07\u202e.jsonl"
    chat.write_text(
        json.dumps({"role": "user", "content": "the staging api listens on port 5433"}) + "\n", encoding="utf-8"
    )
    out = on_a_terminal("ingest", str(chat), db=tmp_path / "t.db")
    assert not TERMINAL_UNSAFE.search(out.rstrip("\n")), repr(out)
    assert out == (
        f"{tmp_path}/chat\\x1b[2J\\x1b]0;pwned\\x07\\u202e.jsonl: 1 turn archived, 0 already archived, 0 items "
        "skipped (session chat\\x1b[2J\\x1b]0;pwned\\x07\\u202e)\n"
    ), repr(out)
    chat2 = chat.with_name("two\x1b[31m.jsonl")
    chat2.write_text(
        json.dumps({"role": "user", "content": "the prod api listens on port 5434"}) + "\n", encoding="utf-8"
    )
    piped = run("ingest", str(chat2), db=tmp_path / "t.db").stdout.decode()
    assert piped == f"{chat2}: 1 turn archived, 0 already archived, 0 items skipped (session two\x1b[31m)\n"
    # --json (a file, a directory): on a terminal the JSON leaves no bidi control raw either, as recover --json
    chat3 = chat.with_name("three\u202e.jsonl")
    chat3.write_text(
        json.dumps({"role": "user", "content": "the dev api listens on port 5435"}) + "\n", encoding="utf-8"
    )
    shown_json = on_a_terminal("ingest", str(chat3), "--json", db=tmp_path / "t3.db")
    assert not TERMINAL_UNSAFE.search(shown_json.rstrip("\n")) and json.loads(shown_json)["session"] == "three\u202e"
    folder = tmp_path / "dir\u202e"
    folder.mkdir()
    (folder / "a\u202e.jsonl").write_text(chat3.read_text(encoding="utf-8"), encoding="utf-8")
    shown_json = on_a_terminal("ingest", str(folder), "--json", db=tmp_path / "t4.db")
    assert not TERMINAL_UNSAFE.search(shown_json.rstrip("\n")) and "a\u202e.jsonl" in json.dumps(
        json.loads(shown_json), ensure_ascii=False
    )


def test_an_error_quoting_a_hostile_file_name_is_escaped_on_a_terminal_only(tmp_path):
    """``error: FILE, line 1: ...`` quoted the file name raw: a file named with an OSC sequence set the terminal's
    title (breaker finding). On a terminal the error line shows escapes; piped, it is the name as is."""
    name = tmp_path / "ev\x1b]0;pwned\x07\u202eY.json"
    name.write_text("{bad", encoding="utf-8")
    proc = lantern("ingest", str(name), db=tmp_path / "t.db", terminal="stderr", columns=None)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "error:" in err and "\x07" not in err and "\u202e" not in err and "\\x1b]0;pwned\\x07\\u202eY.json" in err
    piped = lantern("ingest", str(name), db=tmp_path / "t.db", columns=None)
    assert piped.returncode == 1 and str(name).encode() in piped.stderr


def test_reindex_takes_the_global_embedder_as_its_target(tmp_path):
    """Newcomer finding: ``lantern --db X --embedder e5 reindex`` (global options come before the command) failed
    with the embedder-mismatch error that reindex exists to resolve; only ``reindex --embedder e5`` worked. The
    global option is now the target too; the database is opened with the embedder it records."""
    db = archived_db(tmp_path)
    out = run("--embedder", "e5", "reindex", db=db).stdout.decode()
    assert "1 entry re-embedded with multilingual-e5-small-q4" in out
    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["embedder"] == "multilingual-e5-small-q4"
    assert "6380" in run("recover", "which port does staging redis listen on", db=db).stdout.decode()
    out = run("reindex", "--embedder", "routed", db=db).stdout.decode()  # the command's own option, as before
    assert "re-embedded with routed-minilm-use-e5-v1" in out


def test_in_process_runs_print_what_a_process_prints(tmp_path):
    """The tests above run the command in the test process (tests/clirun.py); here the same commands also run as
    real processes (the installed ``lantern`` script, pyproject's [project.scripts]), and both give the same exit
    code and the same bytes on stdout and stderr: to a pipe and to a terminal, for exit 0, an error (1) and usage
    errors (2), typer's own error panel included."""
    script = Path(sys.executable).with_name("lantern")
    assert script.exists(), f"no {script}: install the package (pip install -e .)"
    chat = tmp_path / "hostile.jsonl"
    chat.write_text(
        "\n".join(
            json.dumps(m)
            for m in [{"role": "user", "content": "which port for redis?"}, {"role": "assistant", "content": HOSTILE}]
        )
        + "\n",
        encoding="utf-8",
    )

    def process(*args: str, db: Path, columns: int = 200, input: bytes | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(script), "--db", str(db), *args],
            capture_output=True,
            timeout=300,
            input=input,
            stdin=subprocess.DEVNULL if input is None else None,
            env={**os.environ, "COLUMNS": str(columns)},
        )

    def same(*args: str, db: Path, columns: int = 200, input: bytes | None = None) -> subprocess.CompletedProcess:
        inside = lantern(*args, db=db, columns=columns, input=input)
        outside = process(*args, db=db, columns=columns, input=input)
        assert (inside.returncode, inside.stdout, inside.stderr) == (
            outside.returncode,
            outside.stdout,
            outside.stderr,
        ), args
        return inside

    ingested = [lantern("ingest", str(chat), db=tmp_path / "a.db"), process("ingest", str(chat), db=tmp_path / "b.db")]
    assert [(p.returncode, p.stdout, p.stderr) for p in ingested] == [(0, ingested[0].stdout, b"")] * 2
    db = tmp_path / "a.db"
    assert "\u202eevil" in json.loads(same("search", "redis port", "--json", db=db).stdout)[0]["summary"]
    assert "ranks per signal" in same("search", "redis port", "--explain", db=db, columns=120).stdout.decode()
    assert json.loads(same("stats", "--json", db=db).stdout)["entries"] == 1
    assert same("stats", db=tmp_path / "missing.db").returncode == 1
    assert same("--embedder", "bogus", "stats", db=db, columns=90).returncode == 2
    assert same("recover", "x", "--budget", "lots", db=db, columns=90).returncode == 2
    assert same("feedback", "1", db=db).returncode == 2
    assert (
        b"error: <stdin>, line 1: the first record must be the header"
        in same("import", "-", db=db, input=b"{}\n").stderr
    )
    assert "Usage: lantern recover [OPTIONS] " in same("recover", "--help", db=db, columns=400).stdout.decode()
    shown = on_a_terminal("search", "redis port", db=db, columns=100)
    assert "\\x1b[2J" in shown and shown == on_a_terminal_process("search", "redis port", db=db, columns=100)


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_an_empty_query_says_the_query_is_empty(tmp_path, transcript, query):
    """Newcomer finding: `recover ""` said "no archived turn is a candidate (all excluded or none archived)" over a
    store that held turns. A blank query is named as such."""
    db = tmp_path / "e.db"
    run("ingest", str(transcript), db=db)
    proc = lantern("recover", query, db=db, columns=None)
    assert proc.returncode == 0 and proc.stdout == b""
    assert proc.stderr.decode().strip().startswith("nothing recovered: the query is empty")


def test_recover_live_leaves_out_the_turns_still_in_the_live_context(tmp_path, transcript):
    """``--live FILE`` is the Python API's ``exclude=`` for the CLI: the turns of a transcript still in the live
    context are never recovered (any format ``ingest`` reads), the rest still are."""
    db = tmp_path / "cli.db"
    run("ingest", str(transcript), db=db)
    live = tmp_path / "live.json"  # another format than the archived JSONL: the live tail, the Redis turn
    live.write_text(json.dumps({"messages": json.loads("[" + ",".join(transcript.read_text().splitlines()[:2]) + "]")}))
    plain = json.loads(run("recover", "redis port for staging", "--json", "--min-score", "0", db=db).stdout)
    assert "6380" in plain["text"]
    rec = json.loads(
        run("recover", "redis port for staging", "--json", "--min-score", "0", "--live", str(live), db=db).stdout
    )
    assert "6380" not in rec["text"] and "LOG_LEVEL" in rec["text"]
    explain = run("search", "redis port", "--explain", "--json", "--live", str(live), db=db).stdout
    verdicts = {row["summary"][:20]: row["verdict"] for row in json.loads(explain)}
    assert any(v == "excluded:live" for v in verdicts.values())
    bad = run("recover", "redis port", "--live", str(tmp_path / "missing.jsonl"), db=db, check=False)
    assert bad.returncode == 1 and b"Traceback" not in bad.stderr and b"missing.jsonl" in bad.stderr
    usage = run("search", "redis port", "--live", str(live), db=db, check=False)
    assert usage.returncode == 2 and b"--live goes with --explain" in usage.stderr
    # a pipe (`--live <(...)`, a hook's `--live /dev/stdin`): read as the file is (it was 'stream is not seekable')
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, live.read_bytes()), os.close(write_end)))
    writer.start()
    try:
        piped = run(
            "recover", "redis port for staging", "--json", "--min-score", "0", "--live", f"/dev/fd/{read_end}", db=db
        )
    finally:
        writer.join()
        os.close(read_end)
    assert json.loads(piped.stdout)["text"] == rec["text"]


def _store_with_one_entry(path: Path) -> Path:
    from lantern import Lantern

    with Lantern(path) as lt:
        lt.archive([{"role": "user", "content": "The staging Redis listens on port 6380."}], session="s")
    return path


def test_every_copy_error_line_names_the_database_that_failed(tmp_path):
    """F9 (breaker-23): `lantern copy SRC DST` fails with one line naming DST when DST cannot be written (a folder,
    a device, a file that is no database), SRC when SRC cannot be read: never the
    global default ~/.lantern/lantern.db nor None."""
    src = _store_with_one_entry(tmp_path / "a.db")
    (tmp_path / "adir").mkdir()
    (tmp_path / "notes.txt").write_text("not a database, but a long enough text file " * 100)
    for dst, named in (
        ("adir", "adir"),
        ("adir/", "adir"),
        ("/dev/null", "/dev/null"),
        ("notes.txt", "notes.txt"),
    ):
        proc = lantern("copy", str(src), dst, cwd=tmp_path)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, (dst, err)
        assert err.startswith(f"error: DST {named}"), (dst, err)
        assert "lantern.db" not in err and "None" not in err
    for bad_src in ("notes.txt", "adir"):
        proc = lantern("copy", bad_src, "b.db", cwd=tmp_path)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1, err
        assert err.startswith(f"error: SRC {bad_src}"), err
    assert not (tmp_path / "b.db").exists()
    proc = lantern("copy", "nowhere.db", "b.db", cwd=tmp_path)  # a missing source: named, and not created
    assert proc.returncode == 1 and b"SRC nowhere.db is not a Lantern store: no such file" in proc.stderr
    assert not (tmp_path / "nowhere.db").exists() and not (tmp_path / "b.db").exists()


def test_a_command_whose_database_is_its_own_option_names_it_in_errors(tmp_path):
    """The class of F9: a command working on another store than the global --db (`demo --demo-db`) names its own
    in a driver's error, not the global default; and a server URL given where only a SQLite file fits is a usage
    error, never a relative file name (F7's class), its password not shown."""
    (tmp_path / "adir").mkdir()
    proc = lantern("demo", "--demo-db", "adir", "--no-show-block", cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "error: adir is a directory" in err and "lantern.db" not in err, err
    url = "postgresql://ann:hunter2@/d8?host=/tmp/x"
    proc = lantern("demo", "--demo-db", url, cwd=tmp_path)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "not a server URL" in err and "hunter2" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_copying_a_store_onto_itself_is_refused_by_any_path(tmp_path):
    """F12 (breaker-23): `lantern copy SRC DST` where DST is SRC's file (the same path, another spelling, a
    symlink, a hard link) is refused with one line, exit 1, the file untouched."""
    src = _store_with_one_entry(tmp_path / "a.db")
    (tmp_path / "link.db").symlink_to(src)
    os.link(src, tmp_path / "hard.db")
    (tmp_path / "sub").mkdir()
    before = src.read_bytes(), src.stat().st_mtime_ns
    for a, b in (
        ("a.db", "a.db"),
        ("a.db", "./a.db"),
        ("a.db", str(src)),
        ("a.db", "sub/../a.db"),
        ("link.db", "a.db"),
        ("a.db", "hard.db"),
    ):
        proc = lantern("copy", a, b, cwd=tmp_path)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1 and "the same database" in err, (a, b, err)
        assert proc.stdout == b""
    assert (src.read_bytes(), src.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db", "hard.db", "link.db", "sub"]


def test_a_global_option_given_after_the_command_is_read_as_the_global_option():
    """Issue 37: `lantern recover Q --db X` is `lantern --db X recover Q` (a newcomer's first try), for every
    command that has no option of that name itself; a command's own `--db` (install) and what follows `--` stay."""
    import typer

    from lantern.cli import app, globals_first

    group = typer.main.get_command(app)
    assert globals_first(["recover", "port", "--db", "x.db", "-b", "300"]) == [
        "--db",
        "x.db",
        "recover",
        "port",
        "-b",
        "300",
    ]
    assert globals_first(["--embedder", "minilm", "stats", "--db=x.db"]) == [
        "--embedder",
        "minilm",
        "--db=x.db",
        "stats",
    ]
    assert globals_first(["hook", "codex", "--db", "x.db"]) == ["--db", "x.db", "hook", "codex"]
    assert globals_first(["install", "codex", "--db", "x.db"]) == ["install", "codex", "--db", "x.db"]  # its own
    assert globals_first(["recover", "--", "--db"]) == ["recover", "--", "--db"]
    assert globals_first(["--db", "x.db", "recover", "q"]) == ["--db", "x.db", "recover", "q"]
    assert globals_first(["nonsense", "--db", "x"]) == ["nonsense", "--db", "x"]
    for name, command in group.commands.items():  # every command: the options move, nothing else does
        if hasattr(command, "commands"):
            continue
        own = {o for p in command.params for o in getattr(p, "opts", [])}
        argv = [name, "a", "--rewound", "mark", "b"]
        expected = argv if "--rewound" in own else ["--rewound", "mark", name, "a", "b"]
        assert globals_first(argv) == expected, name


def test_recover_with_db_after_the_command_reads_that_database(tmp_path):
    from lantern import Lantern

    db = tmp_path / "after.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "The staging port is 5433."}], session="s")
    env = {k: v for k, v in os.environ.items() if k != "LANTERN_DB"} | {"HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "lantern", "recover", "staging port", "--db", str(db), "--budget", "400"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "5433" in done.stdout


def _typo(name: str, data) -> str:
    """``name`` with one generated edit: a letter dropped, doubled, replaced or two swapped."""
    at = data.draw(st.integers(0, len(name) - 2))
    kind = data.draw(st.sampled_from(["drop", "double", "replace", "swap"]))
    if kind == "drop":
        return name[:at] + name[at + 1 :]
    if kind == "double":
        return name[: at + 1] + name[at:]
    if kind == "replace":
        return name[:at] + ("x" if name[at] != "x" else "y") + name[at + 1 :]
    return name[:at] + name[at + 1] + name[at] + name[at + 2 :]


SESSION_NAMES = ["billing-api", "payments-worker", "frontend-redesign"]


@pytest.fixture(scope="module")
def named_sessions(tmp_path_factory):
    db = tmp_path_factory.mktemp("near") / "near.db"
    with Lantern(db) as lt:
        for name in SESSION_NAMES:
            lt.archive([{"role": "user", "content": f"the {name} listens on port 8080"}], session=name)
    return db


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(SESSION_NAMES), st.sampled_from(["search", "events", "export"]), st.data())
def test_an_unknown_session_names_the_closest_on_search_events_and_export(named_sessions, name, command, data):
    """A mistyped --session (one generated edit of a stored name) finds nothing on search, events and export, and
    each says so and names the stored session closest to it, as recover does (Lantern.why_none; before: an empty
    table, "no compaction events", "0 entries exported")."""
    typo = _typo(name, data)
    if typo == name:
        return
    args = {"search": ["search", "port"], "events": ["events"], "export": ["export", "-"]}[command]
    r = lantern(*args, "--session", typo, db=named_sessions)
    assert r.returncode == 0, r.stderr
    err = r.stderr.decode()
    assert f"in session {typo!r}" in err and "the closest:" in err and repr(name) in err.split("the closest:")[1], err
