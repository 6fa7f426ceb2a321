"""A PostgreSQL user who may not read Lantern's existing tables is told that, not that it may not create them
(breaker finding F12, issue #23). A real server (conftest.py ``pg_server``)."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from lantern import Lantern, LanternError


def test_a_user_without_select_on_the_existing_tables_is_told_so(pg_server):
    name, role = "t_" + uuid.uuid4().hex[:12], "r_" + uuid.uuid4().hex[:8]
    with psycopg.connect(pg_server.get_uri(), autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {name}")  # owned by the administrator, who creates the tables below
    with Lantern(pg_server.get_uri(name)) as lt:
        lt.archive([{"role": "user", "content": "The staging Redis listens on port 6380."}], session="chat")
    url = pg_server.get_uri(name).replace("postgresql://postgres:", f"postgresql://{role}:", 1)
    with pytest.raises(LanternError) as info:
        Lantern(url)
    message = str(info.value)
    assert "tables exist here but this user may not read or write them" in message, message
    assert "may not create" not in message and "permission denied for table" in message
    assert len(message.splitlines()) == 1
