"""The LLM half's costs against the local model (SmolLM2-135M-Instruct through llama-cpp-python, 127.0.0.1).

1. Rerank: ``Lantern.recover`` with and without ``rerank=True`` on the same store and queries, alternating, in
   one process: the added latency per recovery (p50/p95), the prompt size, and the tokens in/out of the one call.
2. The memory agent loop (memory/agent.py) per turn — draft, trigger check, recovery, regenerate — against a plain
   generation of the same question (the LLM alone, no memory), in the same process: the ratio of their p50s.

The store: the aider turns (``../shared/data`` or the shipped excerpt), archived once. Queries: real user
messages of later turns; the agent's questions alternate a back-reference ("as I said earlier, ...") with a plain
question, so both paths run. Figures are for this 135M model on this machine: a user's endpoint has other costs.

    .venv/bin/python benchmarks/bench_llm.py [--queries 20] [--agent-turns 10] [--excerpt]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import begin, pct, user_text  # noqa: E402
from lantern.api import Lantern  # noqa: E402
from lantern.config import Config  # noqa: E402
from lantern.llm import LLMClient  # noqa: E402
from lantern.memory.agent import MemoryAgent  # noqa: E402
from llm_server import LocalLLM, missing  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=20, help="recoveries per variant (default 20)")
    ap.add_argument("--agent-turns", type=int, default=10, help="agent turns and plain generations (default 10)")
    ap.add_argument("--archive", type=int, default=300, help="aider turns archived (default 300)")
    args, console, meter, label, turns, _ = begin(ap, width=120)
    why = missing()
    if why:
        sys.exit(f"bench_llm: {why}")
    from rich.table import Table

    archived, later = turns[: args.archive], turns[args.archive :]
    questions = [q for q in (user_text(t).strip() for t in later or turns) if 20 <= len(q) <= 300][: args.queries]
    console.print(f"data: {label}: {len(archived)} turns archived; {len(questions)} queries")
    with tempfile.TemporaryDirectory() as tmp:
        server = LocalLLM(Path(tmp) / "llm.log")
        try:
            settings = server.settings
            with Lantern(Path(tmp) / "b.db", config=Config(reinforce=False)) as lt:
                for start in range(0, len(archived), 64):
                    lt.archive([m for t in archived[start : start + 64] for m in t.messages], session="bench")
                client = LLMClient(settings)
                lt.recover(questions[0], min_score=0)  # warm-up: models, index
                client.chat([{"role": "user", "content": "hi"}], max_tokens=4)
                plain_ms, rerank_ms, tokens_in, tokens_out, prompt_chars, fell_back = [], [], [], [], [], 0
                for q in questions:
                    t0 = time.perf_counter()
                    lt.recover(q, min_score=0)
                    plain_ms.append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    rec = lt.recover(q, rerank=True, llm=client, min_score=0)
                    rerank_ms.append((time.perf_counter() - t0) * 1000)
                    tokens_in.append(rec.rerank.usage.tokens_in)
                    tokens_out.append(rec.rerank.usage.tokens_out)
                    prompt_chars.append(rec.rerank.prompt_chars)
                    fell_back += not rec.reranked
                added = np.asarray(rerank_ms) - np.asarray(plain_ms)
                t1 = Table(title=f"Rerank on {len(questions)} recoveries (budget 6,000, top {lt.config.rerank_top_n})")
                for col in ("measurement", "p50", "p95", "note"):
                    t1.add_column(col, justify="left" if col in ("measurement", "note") else "right")
                t1.add_row(
                    "recover, no rerank (ms)", f"{pct(plain_ms, 50):.1f}", f"{pct(plain_ms, 95):.1f}", "baseline"
                )
                t1.add_row(
                    "recover + rerank (ms)",
                    f"{pct(rerank_ms, 50):.0f}",
                    f"{pct(rerank_ms, 95):.0f}",
                    f"{pct(rerank_ms, 50) / pct(plain_ms, 50):.0f}x the baseline p50",
                )
                t1.add_row(
                    "added by the rerank call (ms, paired)", f"{pct(added, 50):.0f}", f"{pct(added, 95):.0f}", ""
                )
                t1.add_row(
                    "prompt characters",
                    f"{pct(prompt_chars, 50):.0f}",
                    f"{pct(prompt_chars, 95):.0f}",
                    f"bound {lt.config.rerank_prompt_chars:,}",
                )
                t1.add_row("tokens in", f"{pct(tokens_in, 50):.0f}", f"{pct(tokens_in, 95):.0f}", "1 call each")
                t1.add_row(
                    "tokens out",
                    f"{pct(tokens_out, 50):.0f}",
                    f"{pct(tokens_out, 95):.0f}",
                    f"{fell_back} of {len(questions)} fell back to the fused order",
                )
                console.print(t1)

                agent = MemoryAgent(lt, "agent", client, max_tokens=32)
                asked = [
                    ("As I said earlier, " + q[0].lower() + q[1:]) if i % 2 == 0 else q
                    for i, q in enumerate(questions[: args.agent_turns])
                ]
                plain_gen, turn_ms, generations, recovered = [], [], [], 0
                for q in asked:
                    t0 = time.perf_counter()
                    client.chat([{"role": "user", "content": q}], max_tokens=32)
                    plain_gen.append((time.perf_counter() - t0) * 1000)
                    turn = agent.ask(q)
                    turn_ms.append(turn.ms)
                    generations.append(turn.generations)
                    recovered += turn.recovered
                t2 = Table(title=f"Memory agent: {len(asked)} turns (half with a back-reference), max 32 tokens")
                for col in ("measurement", "p50", "p95", "note"):
                    t2.add_column(col, justify="left" if col in ("measurement", "note") else "right")
                t2.add_row(
                    "plain generation, the question alone (ms)",
                    f"{pct(plain_gen, 50):.0f}",
                    f"{pct(plain_gen, 95):.0f}",
                    "baseline",
                )
                t2.add_row(
                    "agent turn: draft, trigger, recovery, regenerate, archive (ms)",
                    f"{pct(turn_ms, 50):.0f}",
                    f"{pct(turn_ms, 95):.0f}",
                    f"{pct(turn_ms, 50) / pct(plain_gen, 50):.1f}x the baseline p50",
                )
                t2.add_row(
                    "generations per turn",
                    f"{pct(generations, 50):.0f}",
                    f"{max(generations)}",
                    f"{recovered} of {len(asked)} turns recovered",
                )
                console.print(t2)
                client.close()
        finally:
            server.stop()
    console.print(meter.report())


if __name__ == "__main__":
    main()
