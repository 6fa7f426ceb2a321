"""Fact versioning (docs/architecture.md §5.4): extraction per pattern family in English and Chinese (with the
sentences that must NOT yield a fact), bi-temporal supersession on the real store, out-of-order event times,
as_of, forgetting, the superseded-value notes in a recovered block, and the three-day multi-session scenario."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from lantern import Config, Lantern
from lantern.archive.facts import CHANGE_VERBS, extract_facts
from lantern.cli import app
from lantern.text.fact_keys import normalize_key


def facts(text: str) -> list[tuple[str, str | None, str | None]]:
    return [(f.key, f.value, f.replaces) for f in extract_facts([text])]


# ----------------------------------------------------------------------------------------------- extraction
@pytest.mark.parametrize(
    "text, expected",
    [
        ("the port is 5433", [("port", "5433", None)]),
        ("The staging DB port is 5433.", [("staging db port", "5433", None)]),
        ("Our API base URL is now `api.internal:8080`.", [("api base url", "api.internal:8080", None)]),
        ("The database is PostgreSQL", [("database", "PostgreSQL", None)]),
        ("set the log level to debug", [("log level", "debug", None)]),
        ("I changed the staging DB port to 5434.", [("staging db port", "5434", None)]),
        ("Please update the node version to 20.11.1 today.", [("node version", "20.11.1", None)]),
        ("DB_PORT=5433\nDB_HOST=db.internal", [("db port", "5433", None), ("db host", "db.internal", None)]),
        ("we decided that port = 5433 for now", [("port", "5433", None)]),
        ("timeout=30s, retries=3", [("timeout", "30s", None), ("retries", "3", None)]),
        ("port: 5433\nhost: db.local", [("port", "5433", None), ("host", "db.local", None)]),
        ("db_port: 5433", [("db port", "5433", None)]),
        ("We switched the database from MongoDB to PostgreSQL.", [("database", "PostgreSQL", "MongoDB")]),
        ("we migrated from MongoDB to PostgreSQL last week", [("", "PostgreSQL", "MongoDB")]),
        ("We no longer use Redis.", [("", None, "Redis")]),
    ],
)
def test_english_patterns(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("staging 数据库的端口是 5433", [("staging数据库端口", "5433", None)]),
        ("把端口改为5434了", [("端口", "5434", None)]),
        ("日志级别设置为 debug。", [("日志级别", "debug", None)]),
        ("缓存服务器换成 Memcached", [("缓存服务器", "Memcached", None)]),
        ("我的名字是张三。", [("名字", "张三", None)]),
        ("数据库从 MySQL 换成 PostgreSQL", [("数据库", "PostgreSQL", "MySQL")]),
        ("我们不再用 Redis 了", [("", None, "Redis")]),
        ("PORT=5433，然后重启", [("port", "5433", None)]),
    ],
)
def test_chinese_patterns(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        # a generic attribute key takes the topic of the clause before it (newcomer: three 端口 became one chain)
        ("数据库用 PostgreSQL，端口是 5433。", [("数据库端口", "5433", None)]),
        ("缓存服务用 Redis，端口是 6380。", [("缓存服务端口", "6380", None)]),
        ("网关的配置：端口改为 9443。", [("网关端口", "9443", None)]),
        ("我们用 Redis 做缓存，端口设为 6380", [("redis端口", "6380", None)]),
        ("Redis 那边，端口改成了 6381", [("redis端口", "6381", None)]),
        ("数据库用 PostgreSQL，端口从 5432 改成 5433", [("数据库端口", "5433", "5432")]),
        ("我们在用 MySQL，版本是 8.0", [("mysql版本", "8.0", None)]),
        ("For the gateway, the port is 9443.", [("gateway port", "9443", None)]),
        ("We use Postgres and the port is 5433.", [("postgres port", "5433", None)]),
        ("For staging, set the port to 5434.", [("staging port", "5434", None)]),
        # the owner of a key stated in the clause before (newcomer, second round)
        (
            "The database is PostgreSQL, the port is 5433.",
            [("database", "PostgreSQL", None), ("database port", "5433", None)],
        ),
        (
            "The database host is db.internal, the port is 5433.",
            [("database host", "db.internal", None), ("database port", "5433", None)],
        ),
        (
            "the redis host is cache.internal and the port is 6380",
            [("redis host", "cache.internal", None), ("redis port", "6380", None)],
        ),
        (
            "For the gateway the host is gw.internal and the port is 9443.",
            [("gateway host", "gw.internal", None), ("gateway port", "9443", None)],
        ),
        (
            "数据库地址是 db.internal，端口是 5433。",
            [("数据库地址", "db.internal", None), ("数据库端口", "5433", None)],
        ),
        ("网关用 nginx，版本是 1.25，端口是 9443。", [("网关版本", "1.25", None), ("网关端口", "9443", None)]),
        # no topic before it: the key stays bare
        ("好的，端口改为 5434", [("端口", "5434", None)]),
        ("另外，版本是 3.11", [("版本", "3.11", None)]),
        ("OK, the port is 5433.", [("port", "5433", None)]),
        ("I think the port is 5433.", [("port", "5433", None)]),
        ("It is done, the port is 5433.", [("port", "5433", None)]),
        ("The server is running, the port is 8080", [("port", "8080", None)]),
        # a qualified key is left as written
        ("记一下：staging 数据库的端口是 5433。", [("staging数据库端口", "5433", None)]),
        # "X is Y" without a determiner when X ends in an attribute word (newcomer: no fact before)
        ("Noted, redis port is 6380.", [("redis port", "6380", None)]),
        ("Python version is 3.11", [("python version", "3.11", None)]),
        # Chinese lead words and 了 after the verb
        ("我们用的数据库端口是 5433", [("数据库端口", "5433", None)]),
        ("后来网关的端口改成了 9443", [("网关端口", "9443", None)]),
    ],
)
def test_generic_keys_take_their_topic(text, expected):
    assert facts(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Note: this is important, read it twice.",  # prose with a colon
        "Warning: deprecated",  # a one-off prose label, not a config run
        "user: hello there",
        "see https://example.com/search?port=5433&host=db for details",  # URL query strings
        "docs at http://db.internal:5433/admin",
        "the server is running",  # adjective, not a value
        "Her name is Alice.",  # a third person's attribute, no determiner
        "Everything is 5 minutes away.",  # no attribute word
        "the port is open and the tests are green",
        "is the port 5433?",  # questions state nothing
        "what is the staging port?",
        "if a == b: return a <= c",  # comparisons
        "result = compute(x)",  # code
        "f(port=1)",  # keyword argument inside a call
        "set it to 5",  # pronoun key
        "我是学生",  # 是 with a plain noun and no attribute key
        "端口是多少？",  # question
        "The plan: we ship it tomorrow after lunch",
        "set up the mock to raise an error",  # a purpose, not a setting
        "Describe the code changes you are proposing.\\nBe concise.",  # pronoun in the key, escaped newline
        "answer = await ask(question)",  # code: the statement goes on after the value
        "self.port = 5433",
        "```python\nx = 1\nresult = compute\n```",  # variables in a fenced code block
    ],
)
def test_negatives_are_not_facts(text):
    assert facts(text) == []


def test_code_and_tool_output_yield_only_settings():
    fenced = "Put this in .env:\n```\nDB_PORT=5433\nx = 1\n```\nand restart."
    assert facts(fenced) == [("db port", "5433", None)]
    tool = "x = 1\nDB_HOST=db.internal\nthe server is PostgreSQL\nport: 5433\nhost: db.local"
    found = [(f.key, f.value) for f in extract_facts([], [tool])]
    assert found == [("db host", "db.internal"), ("port", "5433"), ("host", "db.local")]


def test_key_normalization_is_exact_after_case_articles_separators_and_de():
    assert normalize_key("The DB_Port") == normalize_key("db port") == normalize_key("our DB-port") == "db port"
    assert normalize_key("数据库的 端口") == normalize_key("数据库端口")
    assert normalize_key("database port") != normalize_key("DB port")  # no synonyms: documented


# ----------------------------------------------------------------------------------------------- store
def day(d: int, hour: int = 9) -> str:
    return f"2026-03-{d:02d}T{hour:02d}:00:00Z"


def at(d: int, hour: int = 9) -> datetime:
    return datetime(2026, 3, d, hour, tzinfo=timezone.utc)


def say(lantern: Lantern, text: str, when: str, session: str, reply: str = "Noted."):
    return lantern.archive(
        [{"role": "user", "content": text, "timestamp": when}, {"role": "assistant", "content": reply}], session=session
    )


@pytest.fixture()
def lantern(db_location):
    """A new store on each backend (conftest.py ``db_location``: SQLite, then PostgreSQL)."""
    with Lantern(db_location) as lt:
        yield lt


@pytest.fixture()
def sqlite_lantern(tmp_path):
    """A new SQLite store at ``tmp_path / "m.db"``, for the tests that read the file with sqlite3 themselves."""
    with Lantern(tmp_path / "m.db") as lt:
        yield lt


def test_facts_are_written_in_the_entry_transaction_and_schema_is_bitemporal(sqlite_lantern, tmp_path):
    say(sqlite_lantern, "the staging DB port is 5433", day(13), "s1")
    db = sqlite3.connect(tmp_path / "m.db")
    cols = {r[1] for r in db.execute("PRAGMA table_info(facts)")}
    assert {"entry_id", "key", "value", "valid_from", "valid_to", "recorded_at", "superseded_by"} <= cols
    row = db.execute("SELECT key, value, valid_from, valid_to FROM facts").fetchone()
    assert row == ("staging db port", "5433", at(13).timestamp(), None)


def test_failed_archive_writes_no_fact(sqlite_lantern, tmp_path, monkeypatch):
    import lantern.store.base as base_mod  # add's rows and facts, written in one transaction (store/base.py)

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(base_mod, "write_facts", boom)
    with pytest.raises(RuntimeError):
        say(sqlite_lantern, "the staging DB port is 5433", day(13), "s1")
    db = sqlite3.connect(tmp_path / "m.db")
    assert db.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM facts").fetchone()[0] == 0


def test_newer_value_supersedes_across_sessions_and_nothing_is_deleted(lantern):
    say(lantern, "the staging DB port is 5433", day(13), "s1")
    say(lantern, "I changed the staging DB port to 5434", day(14), "s2")
    history = lantern.facts("staging DB port", history=True)
    assert [(f.value, f.current) for f in history] == [("5433", False), ("5434", True)]
    assert history[0].valid_to == at(14) and history[0].superseded_by == history[1].id
    assert history[1].valid_to is None and history[1].session == "s2"
    assert [f.value for f in lantern.facts("staging db port")] == ["5434"]


def test_out_of_order_event_time_is_ordered_by_event_not_arrival(lantern):
    say(lantern, "the staging DB port is 5434", day(14), "s2")
    say(lantern, "the staging DB port is 5433", day(13), "s1")  # replayed / imported later, happened earlier
    assert [f.value for f in lantern.facts("staging db port")] == ["5434"]
    hist = lantern.facts("staging db port", history=True)
    assert [f.value for f in hist] == ["5433", "5434"] and hist[0].valid_to == at(14)
    say(lantern, "the staging DB port is 5435", day(13, 12), "s3")  # slots between the two
    hist = lantern.facts("staging db port", history=True)
    assert [f.value for f in hist] == ["5433", "5435", "5434"]
    assert [f.valid_to for f in hist] == [at(13, 12), at(14), None]
    assert [f.value for f in lantern.facts("staging db port", as_of=at(13, 15))] == ["5435"]


def test_as_of_answers_the_value_valid_then(lantern):
    say(lantern, "the staging DB port is 5433", day(13), "s1")
    say(lantern, "I changed the staging DB port to 5434", day(14), "s2")
    assert [f.value for f in lantern.facts("staging db port", as_of=at(13, 18))] == ["5433"]
    assert [f.value for f in lantern.facts("staging db port", as_of=at(15))] == ["5434"]
    assert lantern.facts("staging db port", as_of=at(12)) == []
    assert [f.value for f in lantern.facts("staging db port", as_of=at(13, 18), history=True)] == ["5433"]
    with pytest.raises(TypeError):
        lantern.facts(as_of="2026-03-13")


def test_switch_without_key_supersedes_whatever_held_the_old_value(lantern):
    say(lantern, "The database is MongoDB", day(10), "s1")
    say(lantern, "we migrated from MongoDB to PostgreSQL", day(11), "s2")
    assert [(f.key, f.value) for f in lantern.facts("database")] == [("database", "PostgreSQL")]
    say(lantern, "We no longer use PostgreSQL.", day(12), "s3")
    hist = lantern.facts("database", history=True)
    assert [f.value for f in hist] == ["MongoDB", "PostgreSQL", None]
    assert hist[-1].current and hist[-1].replaces == "PostgreSQL"


def test_chinese_supersession(lantern):
    say(lantern, "staging 数据库的端口是 5433", day(13), "s1", reply="好的")
    say(lantern, "staging 数据库端口改为 5434 了", day(14), "s2", reply="好的")
    assert [f.value for f in lantern.facts("staging 数据库的端口", history=True)] == ["5433", "5434"]
    assert [f.value for f in lantern.facts("staging数据库端口")] == ["5434"]


def test_forget_source_entry_removes_its_facts_and_relinks_the_chain(lantern):
    say(lantern, "the staging DB port is 5433", day(13), "s1")
    r2 = say(lantern, "I changed the staging DB port to 5434", day(14), "s2")
    lantern.forget(entry=r2.entry_ids[0])
    db = lantern.store.db  # either backend's connection
    assert db.execute("SELECT count(*) FROM facts WHERE value = '5434'").fetchone()[0] == 0
    current = lantern.facts("staging db port")
    assert [(f.value, f.valid_to, f.superseded_by) for f in current] == [("5433", None, None)]
    lantern.forget(session="s1")
    assert db.execute("SELECT count(*) FROM facts").fetchone()[0] == 0


def test_grown_turn_replaces_its_facts(lantern):
    lantern.archive([{"role": "user", "content": "set the port to 5433", "timestamp": day(13)}], session="s")
    lantern.archive(
        [
            {"role": "user", "content": "set the port to 5433", "timestamp": day(13)},
            {"role": "assistant", "content": "Done. Actually the port is 5434 now."},
        ],
        session="s",
    )
    assert lantern.stats()["entries"] == 1
    assert [f.value for f in lantern.facts("port", history=True)] == ["5433", "5434"]


def test_extraction_can_be_switched_off(tmp_path):
    with Lantern(tmp_path / "m.db", config=Config(extract_facts=False)) as lt:
        say(lt, "the staging DB port is 5433", day(13), "s1")
        assert lt.facts(history=True) == []


def test_facts_reads_take_an_extra_where_on_the_source_entry(lantern):
    from lantern.store import facts as fact_store

    say(lantern, "the staging DB port is 5433", day(13), "s1")
    say(lantern, "the build dir is out/release", day(13), "s2")
    only_s2 = fact_store.records(lantern.store.db, where="e.session = ?", params=("s2",))
    assert [(f.key, f.session) for f in only_s2] == [("build dir", "s2")]


# ----------------------------------------------------------------------------------------------- multi-session scenario
def test_three_sessions_over_three_days(lantern):
    """Day 1 sets the fact, day 2 changes it, day 3 asks: recovery marks 5433 superseded and shows 5434; as of
    day 1 it answers 5433 with no note; forgetting day 2's turn brings 5433 back as current."""
    say(lantern, "For the record, the staging DB port is 5433.", day(13), "day-1", "Noted: staging DB on 5433.")
    say(lantern, "Let's ship the release notes.", day(13, 10), "day-1", "Release notes drafted in NOTES.md.")
    r2 = say(lantern, "I changed the staging DB port to 5434 because of a clash.", day(14), "day-2", "OK, 5434 it is.")
    say(lantern, "Bump the changelog version.", day(14, 10), "day-2", "Changelog bumped.")

    question = "Which staging DB port did we use before?"  # day 3
    rec = lantern.recover(question, budget=2000)
    assert "5434" in rec.text and "5433" in rec.text
    assert "- staging DB port: 5433 until 14 Mar 2026 09:00, now 5434" in rec.text
    assert [(n.value, n.current) for n in rec.facts] == [("5433", "5434")]
    assert rec.chars == len(rec.text) <= 2000
    assert rec.text.index("[Fact versions") < rec.text.index("5433.")  # the note comes before the turns

    then = lantern.recover(question, budget=2000, as_of=at(13, 18))
    assert "5433" in then.text and "5434" not in then.text and then.facts == []
    assert {e.session for e in then.entries} == {"day-1"}
    assert [f.value for f in lantern.facts("staging db port", as_of=at(13, 18))] == ["5433"]

    lantern.forget(entry=r2.entry_ids[0])
    after = lantern.recover(question, budget=2000)
    assert "5434" not in after.text and after.facts == []
    assert [f.value for f in lantern.facts("staging db port")] == ["5433"]


def test_notes_never_break_the_budget(lantern):
    say(lantern, "the staging DB port is 5433. " + "filler words " * 60, day(13), "s1")
    say(lantern, "I changed the staging DB port to 5434", day(14), "s2")
    for budget in (0, 50, 120, 200, 300, 500, 900):
        rec = lantern.recover("staging DB port", budget=budget)
        assert len(rec.text) <= budget
        assert not rec.facts or "[Fact versions" in rec.text


def test_as_of_excludes_later_turns_from_candidates(lantern):
    say(lantern, "the deploy script is deploy_v1.sh", day(13), "s1")
    say(lantern, "the deploy script is deploy_v2.sh", day(15), "s2")
    rec = lantern.explain("deploy script", as_of=at(14))
    assert all(c.entry.session == "s1" for c in rec.candidates if c.verdict != "excluded:live")
    assert "deploy_v2" not in rec.text
    with pytest.raises(TypeError):
        lantern.recover("deploy script", as_of=1234)


# ----------------------------------------------------------------------------------------------- CLI
def test_cli_facts_mirrors_the_api(tmp_path):
    path = tmp_path / "m.db"
    with Lantern(path) as lt:
        say(lt, "the staging DB port is 5433", day(13), "s1")
        say(lt, "I changed the staging DB port to 5434", day(14), "s2")
    runner = CliRunner()
    out = runner.invoke(app, ["--db", str(path), "facts", "staging db port", "--json"])
    assert out.exit_code == 0, out.output
    assert [r["value"] for r in json.loads(out.stdout)] == ["5434"]
    out = runner.invoke(app, ["--db", str(path), "facts", "--as-of", "2026-03-13T18:00:00Z", "--json"])
    assert [r["value"] for r in json.loads(out.stdout)] == ["5433"]
    out = runner.invoke(app, ["--db", str(path), "facts", "STAGING_DB_PORT", "--history", "--json"])
    rows = json.loads(out.stdout)
    assert [(r["value"], r["current"]) for r in rows] == [("5433", False), ("5434", True)]
    out = runner.invoke(app, ["--db", str(path), "facts", "--history"])
    assert out.exit_code == 0 and "5434" in out.stdout and "s2" in out.stdout
    out = runner.invoke(
        app, ["--db", str(path), "recover", "staging DB port", "--as-of", "2026-03-13T18:00:00Z", "--json"]
    )
    assert out.exit_code == 0 and "5433" in out.stdout and "5434" not in out.stdout
    out = runner.invoke(app, ["--db", str(path), "recover", "staging DB port", "--json"])
    assert "5433 until 14 Mar 2026 09:00, now 5434" in json.loads(out.stdout)["text"]
    for command in (["facts"], ["recover", "staging DB port"]):  # a usage error, exit 2 (it was 1: newcomer finding)
        out = runner.invoke(app, ["--db", str(path), *command, "--as-of", "yesterday"])
        assert out.exit_code == 2 and "ISO 8601" in out.output and "Traceback" not in out.output


# ----------------------------------------------------------------------------------------------- chain property

from budget import examples  # noqa: E402


@settings(max_examples=examples(25), deadline=None)
@given(order=st.permutations(list(range(6))), forget=st.sets(st.integers(0, 5), max_size=3))
def test_chain_is_event_ordered_whatever_the_arrival_and_deletion_order(tmp_path_factory, order, forget):
    """Insert six versions of one key in any arrival order, forget any few: the chain is always the survivors
    sorted by event time, each ending where the next starts, the last one current."""
    with Lantern(tmp_path_factory.mktemp("chain") / "m.db") as lt:
        ids = {}
        for d in order:
            ids[d] = say(lt, f"the build port is {7000 + d}", day(10 + d), f"s{d}").entry_ids[0]
        for d in forget:
            lt.forget(entry=ids[d], vacuum=False)
        alive = sorted(set(range(6)) - forget)
        hist = lt.facts("build port", history=True)
        assert [f.value for f in hist] == [str(7000 + d) for d in alive]
        assert [f.valid_to for f in hist] == [at(10 + d) for d in alive[1:]] + [None] * bool(alive)
        assert [f.superseded_by for f in hist] == [f.id for f in hist[1:]] + [None] * bool(alive)
        assert [f.current for f in hist] == [False] * (len(alive) - 1) + [True] * bool(alive)


def test_as_of_note_names_the_value_valid_then(lantern):
    say(lantern, "For the record, the staging DB port is 5433.", day(13), "d1")
    say(lantern, "I changed the staging DB port to 5434.", day(14), "d2")
    say(lantern, "I changed the staging DB port to 5435.", day(16), "d3")
    rec = lantern.recover("Which staging DB port did we use before?", budget=3000, as_of=at(15))
    assert "- staging DB port: 5433 until 14 Mar 2026 09:00, as of 15 Mar 2026 09:00: 5434" in rec.text
    assert "5435" not in rec.text
    now = lantern.recover("Which staging DB port did we use before?", budget=3000)
    lines = [n.line for n in now.facts]
    assert "- staging DB port: 5433 until 14 Mar 2026 09:00, now 5435" in lines
    assert "- staging DB port: 5434 until 16 Mar 2026 09:00, now 5435" in lines


@settings(max_examples=examples(300), deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(
            list("ab XY_.=:-/\n`'\"?，。是改为从换成不再用的 the is set to from port 5433 no longer use")
        ),
        max_size=200,
    )
)
def test_extraction_never_crashes_and_values_stay_short(text):
    for f in extract_facts([text], [text]):
        assert f.value is None or 0 < len(f.value) <= 80
        assert f.key == normalize_key(f.key_text) or (not f.key and f.replaces)


def test_chinese_three_day_scenario_marks_the_superseded_port(lantern):
    say(lantern, "记一下：staging 数据库的端口是 5433。", day(13), "第一天", reply="好的，5433。")
    say(lantern, "staging 数据库端口改为 5434 了。", day(14), "第二天", reply="好的，已改为 5434。")
    rec = lantern.recover("之前 staging 数据库端口是多少？", budget=2000)
    assert "5433 until 14 Mar 2026 09:00, now 5434" in rec.text
    then = lantern.recover("之前 staging 数据库端口是多少？", budget=2000, as_of=at(13, 18))
    assert "5434" not in then.text and "5433" in then.text


@pytest.mark.parametrize(
    "change",
    [
        "测试服务器端口改为 9443，不再用 8443",  # the retraction is read before the new value
        "测试服务器端口改为 9443。不再用 8443 了。",  # two sentences, the new value first
        "I set the test server port to 9443, we no longer use 8443.",
    ],
)
def test_a_change_that_also_retracts_the_old_value_is_one_version_and_one_note(lantern, change):
    """ "不再用 8443" beside "改为 9443" says nothing the new value does not: one chain 8443 -> 9443, no retraction
    record, no stray key "8443", and the block's note says it once, without "(not used)"."""
    say(lantern, "测试服务器端口是 8443" if change[0] != "I" else "the test server port is 8443", day(1), "a")
    say(lantern, change, day(5), "b")
    key = "测试服务器端口" if change[0] != "I" else "test server port"
    assert [(f.key, f.value, f.current) for f in lantern.facts(history=True)] == [
        (key, "8443", False),
        (key, "9443", True),
    ]
    rec = lantern.recover(f"{key} 8443 9443", budget=3000)
    notes = [line for line in rec.text.splitlines() if line.startswith("- ")]
    assert notes == [f"- {key}: 8443 until 5 Mar 2026 09:00, now 9443"]
    assert "(not used)" not in rec.text and len(rec.facts) == 1


@pytest.mark.parametrize(
    "text, kept",
    [
        ("Set the staging DB port to 5434, we no longer use 5433.", [("staging db port", "5434", True)]),
        ("不再用 8443 了", []),
        ("We no longer use Redis.", [("redis", None, True)]),  # a name no key held stays its own key, as before
    ],
)
def test_a_retracted_bare_number_no_key_held_is_no_fact(lantern, text, kept):
    """Newcomer finding: "we no longer use 5433" where 5433 was never archived stored a fact whose key is the number
    itself, listed by ``facts`` as a current "5433: (retracted)"."""
    say(lantern, text, day(3), "a")
    assert [(f.key, f.value, f.current) for f in lantern.facts(history=True)] == kept


def test_a_retraction_alone_still_ends_the_value(lantern):
    say(lantern, "测试服务器端口是 8443", day(1), "a")
    say(lantern, "不再用 8443 了", day(5), "b")
    assert [f.value for f in lantern.facts("测试服务器端口", history=True)] == ["8443", None]


def test_a_key_is_found_by_the_name_facts_shows(tmp_path):
    """Normalizing is not idempotent ("MY_KEY" is stored as "my key", which would normalize again to "key"): a
    key is found both by what was written and by the stored name ``facts`` shows."""
    from lantern import Lantern

    with Lantern(tmp_path / "k.db") as m:
        m.archive([{"role": "user", "content": "Set it up:\n```\nexport MY_KEY=v1\n```"}], session="s")
        shown = [f.key for f in m.facts()]
        assert "my key" in shown
        assert [f.value for f in m.facts("my key")] == ["v1"] and [f.value for f in m.facts("MY_KEY")] == ["v1"]


def test_as_of_outside_the_utc_year_range_is_a_clear_error(tmp_path):
    from datetime import datetime

    from lantern import Lantern

    with Lantern(tmp_path / "r.db") as m:
        m.archive([{"role": "user", "content": "The staging port is 5433."}], session="s")
        for bad in ("0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-14:00"):
            with pytest.raises(ValueError, match="outside the years 1..9999"):
                m.recover("staging port", as_of=datetime.fromisoformat(bad))
            with pytest.raises(ValueError, match="outside the years 1..9999"):
                m.facts(as_of=datetime.fromisoformat(bad))


def test_many_superseded_values_leave_the_turns_most_of_the_budget(lantern):
    """Eighty services whose ports all changed later: the first packing's notes are larger than the budget. Before,
    the turns were packed again into the budget minus those notes, a few hundred characters, and the block came
    back mostly empty; now the notes take at most half the budget and the room is recomputed from the new
    packing's own notes: the block is nearly full, with turns and notes both."""
    colours = ["red", "blue", "green", "black", "white", "amber", "violet", "silver", "golden", "coral"]
    animals = ["cat", "dog", "fox", "owl", "elk", "bee", "yak", "emu"]
    names = [f"{c} {a}" for c in colours for a in animals]
    for k, name in enumerate(names):
        say(lantern, f"the {name} service port is {5000 + k}", day(13), f"a{k}")
    for k, name in enumerate(names):
        say(lantern, f"I changed the {name} service port to {7000 + k}", day(14), f"b{k}")
    # the relevance floor off: what is packed is tested here, not whether anything matches (test_relevance_floor.py)
    rec = lantern.recover("which service port did we set first for each service?", budget=6000, min_score=0)
    assert 5400 <= len(rec.text) <= 6000  # before: 4,913 characters (the room fixed by the first notes)
    assert rec.facts and len(rec.entries) >= 20
    notes = rec.text.split("\n\n")[1]
    assert notes.startswith("[Fact versions") and len(notes) <= 3000


def test_ports_of_different_services_are_separate_facts(lantern):
    """The newcomer's case: three services' ports in one conversation. Each is its own current fact, and a recovery
    about the cache's port carries no "now 9443" from the gateway."""
    say(lantern, "数据库用 PostgreSQL，端口是 5433。", day(13), "s1", reply="好的")
    say(lantern, "缓存服务用 Redis，端口是 6380。", day(13, 10), "s1", reply="好的")
    say(lantern, "网关的配置：端口改为 9443。", day(14), "s2", reply="好的")
    current = {f.key: f.value for f in lantern.facts()}
    assert current == {"数据库端口": "5433", "缓存服务端口": "6380", "网关端口": "9443"}
    assert all(len(lantern.facts(k, history=True)) == 1 for k in current)
    rec = lantern.recover("缓存服务的端口是多少？", budget=2000)
    assert "6380" in rec.text and "now 9443" not in rec.text and "now 6380" not in rec.text


def test_mixed_language_services_get_no_cross_service_notes(lantern):
    """The newcomer's second case: English and Chinese turns about a database, a gateway and a cache. Before, the
    block said "port: 5433 until 2 Nov, now 9443" (database -> gateway) and "端口: 9443 ... now 6380"."""
    msgs = [
        ("The database is PostgreSQL, the port is 5433.", day(1)),
        ("For the gateway, the port is 9443.", day(2)),
        ("网关用 nginx，版本是 1.25，端口是 9443。", day(3)),
        ("缓存用 Redis，版本是 7.2，端口是 6380。", day(4)),
    ]
    for text, when in msgs:
        say(lantern, text, when, "mix", reply="OK.")
    assert all(len(lantern.facts(f.key, history=True)) == 1 for f in lantern.facts())
    rec = lantern.recover("what is the database port?", budget=1500)
    assert "5433" in rec.text and "until" not in rec.text


@pytest.mark.parametrize(
    "text, expected",
    [
        # a lead word or interjection names no topic: the correction keeps the key and supersedes (breaker finding)
        ("No, the port is 5434.", [("port", "5434", None)]),
        ("Sorry, the port is 5434.", [("port", "5434", None)]),
        ("Correction: the port is 5434.", [("port", "5434", None)]),
        ("Hmm，端口是 5434", [("端口", "5434", None)]),
        ("看了 README，端口是 5434", [("端口", "5434", None)]),
        # one statement, one fact: "Now the port" is no determiner-less key
        ("Now the port is 5434.", [("port", "5434", None)]),
        ("Now our port is 5434.", [("port", "5434", None)]),
        # 用 inside a word (用户名, 应用, 有用) is no verb; 跑步机 is no topic
        ("用户名是 admin，密码是 secret123", [("用户名", "admin", None), ("密码", "secret123", None)]),
        ("应用网关用 nginx，地址是 10.0.0.1", [("应用网关地址", "10.0.0.1", None)]),
        ("跑步机坏了，密码是 abc123", [("密码", "abc123", None)]),
        ("MySQL版本是8.0，端口是3306", [("mysql版本", "8.0", None), ("mysql端口", "3306", None)]),
        # what the clause rules out is no topic
        ("我们不用 Redis 了，端口是 5432", [("端口", "5432", None)]),
        ("除了 Redis，端口是 5432", [("端口", "5432", None)]),
        ("We use Postgres and Redis, the port is 6380", [("port", "6380", None)]),
    ],
)
def test_topics_are_named_things_only(text, expected):
    assert facts(text) == expected


def test_a_correction_after_an_interjection_supersedes(lantern):
    say(lantern, "The port is 5433.", day(1), "s")
    say(lantern, "No, the port is 5434.", day(2), "s")
    assert [(f.key, f.value) for f in lantern.facts()] == [("port", "5434")]


@pytest.mark.parametrize(
    "text, expected",
    [
        # "the X of the Y" is one key, as before the topic rule (breaker, second round: it became "database")
        ("The port of the database is 5433.", [("port of the database", "5433", None)]),
        ("Set the port of the database to 5434.", [("port of the database", "5434", None)]),
        ("The password for the wifi is Hunter22.", [("password for the wifi", "Hunter22", None)]),
        # discourse leads and adverbials name no thing, so the correction keeps the bare key
        ("On second thought, the port is 5434.", [("port", "5434", None)]),
        ("For the record, the port is 5434.", [("port", "5434", None)]),
        ("In fact, the port is 5434.", [("port", "5434", None)]),
        ("When using Docker, the port is 8080.", [("port", "8080", None)]),
        ("I run tests, the port is 8080.", [("port", "8080", None)]),
        ("The weather is nice, the address is x.io", [("address", "x.io", None)]),
        ("Basically port is 5", [("port", "5", None)]),
        ("Btw redis port is 6381", [("redis port", "6381", None)]),
        # places a service runs in are topics
        ("On the staging server, the port is 5433.", [("staging server port", "5433", None)]),
        ("Ok so the database uses Postgres, and the port is 5434", [("database port", "5434", None)]),
        # Chinese fragments and time words are no topics
        ("我妈用 iPhone，版本是 17", [("版本", "17", None)]),
        ("今天用 Python 写了个脚本，版本是 3.11", [("版本", "3.11", None)]),
        ("天气是晴天，地址是 x.io", [("地址", "x.io", None)]),
    ],
)
def test_topics_second_round(text, expected):
    assert facts(text) == expected


def test_port_and_host_of_one_database_are_two_facts(lantern):
    say(lantern, "The port of the database is 5433.", day(1), "s")
    say(lantern, "The host of the database is db.internal.", day(2), "s")
    assert sorted(f.value for f in lantern.facts()) == ["5433", "db.internal"]
    assert "until" not in lantern.recover("what is the database port?", budget=1500).text


@settings(max_examples=examples(25), deadline=None)
@given(
    said=st.lists(
        st.tuples(st.sampled_from(["build port", "db host", "log level"]), st.integers(1, 20), st.integers(0, 3)),
        min_size=1,
        max_size=10,
    ),
    asked=st.one_of(st.none(), st.integers(1, 21)),
)
def test_values_at_is_the_latest_valid_record_of_each_key(tmp_path_factory, said, asked):
    """``values_at`` (the superseded-value notes' one look-up for many keys) gives, for each (scope, key), the last
    of the records ``records`` finds valid at the asked time, ordered by event time then id: a per-key oracle."""
    from lantern.store.facts import records, values_at

    with Lantern(tmp_path_factory.mktemp("values") / "m.db") as lt:
        for key, d, value in said:
            say(lt, f"the {key} is v{value}", day(d), f"s{d}")
        when = at(asked).timestamp() if asked is not None else None
        keys = {(r.scope, r.key) for r in records(lt.store.db, history=True)}
        got = values_at(lt.store.db, sorted(keys), when)
        for scope, key in keys:
            valid = [r for r in records(lt.store.db, key=key, as_of=when) if r.scope == scope]
            assert (got[scope, key].id if (scope, key) in got else None) == (valid[-1].id if valid else None)


def test_fact_reads_of_a_scope_walk_the_facts_not_every_entry_of_the_user(tmp_path):
    """The superseded-value notes read the facts of the packed entries with a scope condition on their source entries
    (``e.user_id = ?``): SQLite must walk the facts of those entries (index facts_entry, facts_chain), never every
    entry of the user (the default user holds them all) probing facts per entry, whose cost grows with the store."""
    from lantern.scope import Scope, scope_where
    from lantern.store import facts as fact_store

    with Lantern(tmp_path / "plan.db", embedder="minilm") as lt:
        lt.archive([{"role": "user", "content": f"The svc{i} port is {5000 + i}."} for i in range(300)], "s")
        db = lt.store.db
        where, params = scope_where("e", Scope())
        ids = [r[0] for r in db.execute("SELECT id FROM entries LIMIT 50")]
        calls = {
            "facts_of_entries": (
                f"{fact_store._select(db)} WHERE f.entry_id IN ({','.join('?' * len(ids))}) AND ({where})",
                (*ids, *params),
            ),
            "values_at": (
                f"{fact_store._select(db)} WHERE f.scope = ? AND f.key IN (?, ?) AND f.valid_to IS NULL AND ({where})",
                ("", "svc1 port", "svc2 port", *params),
            ),
        }
        for name, (sql, args) in calls.items():
            plan = " | ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, args))
            assert plan.startswith("SEARCH f USING INDEX facts_"), (name, plan)
            assert "SEARCH e USING INTEGER PRIMARY KEY" in plan, (name, plan)
        found = fact_store.facts_of_entries(db, ids, where, params)
        assert {r.entry_id for r in found} == set(ids)  # every entry states one fact


_KEYS = ["statement_timeout", "pool size", "the max connections", "our cache ttl", "DB_PORT", "worker count"]


@given(
    verb=st.sampled_from(CHANGE_VERBS).filter(lambda v: v != "went"),
    key=st.sampled_from(_KEYS),
    old=st.integers(1, 99_999),
    new=st.integers(1, 99_999),
    unit=st.sampled_from(["", " ms", " s", "%"]),
    tail=st.sampled_from(["", " in billing/db/pool.py", "; the report now loads", " for the ledger pool"]),
    capital=st.booleans(),
)
@settings(max_examples=examples(300), deadline=None)
def test_every_change_verb_is_read_in_both_change_forms(verb, key, old, new, unit, tail, capital):
    """Every verb that gives a setting a new value, in every inflection, reads in "V X from A to B" (X = B, A
    replaced) and in "V X to B" (X = B), a unit after the numbers or not: "Raised statement_timeout from 2500 to
    8000 ms" was no fact, and the quickstart fixture gave ``lantern facts`` nothing."""
    assume(old != new)
    v = verb.capitalize() if capital else verb
    expected_key = normalize_key(key.split(" ", 1)[1] if key.startswith(("the ", "our ")) else key)
    switched = extract_facts([f"{v} {key} from {old}{unit} to {new}{unit}{tail}."])
    assert [(f.key, f.value.rstrip("%"), f.replaces.rstrip("%")) for f in switched] == [
        (expected_key, str(new), str(old))
    ], switched
    set_ = extract_facts([f"{v} {key} to {new}{unit}{tail}."])
    assert [(f.key, f.value.rstrip("%")) for f in set_] == [(expected_key, str(new))], set_


def test_the_quickstart_fixture_has_facts(tmp_path):
    """The README's quickstart transcript raises the ledger pool's statement timeout from 2500 to 8000 ms:
    ``lantern facts`` shows it (it printed "no facts")."""
    db = tmp_path / "quickstart.db"
    runner = CliRunner()
    fixture = str(Path(__file__).parent / "fixtures" / "claude_code_session.jsonl")
    assert runner.invoke(app, ["--db", str(db), "ingest", fixture]).exit_code == 0
    r = runner.invoke(app, ["--db", str(db), "facts", "--json"])
    facts = {f["key"]: f for f in json.loads(r.stdout)}
    assert facts["statement timeout"]["value"] == "8000", facts
