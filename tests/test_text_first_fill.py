"""The fill of text-first vectors (archive/fill.py) against the writes that race it, on the real SQLite store: a
vector is stored only while the entry still holds the text it was computed from (a turn that grew meanwhile keeps no
vector of its old text), the newest entries are filled first, an entry with no vector is never ranked by a semantic
signal, and ``reindex --fill`` counts each entry once."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from budget import examples
from lantern import Config, Lantern
from lantern.errors import UnsupportedBackendError

REPLIES = [
    ("Start postgres for billing on port 5433.", "Started: docker run -p 5433:5432 postgres:16."),
    ("Put the pool size in config/db.yaml.", "Done: the pool size is 20 now, in config/db.yaml."),
    ("What does flaky_cron_guard do?", "flaky_cron_guard skips a cron run while the last one still holds the lock."),
    ("Rotate the staging TLS certificate.", "Rotated: the new certificate expires on 2027-03-01."),
]


def _messages(turns: int, last_replied: bool) -> list[dict]:
    """The first ``turns`` turns of REPLIES as messages, the last one's reply only when ``last_replied``."""
    out: list[dict] = []
    for i, (user, reply) in enumerate(REPLIES[:turns]):
        out.append({"role": "user", "content": user})
        if i < turns - 1 or last_replied:
            out.append({"role": "assistant", "content": reply})
    return out


def _stored_vectors_match_their_summaries(lt: Lantern, ids: list[int]) -> None:
    """Every entry of ``ids`` either has no vector yet or has the one its current summary gives (cosine ~1)."""
    unembedded = {i for i, _ in lt.store.unembedded()}
    summaries = lt.store.entries(ids, text=False, tags=False)
    held = [i for i in ids if i not in unembedded]
    for row, vec in zip(lt.store.rows_by_id(held), lt.store.decode_vectors([r[8] for r in lt.store.rows_by_id(held)])):
        expected = lt.embedder.embed([summaries[row[0]].summary])[0]
        assert float(vec @ expected) > 0.99, (row[0], summaries[row[0]].summary)


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(1, len(REPLIES)), grown_text_first=st.booleans())
def test_a_fill_keeps_no_vector_of_a_text_the_entry_no_longer_holds(tmp_path, turns, grown_text_first):
    """A fill embeds the text-first turns; while it embeds, another handle archives the session again with its last
    turn grown (its reply arrived), text-first or with vectors, which replaces that entry in place. The fill then
    stores no vector of the old text: every entry holds its own summary's vector or none (and is filled next time)."""
    session = uuid.uuid4().hex
    db = tmp_path / "m.db"  # the examples share it: each its own session
    with Lantern(db) as lt, Lantern(db) as other:
        lt.archive([{"role": "user", "content": "warm"}], session="warm")  # the store records its embedder
        ids = lt.archive(_messages(turns, last_replied=False), session=session, text_first=True).entry_ids
        before = lt.store.entries(ids[-1:], text=False, tags=False)[ids[-1]].summary
        embedder = lt.embedder
        embed = embedder.embed
        grown: list = []

        def embed_racing(texts):
            if not grown:  # the first batch: the other handle's write comes while it is embedded
                grown.append(other.archive(_messages(turns, True), session=session, text_first=grown_text_first))
            return embed(texts)

        embedder.embed = embed_racing
        try:
            lt.fill_unembedded()
        finally:
            del embedder.embed
        assert grown and grown[0].entry_ids[-1] == ids[-1]  # the turn grew in place
        assert lt.store.entries(ids[-1:], text=False, tags=False)[ids[-1]].summary != before
        _stored_vectors_match_their_summaries(lt, ids)
        lt.fill_unembedded()  # the next fill gives the grown turn its own vector
        assert not {i for i, _ in lt.store.unembedded()} & set(ids)
        _stored_vectors_match_their_summaries(lt, ids)


WORDS = ["postgres", "billing", "port", "pool", "config", "cron", "guard", "lock", "certificate", "staging", "retry"]


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(st.tuples(st.integers(1, 4), st.booleans()), min_size=1, max_size=5),  # (turns, text-first)
    limit=st.integers(0, 8),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
)
def test_the_newest_are_filled_first_and_an_entry_with_no_vector_is_never_ranked_by_meaning(
    tmp_path_factory, batches, limit, query
):
    """Sessions archived one after another, each text-first or with vectors; a fill of ``limit`` entries gives
    their vector to the newest text-first ones (after a compaction, the turns a prompt refers to), and a search
    ranks by cosine (the semantic signals, the local and time windows' rankings) only the entries that have a vector
    (the rest are found by full text until filled)."""
    db = tmp_path_factory.mktemp("newest") / "m.db"
    with Lantern(db, config=Config(fill_on_recover=0)) as lt:
        lt.archive([{"role": "user", "content": "warm"}], session="warm")
        for n, (turns, text_first) in enumerate(batches):
            messages = [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"{WORDS[(n + i) % len(WORDS)]} step {n}.{i}",
                }
                for i in range(2 * turns)
            ]
            lt.archive(messages, session=f"s{n}", text_first=text_first)
        waiting = sorted((i for i, _ in lt.store.unembedded()), reverse=True)
        assert lt.fill_unembedded(limit) == min(limit, len(waiting))
        assert sorted((i for i, _ in lt.store.unembedded()), reverse=True) == waiting[limit:]
        without = set(waiting[limit:])
        hits = lt.search(" ".join(query), k=100)
        assert hits
        for hit in hits:
            by_meaning = [name for name in hit.ranks if name.startswith("semantic") or name in ("local", "time")]
            assert hit.entry.id not in without or not by_meaning, (hit.entry.id, hit.ranks)


def test_postgres_refuses_a_text_first_archive_and_writes_nothing(pg_url):
    """PostgreSQL stores no row without its vector (embeddings.vector NOT NULL, the index joins it:
    ``Dialect.text_first`` False): a text-first archive is refused with UnsupportedBackendError, not a driver error,
    and nothing is written (hooks do not run on PostgreSQL: docs/postgres.md)."""
    url = pg_url()
    with Lantern(url) as lt:
        lt.archive(_messages(1, True), session="s")
        with pytest.raises(UnsupportedBackendError, match="text-first"):
            lt.archive(_messages(3, True), session="s", text_first=True)
        assert lt.stats()["entries"] == 1 and lt.store.unembedded() == []
