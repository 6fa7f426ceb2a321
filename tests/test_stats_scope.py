"""``stats`` is scoped like every read (issue 20, item 5): a user's counts are her own; every user's counts only in
the explicit all-users form (``Lantern.stats(all_users=True)``, ``lantern stats --all-users``). The REST and MCP
stats take the scope too and leave out the file's size, which counts every user's entries."""

from __future__ import annotations

import json
import re

import anyio
import pytest
from typer.testing import CliRunner

from lantern import Lantern
from lantern.cli import app
from samples import PORT_CONVERSATION


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("stats") / "stats.db"
    with Lantern(path) as lt:
        lt.archive(PORT_CONVERSATION, session="a1", user="alice")
        lt.archive(PORT_CONVERSATION, session="a2", user="alice", agent="coder")
        lt.archive(PORT_CONVERSATION[:3], session="b1", user="bob")
    return path


def test_python_api_counts_the_users_own_entries(db):
    with Lantern(db) as lt:
        mine = lt.stats()  # the handle's user: the default user, who has nothing
        assert (mine["user"], mine["entries"], mine["sessions"], mine["text_chars"]) == ("", 0, 0, 0)
        alice, bob = lt.stats(user="alice"), lt.stats(user="bob")
        assert (alice["entries"], alice["sessions"]) == (4, 2) and (bob["entries"], bob["sessions"]) == (1, 1)
        assert lt.stats(user="alice", agent="coder")["entries"] == 2
        assert "users" not in alice and "free_bytes" not in alice
        every = lt.stats(all_users=True)
        assert (every["entries"], every["sessions"], every["users"]) == (5, 3, 2)
        assert every["text_chars"] == alice["text_chars"] + bob["text_chars"]
        with pytest.raises(ValueError):
            lt.stats(user="bob", all_users=True)
    with Lantern(db, user="bob") as lt:
        assert lt.stats()["entries"] == 1 and lt.stats()["user"] == "bob"


def test_cli_user_env_and_all_users(db, monkeypatch):
    runner = CliRunner()

    def stats(*args: str, env: dict | None = None):
        out = runner.invoke(app, ["--db", str(db), "stats", "--json", *args], env=env)
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)

    monkeypatch.delenv("LANTERN_USER", raising=False)
    assert stats()["entries"] == 0
    assert stats("--user", "alice")["entries"] == 4
    assert stats(env={"LANTERN_USER": "bob"})["entries"] == 1
    assert stats("--user", "", env={"LANTERN_USER": "bob"})["entries"] == 0  # --user "" is the default user
    every = stats("--all-users", env={"LANTERN_USER": "bob"})  # $LANTERN_USER does not narrow --all-users
    assert every["entries"] == 5 and every["users"] == 2
    out = runner.invoke(app, ["--db", str(db), "stats", "--all-users", "--user", "bob"])
    assert out.exit_code == 1 and "--all-users" in out.output
    text = runner.invoke(app, ["--db", str(db), "stats"], env={"LANTERN_USER": ""}).output
    assert 'user: "" (the default user)' in text
    by_table = every["bytes_per_turn_by_table"]
    # per-table bytes per turn, one per line, in the plain stats too: the file's figure, over every user's turns
    for args in (["--all-users"], [], ["--user", "alice"]):
        shown = runner.invoke(app, ["--db", str(db), "stats", *args]).output
        assert "{" not in shown and by_table and all(re.search(rf"\b{t}\s+[\d,]+$", shown, re.M) for t in by_table)
        assert re.search(r"^\s*bytes_per_turn: \d+$", shown, re.M) and "bytes_per_entry" not in shown
    alice = stats("--user", "alice")
    assert alice["bytes_per_turn_by_table"] == by_table and alice["bytes_per_turn"] == every["bytes_per_turn"]


def test_rest_and_mcp_stats_are_scoped(db):
    pytest.importorskip("fastapi")
    pytest.importorskip("mcp")
    from fastapi.testclient import TestClient

    from lantern.integrations.mcp import build_server
    from lantern.integrations.proxy import build_app

    with TestClient(build_app(db), raise_server_exceptions=False, base_url="http://127.0.0.1") as client:
        default = client.get("/v1/memory/stats").json()
        assert default["entries"] == 0 and not {"database_bytes", "bytes_per_turn", "bytes_per_turn_by_table"} & set(
            default
        )
        assert client.get("/v1/memory/stats", params={"user": "alice"}).json()["entries"] == 4
        assert client.get("/v1/memory/stats", params={"user": "alice", "agent": "coder"}).json()["entries"] == 2

    server = build_server(db)

    async def run():
        for args, n in (({}, 0), ({"user": "bob"}, 1), ({"user": "alice"}, 4)):
            r = await server.call_tool("stats", args)
            out = _structured(r)
            assert out["entries"] == n and "database_bytes" not in out and "bytes_per_turn" not in out, out

    anyio.run(run)
    server._lantern_service.close()


def _structured(result):
    """The structured output of a direct ``call_tool`` on the server: 1.x's FastMCP returns (content, structured),
    2.x's MCPServer a CallToolResult (``structured_content``)."""
    if isinstance(result, tuple):
        return result[1]
    return result.structured_content if hasattr(result, "structured_content") else result.structuredContent
