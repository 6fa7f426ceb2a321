"""Edges of today's read-path additions, on the real store and model: the neighbour signal stays inside the seed's
scope when users share a session name; dates the time signal reads in odd spellings; a prefetched query vector
is still taken after an in-process reindex."""

from __future__ import annotations

from lantern import Lantern
from lantern.recover.timeframe import query_windows


def _weekend(who: str) -> list[dict]:
    return [
        {"role": "user", "content": f"{who}: what did you do last weekend?"},
        {"role": "assistant", "content": "Tell me."},
        {"role": "user", "content": "camping by the lake"},
        {"role": "assistant", "content": "nice"},
    ]


def test_neighbour_signal_works_for_each_user_of_a_shared_session_name(tmp_path):
    memory = Lantern(tmp_path / "n.db", embedder="minilm")
    try:
        memory.archive(_weekend("bob"), session="default", user="bob")
        memory.archive(_weekend("alice"), session="default", user="alice")
        for user in ("alice", "bob"):
            hits = memory.search("what did you do last weekend", k=5, user=user)
            assert any(h.ranks.get("neighbour") for h in hits), (user, [h.ranks for h in hits])
            assert all(h.entry.user == user for h in hits)
    finally:
        memory.close()


def test_dates_in_odd_spellings():
    month_feb = query_windows("February 2023")
    assert query_windows("2023年2月30日") == month_feb  # an impossible day: its month, as in English
    assert query_windows("31 February, 2023") == month_feb
    assert query_windows("2023-07-07T10:00:00Z") == query_windows("7 July, 2023")  # ISO 8601 with a time
    assert query_windows("2023年13月") == []


def test_prefetch_is_taken_after_an_in_process_reindex(tmp_path):
    memory = Lantern(tmp_path / "r.db", embedder="minilm")
    try:
        memory.archive([{"role": "user", "content": "the staging database listens on port 5433"}], session="s")
        memory.search("port", k=1)
        memory.reindex("minilm")
        memory.queries.prefetch("which port?")
        memory.search("which port?", k=1)
        assert not memory.queries._prefetched  # taken, not left waiting
    finally:
        memory.close()
