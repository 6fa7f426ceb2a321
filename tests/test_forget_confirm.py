"""``lantern forget`` asks before it deletes (on a terminal), ``--yes`` skips the question, and without a terminal
it refuses unless ``--yes`` is given; a ``--session`` that matches nothing names the user's closest sessions."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from clirun import lantern
from lantern import Lantern

SELECTORS = st.sampled_from(
    [
        ("--session", "alpha"),
        ("--entry", "1"),
        ("--user", "bob"),
        ("--agent", "a1"),
        ("--project", "p1"),
        ("--session", "alpha", "--agent", "a1"),
    ]
)


def _store(root: Path) -> Path:
    db = root / "f.db"
    with Lantern(db, "fake") as lt:
        for user in ("", "bob"):
            for session in ("alpha", "beta"):
                lt.archive(
                    [{"role": "user", "content": f"{session} of {user or 'me'}: the port is 5433"}],
                    session=session,
                    user=user,
                    agent="a1",
                    project="p1",
                )
    return db


def _count(db: Path) -> int:
    with Lantern(db, "fake") as lt:
        return lt.count()


@given(selector=SELECTORS, yes=st.sampled_from([None, "--yes", "-y"]))
@settings(max_examples=examples(20), deadline=None)
def test_forget_without_a_terminal_needs_yes(selector, yes):
    """No terminal to ask on: refused in one line naming --yes, the store untouched; with --yes it deletes."""
    db = _store(Path(tempfile.mkdtemp()))
    before = _count(db)
    r = lantern("forget", *selector, *([yes] if yes else []), db=db, env={"LANTERN_USER": None})
    err = r.stderr.decode()
    if yes is None:
        assert r.returncode == 1 and "give --yes to confirm" in err and err.count("\n") == 1, err
        assert _count(db) == before
    else:
        assert r.returncode == 0, err
        assert _count(db) < before


def _on_a_terminal(db: Path, answer: bytes, *args: str) -> tuple[int, str]:
    """``lantern forget ARGS`` in a real process whose stdin and stderr are a pseudo-terminal; ``answer`` typed."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "LANTERN_USER": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "lantern", "--db", str(db), "forget", *args],
        stdin=slave,
        stderr=slave,
        stdout=subprocess.PIPE,
        env=env,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while b"[y/N]" not in seen and time.monotonic() < deadline and proc.poll() is None:
        try:
            seen += os.read(master, 4096)
        except OSError:
            break
    os.write(master, answer)
    out, _ = proc.communicate(timeout=60)
    try:
        while True:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            seen += chunk
    except OSError:
        pass
    os.close(master)
    return proc.returncode, (seen + out).decode(errors="replace")


def test_forget_on_a_terminal_asks_first(tmp_path):
    db = _store(tmp_path)
    before = _count(db)
    code, text = _on_a_terminal(db, b"n\n", "--session", "alpha")
    assert (
        "Delete every entry of session 'alpha'" in text
        and "from every table: 1 entry?" in text
        and code == 1
        and _count(db) == before
    ), text
    code, text = _on_a_terminal(db, b"y\n", "--session", "alpha")
    assert code == 0 and "1 entry forgotten" in text and _count(db) == before - 1, text


def test_forget_of_nothing_asks_nothing_and_says_what_matched_nothing(tmp_path):
    """A selection of no entry is not a question (there is nothing to confirm): it says which filter found nothing."""
    db = _store(tmp_path)
    before = _count(db)
    code, text = _on_a_terminal(db, b"y\n", "--session", "no-such-session")
    assert "[y/N]" not in text and "no session 'no-such-session' matched" in text, text
    assert code == 0 and _count(db) == before, text


@given(
    names=st.lists(st.from_regex(r"[a-z]{3,8}-[a-z]{3,8}", fullmatch=True), min_size=2, max_size=5, unique=True),
    pick=st.integers(0, 4),
    cut=st.integers(1, 5),
)
@settings(max_examples=examples(15), deadline=None)
def test_a_session_that_matches_nothing_names_the_closest_of_the_user(names, pick, cut):
    """``forget --session`` and ``recover --session`` with a slip in the name name the session meant, and only
    sessions of the user asked for (another user's sessions, however close, never)."""
    db = Path(tempfile.mkdtemp()) / "near.db"
    with Lantern(db, "fake") as lt:
        for name in names:
            lt.archive([{"role": "user", "content": f"the {name} port is 5433"}], session=name, user="me")
            lt.archive([{"role": "user", "content": f"the {name} port is 6543"}], session=name + "x", user="other")
    meant = names[pick % len(names)]
    i = cut % len(meant)
    typo = meant[:i] + meant[i + 1 :]
    if typo in names:
        return
    for args in (("forget", "--yes", "--session", typo), ("recover", "port", "--session", typo)):
        r = lantern(*args, "--user", "me", db=db)
        err = r.stderr.decode()
        named = re.findall(r"'([^']*)'", err.split("the closest:", 1)[1]) if "the closest:" in err else []
        assert meant in named, (args, err)
        assert set(named) <= set(names), (args, err)
    assert _count(db) == 2 * len(names)
