"""Questions with no answer in the archive (issue #19, item 3): the relevance floor (recover/relevance.py).

Built with the real store and the default embedder (MiniLM for English): each store holds the shipped aider excerpt
(97 real coding turns) and some of tests/unanswerable.py's conversations; it answers the questions of the
conversations archived in it and none of the others'. Without the floor every question gets a full block of
unrelated turns; with it, an unanswerable question gets nothing (or, rarely, a block whose best turn happens to clear
the floor) while an answerable one gets the block it got without the floor.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from clirun import lantern as run
from lantern import Lantern
from lantern.config import Config
from lantern.recover.relevance import BM25_FLOOR, COSINE_FLOORS, MIN_ENTRIES, Relevance, cosine_model
from unanswerable import answerable, conversation, unanswerable

pytestmark = pytest.mark.real_models  # cosine floors calibrated on the real models

AIDER = Path(__file__).resolve().parents[1] / "src/lantern/data/demo/aider-chat-excerpt.md"
STORES = (("infra", "home"), ("lab",), ("infra",))


def store(built_db, tmp_path, archived) -> Lantern:
    def build(path):
        with Lantern(path) as memory:
            memory.ingest(AIDER, format="aider")
            for name in archived:
                memory.archive(conversation(name), session=name)

    return Lantern(built_db("floor-" + "+".join(archived), build, tmp_path / "m.db"))


@pytest.mark.parametrize("archived", STORES, ids="+".join)
def test_unanswerable_questions_get_nothing_and_answerable_ones_keep_their_block(built_db, tmp_path, archived):
    """The floor's point, measured per store: every answerable question gets the block it got without the floor
    (most of them hold the answer; the others lose to the aider turns in the ranking, floor or not); the
    unanswerable questions all got a block without the floor, and all but at most one per store get nothing with it
    (measured: 38 of the 40 questions of these three stores; the one left in two of them, "Which control did
    reviewer 2 ask for?", clears the floor by the aider turns' "reviewer"-like vocabulary at 1.002)."""
    with store(built_db, tmp_path, archived) as memory:
        asked = answerable(list(archived))
        found = 0
        for fact in asked:
            floored, unfloored = memory.explain(fact.question), memory.explain(fact.question, min_score=0)
            assert floored.text == unfloored.text, (fact.question, floored.relevance)
            found += fact.answer in floored.text
        assert found >= len(asked) // 2
        asked = unanswerable(list(archived))
        unfloored = [memory.explain(f.question, min_score=0) for f in asked]
        assert all(r.chars > 0 for r in unfloored)  # what recover did before the floor: always a block
        floored = [memory.explain(f.question) for f in asked]
        empty = [r for r in floored if r.chars == 0]
        assert len(asked) - len(empty) <= 1, [(r.query, r.relevance.to_json()) for r in floored if r.chars]
        assert all(r.text == "" and r.entries == [] for r in empty)


def test_a_store_too_small_for_term_statistics_has_no_floor(tmp_path):
    """Below ``MIN_ENTRIES`` entries the floor holds nothing back (no idf to speak of; little to inject)."""
    with Lantern(tmp_path / "m.db") as memory:
        memory.archive(conversation("infra"), session="infra")
        assert memory.stats()["entries"] < MIN_ENTRIES
        rec = memory.recover("When is Maria's thesis defence?")
        assert rec.chars > 0 and rec.relevance.score < rec.min_score and not rec.relevance.holds_back(rec.min_score)


def test_the_score_is_read_off_raw_evidence_not_the_fusion(built_db, tmp_path):
    """The score does not depend on how many rankings are fused (an RRF sum grows with their number): the same
    query gets the same ``Relevance`` with every signal, with two, and with other weights; it is the best cosine over
    its model's floor or the best BM25 over the query's ideal, whichever is larger."""
    with store(built_db, tmp_path, ("infra", "home")) as memory:
        query = "Which port did we put the billing database on?"
        full = memory.explain(query).relevance
        memory.config = replace(Config(), signals=("semantic", "fulltext"))
        two = memory.explain(query).relevance
        memory.config = replace(Config(), signal_weights={**Config().signal_weights, "fulltext": 3.0})
        weighted = memory.explain(query).relevance
    assert full == two == weighted
    assert full.model == "minilm" and full.cosine > 0 and full.bm25 > 0 and full.entries >= MIN_ENTRIES
    assert math.isclose(full.score, max(full.cosine / COSINE_FLOORS["minilm"], full.bm25 / BM25_FLOOR))


def test_the_bm25_evidence_is_the_share_of_the_querys_ideal(tmp_path):
    """``bm25`` is the best FTS5 BM25 over the query's ideal one (Σ idf of its searched terms, a row of average
    length holding each once): a row holding both rare terms of a query scores at least 1; a query whose second term
    the store never holds gets about half of that (the same row, half the ideal's idf)."""
    with Lantern(tmp_path / "m.db") as memory:
        for i in range(40):
            memory.archive([{"role": "user", "content": f"note {i} about the weekly planning meeting agenda"}], "s")
        memory.archive([{"role": "user", "content": "note 99 about the zanzibar quokka meeting agenda"}], "s")
        both = memory.explain("zanzibar quokka").relevance.bm25
        one = memory.explain("zanzibar platypus").relevance.bm25
    assert both >= 1.0 and 0.35 <= one / both <= 0.65, (both, one)


def test_floor_verdicts_explain_and_the_recovery_record_why(built_db, tmp_path):
    """Below the floor every candidate is ``cut:floor`` with the score and the floor in its reason; the Recovery
    carries both. ``min_score=0`` turns the floor off; a bad value is refused."""
    with store(built_db, tmp_path, ("infra",)) as memory:
        rec = memory.explain("What spice goes into grandma's bechamel?")
        assert rec.text == "" and rec.min_score == Config().min_score and rec.relevance.score < rec.min_score
        assert rec.candidates and all(c.verdict == "cut:floor" for c in rec.candidates)
        assert f"< min_score {rec.min_score:g}" in rec.candidates[0].reason
        assert memory.recover("What spice goes into grandma's bechamel?", min_score=0).chars > 0
        for bad in (-1, float("nan"), float("inf"), "1", True):
            with pytest.raises(ValueError, match="min_score"):
                memory.recover("x", min_score=bad)


def test_a_compaction_block_is_never_held_back(built_db, tmp_path):
    """A proactive recovery (a compaction's block restores the session it compacted: its query is the live
    context's tail, not a question) has no floor unless one is given."""
    with store(built_db, tmp_path, ("infra",)) as memory:
        tail = "Lucia has a piano recital on Saturday and we still need to buy her shoes."
        assert memory.recover(tail).chars == 0
        assert memory.recover(tail, proactive=True).chars > 0
        assert memory.recover(tail, proactive=True, min_score=1.0).chars == 0


def test_search_lists_everything_by_default_and_nothing_below_a_given_floor(built_db, tmp_path):
    with store(built_db, tmp_path, ("infra",)) as memory:
        query = "When is Maria's thesis defence?"
        assert memory.search(query)
        assert memory.search(query, min_score=1.0) == []
        assert memory.search("Which numpy version did we pin, and why?", min_score=1.0)


def test_cli_recover_says_the_floor_held_it_back_and_min_score_zero_recovers(built_db, tmp_path):
    store(built_db, tmp_path, ("infra",)).close()
    db = tmp_path / "m.db"
    held = run("recover", "When is Maria's thesis defence?", db=db)
    err = held.stderr.decode()
    assert held.returncode == 0 and held.stdout == b""
    assert "nothing recovered: no archived turn matches well enough (best relevance 0." in err, err
    assert "below the relevance floor 1); --min-score 0 recovers anyway" in err
    forced = run("recover", "When is Maria's thesis defence?", "--min-score", "0", db=db)
    assert forced.returncode == 0 and "Recovered by Lantern" in forced.stdout.decode()
    answered = run("recover", "Which port did we put the billing database on?", db=db)
    assert "5433" in answered.stdout.decode()
    assert run("search", "When is Maria's thesis defence?", "--min-score", "1", "--json", db=db).stdout.strip() == b"[]"
    none = run("search", "When is Maria's thesis defence?", "--min-score", "1", db=db)
    assert none.stdout == b"" and b"nothing found: no archived turn matches at least --min-score 1" in none.stderr


def test_cosine_model_follows_the_route_of_the_best_turn():
    assert cosine_model("routed-minilm-use-e5-v1", "user: which port?") == "minilm"
    assert cosine_model("routed-minilm-use-e5-v1", "user: 数据库的端口是多少") == "use"
    assert cosine_model("minilm-l6-v2-int8", "anything") == "minilm"
    assert Relevance().score == 0.0
