"""The same behaviour on both backends: a SQLite file and a real PostgreSQL server (pgserver; conftest.py
``db_location``), with the fake embedder (tests/conftest.py). Archive, compaction, recover in English and Chinese; dedup
and grown turns; scopes; facts; forget leaving no row behind."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lantern import Lantern

PORT_TURN = [
    {"role": "user", "content": "Start the postgres container for the billing service."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"cmd": "docker run -d -p 5433:5432 postgres:16"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "listening on 127.0.0.1:5433\ncontainer 9f3ab2c1d0e4 up"},
    {"role": "assistant", "content": "Postgres is up on port 5433; config lives in src/billing/db_config.py."},
]
FILLER = [
    ("Can you rename the helper in utils?", "Renamed format_money to format_amount in src/billing/utils.py."),
    ("Add a README section about deployment.", "Added a Deployment section describing the Helm chart."),
    ("Why is the CI slow?", "The test matrix runs three Python versions; caching pip would save about 40s."),
    ("Let's use ruff instead of flake8.", "Switched the linter to ruff and removed the flake8 config."),
    ("What does the cron job do?", "It exports invoices nightly at 02:00 UTC to the S3 bucket billing-exports."),
]
CHINESE = [
    ("我们的数据库迁移计划是什么？", "先在预发布环境演练，周六凌晨两点切换到新集群，回滚窗口三十分钟。"),
    ("报销系统的负责人是谁？", "报销系统由财务部的王丽负责，她的分机号是8721。"),
    ("前端用什么框架？", "前端统一使用React和TypeScript，组件库是Ant Design。"),
    ("测试覆盖率要求多少？", "主干分支要求单元测试覆盖率不低于百分之八十。"),
]


def messages(pairs):
    out = []
    for q, a in pairs:
        out += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return out


def row_counts(lt: Lantern, ids: list[int]) -> dict[str, int]:
    """Rows that still mention the entries ``ids``, per table, on either backend (the full-text index of SQLite
    is its own table; PostgreSQL's is a column of ``entries``)."""
    marks = ",".join("?" * len(ids))
    tables = {"entries": "id", "embeddings": "entry_id", "facts": "entry_id"}
    if getattr(lt.store, "backend", "sqlite") == "sqlite":
        tables["entries_fts"] = "rowid"
    out = {
        t: lt.store.db.execute(f"SELECT count(*) FROM {t} WHERE {c} IN ({marks})", ids).fetchone()[0]
        for t, c in tables.items()
    }
    pending = [r[0] for r in lt.store.db.execute("SELECT entry_ids FROM recoveries").fetchall()]
    out["recoveries"] = sum(any(f"{i}" in p.strip("[]").split(", ") for i in ids) for p in pending)
    events = [r[0] + r[1] for r in lt.store.db.execute("SELECT lost, injected FROM events").fetchall()]
    out["events"] = sum(any(str(i) in e for i in ids) for e in events)
    return out


def test_archive_compaction_recover_brings_back_the_lost_port(db_location):
    with Lantern(db_location) as lt:
        first = lt.archive(PORT_TURN, session="s1")
        lt.archive(messages(FILLER), session="s1")
        live = messages(FILLER[-2:])  # after the compaction only the last two exchanges are in the context
        rec = lt.recover("which port does the billing database listen on?", session="s1", budget=1500, exclude=live)
        assert "5433" in rec.text
        assert first.entry_ids[0] in [e.id for e in rec.entries]
        assert all("flake8" not in e.text for e in rec.entries)  # still live: never re-injected


def test_chinese_detail_is_recovered_and_ranked_by_full_text(db_location):
    with Lantern(db_location) as lt:
        lt.archive(messages(CHINESE), session="zh")
        rec = lt.recover("报销系统负责人的分机号", budget=600)
        assert "8721" in rec.text
        hits = lt.search("王丽的分机号", k=3)
        assert "8721" in hits[0].entry.text
        assert "fulltext" in hits[0].ranks  # the CJK bigrams matched in the full-text index


def test_dedup_and_a_grown_turn_on_one_entry(db_location):
    with Lantern(db_location) as lt:
        a = lt.archive(PORT_TURN, session="s1")
        b = lt.archive(PORT_TURN, session="s1")
        assert (a.added, b.added, b.duplicates) == (1, 0, 1) and a.entry_ids == b.entry_ids
        ask = [{"role": "user", "content": "What is the retry policy for the webhook?"}]
        grown = ask + [{"role": "assistant", "content": "Three retries with exponential backoff, 2s base."}]
        lt.archive(ask, session="s2")
        lt.archive(grown, session="s2")
        turns = lt.store.session_turns("s2")
        assert len(turns) == 1 and "exponential backoff" in turns[0][2]
        assert lt.store.count() == 2


def test_scopes_keep_users_apart(db_location):
    with Lantern(db_location, user="alice") as alice, Lantern(db_location, user="bob") as bob:
        alice.archive([{"role": "user", "content": "My locker code is 4711."}], session="default")
        bob.archive([{"role": "user", "content": "My favourite tea is genmaicha."}], session="default")
        assert "4711" not in bob.recover("what is the locker code?", budget=2000).text
        assert all(h.entry.user == "bob" for h in bob.search("locker code", k=5))
        assert "4711" in alice.recover("what is the locker code?", budget=2000).text
        assert bob.forget(user="bob", vacuum=False) == 1
        assert alice.store.count() == 1  # alice's entry is untouched


def test_facts_keep_their_versions(db_location):
    with Lantern(db_location) as lt:
        lt.archive([{"role": "user", "content": "The staging database port is 5433."}], session="ops")
        lt.archive([{"role": "user", "content": "We moved it: the staging database port is now 5434."}], session="ops")
        current = [f for f in lt.facts() if f.value in ("5433", "5434")]
        assert [f.value for f in current] == ["5434"]
        history = [f.value for f in lt.facts(current[0].key, history=True)]
        assert history == ["5433", "5434"]
        rec = lt.recover("what was the staging database port before the move?", budget=3000)
        assert "5433" in rec.text and [(n.value, n.current) for n in rec.facts] == [("5433", "5434")]  # changed since


def test_forget_leaves_no_row_in_any_table(db_location):
    with Lantern(db_location) as lt:
        kept = lt.archive(messages(FILLER), session="keep").entry_ids
        gone = lt.archive(PORT_TURN + messages(CHINESE[:2]), session="secret").entry_ids
        rec = lt.recover("which port is the billing database on?", budget=3000)  # pending recovery rows
        lt.record_compaction(rec, session="secret", reason="summary", lost=gone)  # an event naming them
        assert sum(row_counts(lt, gone).values()) > 0
        assert lt.forget(session="secret") == len(gone)
        assert row_counts(lt, gone) == dict.fromkeys(row_counts(lt, gone), 0)
        assert "5433" not in lt.recover("which port is the billing database on?", budget=3000).text
        assert lt.store.count() == len(kept)


def test_two_handles_archiving_the_same_turns_at_once_store_each_once(db_location):
    turns = [messages([(f"question {i} about the ledger?", f"answer {i}: entry {i * 7}")]) for i in range(12)]
    with Lantern(db_location) as first:  # creates the store (and records the embedder) before the race
        first.archive(PORT_TURN, session="setup")
    handles = [Lantern(db_location), Lantern(db_location)]
    errors: list[BaseException] = []

    def run(lt):
        try:
            for t in turns:
                lt.archive(t, session="race")
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert not errors
        race = handles[0].store.session_turns("race")
        assert len(race) == len(turns)
        assert sorted(turn for _, turn, _ in race) == list(range(len(turns)))
    finally:
        for h in handles:
            h.close()


@pytest.mark.parametrize("n", [1])
def test_reindex_and_stats_name_the_backend(db_location, n):
    with Lantern(db_location) as lt:
        lt.archive(PORT_TURN, session="s1")
        stats = lt.stats()
        assert stats["entries"] == n and stats["database_bytes"] > 0
        assert lt.reindex("minilm") == n
        assert "5433" in lt.recover("billing database port", budget=1500).text


def test_export_then_import_into_a_new_store_of_the_same_backend(db_location, tmp_path, request):
    out = tmp_path / "backup.jsonl"
    with Lantern(db_location) as lt:
        lt.archive(PORT_TURN, session="s1")
        lt.archive(messages(CHINESE[1:2]), session="zh")
        assert lt.export(out) == 2
    other = tmp_path / "other.db" if isinstance(db_location, Path) else request.getfixturevalue("pg_url")()
    with Lantern(other) as lt:
        result = lt.import_(out)
        assert (result.added, result.duplicates, lt.store.count()) == (2, 0, 2)
        assert "5433" in lt.recover("which port is the billing database on?", budget=1500).text
        assert "王丽" in lt.recover("报销系统负责人", budget=600).text


def test_reinforcement_and_feedback_are_stored(db_location):
    with Lantern(db_location) as lt:
        ids = lt.archive(PORT_TURN, session="s1").entry_ids
        rec = lt.recover("which port does the billing database listen on?", budget=1500)
        assert ids[0] in [e.id for e in rec.entries]
        after = lt.store.entries(ids)[ids[0]]
        assert after.access_count == 1 and after.confidence > 0.5
        assert lt.feedback(ids, useful=False) == 1
        assert lt.store.entries(ids)[ids[0]].success < 0.5
        assert lt.feedback(ids, useful=True, user="someone-else") == 0  # another user's entries are out of reach


def test_the_service_behind_mcp_and_rest_on_each_backend(db_location):
    from lantern.integrations.service import MemoryService

    service = MemoryService(db_location)
    try:
        assert service.archive(PORT_TURN, session="s1")["added"] == 1
        assert "5433" in service.recover("billing database port", budget=1500)["text"]
        assert service.search("billing database port", k=1)["hits"][0]["session"] == "s1"
        assert service.stats()["entries"] == 1
    finally:
        service.close()


def test_forget_says_the_text_is_erased_and_stats_count_one_user(db_location):
    with Lantern(db_location, user="alice") as alice, Lantern(db_location, user="bob") as bob:
        alice.archive(messages(FILLER[:2]), session="a")
        bob.archive(messages(FILLER[2:]), session="b")
        mine = alice.stats()
        assert (mine["user"], mine["entries"], mine["sessions"]) == ("alice", 2, 1) and "users" not in mine
        every = alice.stats(all_users=True)
        assert (every["entries"], every["users"], every["sessions"]) == (5, 2, 2) and every["bytes_per_turn"] > 0
        assert mine["database_bytes"] == every["database_bytes"] > 0  # the store's own figure, every user's rows
        # bytes per turn, in all and by table, are the file's too: over every user's turns, in any scope
        assert mine["bytes_per_turn"] == every["bytes_per_turn"] == round(every["database_bytes"] / 5)
        assert mine["bytes_per_turn_by_table"] == every["bytes_per_turn_by_table"]
        assert "entries" in mine["bytes_per_turn_by_table"] and "bytes_per_turn_by_table" not in alice.stats(
            by_table=False
        )
        forgotten = bob.forget(session="b")
        assert forgotten == 3 and forgotten.erased and forgotten.remaining_bytes == 0
        assert bob.stats()["entries"] == 0 and alice.stats()["entries"] == 2
        again = bob.forget(session="b")  # nothing left to delete, no erase pending: complete
        assert again == 0 and again.erased


def test_a_rewound_branch_is_moved_or_deleted(db_location):
    with Lantern(db_location) as lt:
        ids = lt.archive(messages(FILLER[:3]), session="s").entry_ids
        assert lt.abandon({ids[-1]: f"abandoned-{ids[-1]}"}, keep=True) == 1
        assert [t[0] for t in lt.store.session_turns(f"s/abandoned-{ids[-1]}")] == [ids[-1]]
        assert lt.store.session_meta("s")[0][0] == ids[0]
        assert lt.abandon({ids[-2]: f"abandoned-{ids[-2]}"}, keep=False) == 1
        assert lt.store.count() == len(ids) - 1
        assert [t[0] for t in lt.store.session_turns("s")] == ids[:-2]
