"""User, agent, project and session ids have one maximum length on both backends (breaker finding F11, issue #23):
an id at the maximum, in UTF-8's worst case of 4 bytes a character, is stored and found on both (PostgreSQL's
(user_id, session, turn) index row included); one character more is refused up front with one NameTooLongError
(a LanternError) naming the id and both lengths, by every call and by the CLI in one line, nothing written.
Real SQLite and a real server (conftest.py ``db_location``)."""

from __future__ import annotations

import json

import pytest

from clirun import lantern as cli
from lantern import Lantern
from lantern.errors import ExportFormatError, NameTooLongError
from lantern.scope import MAX_ID_CHARS, MAX_SESSION_CHARS

TURNS = [
    {"role": "user", "content": "Which port did we give the staging Redis?"},
    {"role": "assistant", "content": "Staging Redis listens on port 6380, set in deploy/staging/redis.conf."},
]
LIMITS = {"user": MAX_ID_CHARS, "agent": MAX_ID_CHARS, "project": MAX_ID_CHARS, "session": MAX_SESSION_CHARS}


def wide(n: int) -> str:
    """``n`` characters of 4 bytes each in UTF-8 (CJK Extension B), few repeated: text compression cannot shrink
    the index row."""
    return "".join(chr(0x20000 + (i * 7919) % 40_000) for i in range(n))


@pytest.mark.parametrize("kind", list(LIMITS))
def test_an_id_at_the_maximum_is_stored_and_one_more_character_is_refused_up_front(db_location, kind):
    limit = LIMITS[kind]
    longest = {"user": wide(MAX_ID_CHARS), "session": wide(MAX_SESSION_CHARS)}  # the widest index row
    longest[kind] = wide(limit)
    with Lantern(db_location) as lt:
        archived = lt.archive(TURNS, **longest)
        assert archived.added == 1
        assert "6380" in lt.recover("staging redis port", budget=2000, **longest).text
        scope = {k: v for k, v in longest.items() if k != "session"}
        assert lt.abandon({archived.entry_ids[0]: "abandoned-1234abcd"}, keep=True, **scope) == 1  # the longest row
        assert lt.search("redis", session=longest["session"], **scope)  # a sub-session's entry, found under it
        over = {**longest, kind: wide(limit + 1)}
        calls = {
            "archive": lambda: lt.archive(TURNS, **over),
            "recover": lambda: lt.recover("staging redis port", **over),
            "search": lambda: lt.search("redis", **over),
            "forget": lambda: lt.forget(**over),
        }
        for name, call in calls.items():
            with pytest.raises(NameTooLongError) as info:
                call()
            message = str(info.value)
            assert f"{kind} is {limit + 1:,} characters long; at most {limit}" in message, (name, message)
            assert len(message.splitlines()) == 1
        assert lt.store.count() == 1  # nothing written


def test_the_handles_user_and_an_import_and_the_cli_are_checked_too(db_location, tmp_path):
    with pytest.raises(NameTooLongError, match="user is 257 characters long; at most 256"):
        Lantern(db_location, user="u" * (MAX_ID_CHARS + 1))
    path = tmp_path / "x.jsonl"
    with Lantern(db_location) as lt:
        header = {"type": "header", "format": "lantern-export", "version": 1, "embeddings": False}
        ok = {"type": "entry", "session": "s", "turn": 0, "text": "a", "summary": "a", "archived_at": 1.7e9}
        bad = {**ok, "turn": 1, "text": "b", "summary": "b", "user_id": wide(MAX_ID_CHARS + 1)}
        path.write_text("".join(json.dumps(x) + "\n" for x in (header, ok, bad)))
        with pytest.raises(ExportFormatError) as info:
            lt.import_(path)
        assert info.value.line == 3 and info.value.field == "user_id" and "at most 256" in str(info.value)
        assert lt.store.count() == 0
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
    for option, value in (("--user", "u" * 2800), ("--session", "s" * 2800)):
        proc = cli("ingest", str(transcript), option, value, db=db_location)
        err = proc.stderr.decode().strip()
        assert proc.returncode == 1 and len(err.splitlines()) == 1 and "Traceback" not in err, err
        assert "2,800 characters long; at most" in err, err
