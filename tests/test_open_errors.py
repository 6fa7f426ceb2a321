"""Errors opening a store name their cause in one line: a --db that is a directory says so (every command, the copy's
DST too), a PostgreSQL URL the server refuses for a bad ``options=`` setting gives the server's words, one libpq cannot
read says the URL is not valid (not "cannot connect"), and an undecodable stored vector is warned about once per store
handle, however many searches read it and however often its index starts over. Real stores, a real server."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from clirun import lantern as cli
from lantern import Lantern, LanternError
from lantern.config import redact_url


@pytest.mark.parametrize(
    "args",
    [
        ("stats",),
        ("search", "port"),
        ("recover", "port"),
        ("export", "-"),
        ("facts",),
        ("forget", "--yes", "--session", "s"),
    ],
)
def test_a_db_that_is_a_directory_is_named_so_by_every_command(tmp_path, args):
    (tmp_path / "adir").mkdir()
    proc = cli(*args, db=tmp_path / "adir")
    err = proc.stderr.decode()
    assert proc.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{tmp_path / 'adir'} is a directory, not a database file" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"] and not any((tmp_path / "adir").iterdir())


def test_a_directory_given_to_the_api_or_as_copy_dst_is_named_so(tmp_path):
    (tmp_path / "adir").mkdir()
    with pytest.raises(LanternError, match="is a directory, not a database file"):
        Lantern(tmp_path / "adir")
    with Lantern(tmp_path / "a.db") as lt:
        lt.archive([{"role": "user", "content": "The staging Redis listens on port 6380."}], session="s")
    proc = cli("copy", str(tmp_path / "a.db"), str(tmp_path / "adir"))
    assert proc.stderr.decode().startswith(f"error: DST {tmp_path / 'adir'} is a directory"), proc.stderr


def test_url_option_errors_give_the_servers_words_or_say_the_url_is_invalid(pg_url):
    url = pg_url()
    sep = "&" if "?" in url else "?"
    cases = [
        (f"{url}{sep}options=-c%20lantern_no_such_setting%3D1", "the server refused the connection: "),
        (f"{url}{sep}options=-c%20work_mem%3Dlots", "the server refused the connection: "),
        (f"{url}{sep}no_such_parameter=1", "the URL is not valid: "),
        (f"{url}{sep}sslmode=sometimes", "the URL is not valid: "),
    ]
    for bad, words in cases:
        with pytest.raises(LanternError) as info:
            Lantern(bad)
        said = str(info.value)
        assert words in said and "cannot connect" not in said, said
        proc = cli("stats", db=bad)
        err = proc.stderr.decode()
        assert proc.returncode == 1 and err.count("\n") == 1 and words in err, err
        assert err.startswith(f"error: {redact_url(bad)}"), err


def test_an_undecodable_vector_is_warned_about_once_per_store_handle(tmp_path, caplog):
    db = tmp_path / "u.db"
    with Lantern(db) as lt:
        lt.archive([{"role": "user", "content": "redis port is 6380"}], session="s")
        lt.archive([{"role": "user", "content": "postgres port is 5433"}], session="s")
    raw = sqlite3.connect(db)
    raw.execute("UPDATE embeddings SET vector = x'0102' WHERE entry_id = 1")
    raw.commit()
    raw.close()
    with caplog.at_level(logging.WARNING), Lantern(db) as lt:
        for _ in range(2):
            lt.search("port")
            lt.recover("which port", budget=500, min_score=0)
            lt.index.reset()  # an index that starts over reads the row again
            lt.search("port")
    assert caplog.text.count("cannot be decoded") == 1, caplog.text
