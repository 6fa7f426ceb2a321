"""Proxy benchmark: the per-request overhead of ``lantern serve --upstream`` (archive + compaction detection +
recovery, the upstream excluded) in a session holding 10k archived turns.

    .venv/bin/python benchmarks/bench_proxy.py [--turns 10000] [--requests 200] [--window 20] [--db PATH] [--excerpt]
                                               [--profile]

Setup, all real: a tiny OpenAI-compatible upstream (FastAPI under uvicorn on a loopback port, in a thread of this
process) that answers instantly; the real proxy, ``lantern --db DB serve --upstream URL`` as its own process on
another loopback port; a database whose session ``bench`` holds --turns turns archived through ``Lantern.archive``
in batches of 200 turns (real aider turns, cycled past the log's end, each user message prefixed ``(step i)`` so
every turn is distinct). ``--db PATH`` keeps that database (built once, marked by ``PATH.built``, then reused).

The client (httpx, one keep-alive connection per target) sends every request twice, interleaved: directly to the
upstream, then through the proxy. Overhead = proxy round trip − direct round trip of the same request. Two kinds:

- normal: the live context is a system prompt and the last --window archived turns, and grows by the previous
  reply and one new user message per request (a conversation going on after its old turns left the context);
- compaction: a system prompt, a new compaction summary message (Claude Code's opening sentence "This session is
  being continued from a previous conversation ...", then a line about the work and the new question's first 300
  characters), the last 3 turns and the question: detection fires and a recovery is injected on every request.

The proxy archives a request's new turns and its reply after sending the response (one transaction, one embedding
batch), so the archive shows in the overhead only as far as it delays the next request. Before measuring, 5
warm-up requests of each kind (model load, index load, the session's archive cache).
Target: overhead p50 <= 40 ms at 10k archived turns.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fastapi import FastAPI, Request  # noqa: E402  (module level: the endpoint's annotations resolve here)

from _common import begin, pct  # noqa: E402

TARGET_P50_MS, SESSION, BATCH = 40.0, "bench", 200
SYSTEM = {"role": "system", "content": "You are a careful coding assistant working in the user's repository."}


def turn_dicts(turns, n: int) -> list[list[dict]]:
    """``n`` distinct turns as lists of {role, content} dicts: the aider turns in order, cycled, each user message
    starting with ``(step i)`` so that no turn repeats or extends another (the store would merge those)."""
    out = []
    for i in range(n):
        turn = turns[i % len(turns)]
        msgs = [
            {"role": m.role, "content": m.text}
            for m in turn.messages
            if m.role in ("user", "assistant") and m.text.strip()
        ]
        if not msgs or msgs[0]["role"] != "user":
            msgs.insert(0, {"role": "user", "content": f"Continue with step {i}."})
        msgs[0] = {"role": "user", "content": f"(step {i}) {msgs[0]['content']}"}
        out.append(msgs)
    return out


def build_db(path: Path, convo: list[list[dict]], console) -> float:
    """Archive ``convo`` into session ``bench`` through ``Lantern.archive`` in batches; returns seconds."""
    from lantern.api import Lantern

    marker = path.with_name(path.name + ".built")
    if marker.exists() and marker.read_text() == str(len(convo)):
        return 0.0
    with Lantern(path) as lt:
        t0 = time.perf_counter()
        lt.archive([SYSTEM], session=SESSION)
        for start in range(0, len(convo), BATCH):
            lt.archive([m for t in convo[start : start + BATCH] for m in t], session=SESSION)
            if (start // BATCH) % 10 == 0:
                console.print(f"  archived {start + BATCH:,} / {len(convo):,} turns ({time.perf_counter() - t0:.0f} s)")
        have = lt.store.db.execute("SELECT count(*) FROM entries WHERE session = ?", (SESSION,)).fetchone()[0]
        console.print(f"  session {SESSION!r} holds {have:,} entries")
    marker.write_text(str(len(convo)))
    return time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_upstream():
    """The instant OpenAI-compatible upstream, in a thread. Returns (base URL, server)."""
    import uvicorn

    app = FastAPI()
    count = [0]

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        count[0] += 1
        last = body["messages"][-1].get("content") or ""
        return {
            "id": f"cmpl-{count[0]}",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"Done ({count[0]}): {last[:60]}"},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("upstream did not start")
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}/v1", server


def start_proxy(db: Path, upstream: str, home: Path):
    port = free_port()
    env = {**os.environ, "HOME": str(home)}
    env.pop("LANTERN_TOKEN", None)
    cmd = [sys.executable, "-m", "lantern.cli", "--db", str(db), "serve", "--port", str(port), "--upstream", upstream]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    import httpx

    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(base + "/memory/stats", timeout=5)
            return base, proc
        except httpx.TransportError:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode()) from None
            if time.monotonic() > deadline:
                raise RuntimeError("proxy did not start") from None
            time.sleep(0.2)


def profile_memory_work(db: Path, sent: dict[str, list[list[dict]]]) -> str:
    """cProfile of the proxy's memory work (the server runs it in threadpool threads, which a profiler of the
    server's main thread does not see): ``_Forwarder.prepare`` then ``_Forwarder.archive``, the very methods the
    server calls, in this process, on the same database, for the last 20 requests of each kind sent above."""
    import cProfile
    import io
    import pstats

    from lantern.integrations.forward import _Forwarder
    from lantern.integrations.service import MemoryService

    service = MemoryService(db)
    forwarder = _Forwarder(service, "http://127.0.0.1:9/v1", 10.0, False)
    out = ""
    for kind, requests in sent.items():
        forwarder.prepare(SESSION, requests[0])  # warm: model, index, the session's archive cache
        prof = cProfile.Profile()
        prof.enable()
        for i, messages in enumerate(requests[-20:]):
            forwarder.prepare(SESSION, messages)
            forwarder.archive(SESSION, messages, {"role": "assistant", "content": f"Profiled reply {kind} {i}."})
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(r"lantern", 25)
        out += f"cProfile of prepare + archive, 20 {kind} requests (cumulative, lantern functions):\n{buf.getvalue()}"
    service.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=10_000, help="archived turns in the session (default 10000)")
    ap.add_argument("--requests", type=int, default=200, help="measured requests per kind (default 200)")
    ap.add_argument("--window", type=int, default=20, help="archived turns in the normal requests' live context")
    ap.add_argument("--db", type=Path, help="keep the database here (built once, reused)")
    ap.add_argument("--profile", action="store_true", help="also cProfile the proxy's memory work (prepare + archive)")
    args, console, meter, label, turns, _ = begin(ap, width=130)
    import httpx
    from rich.table import Table

    n_new = 2 * (args.requests + 5)
    convo = turn_dicts(turns, args.turns + n_new)
    archived, fresh = convo[: args.turns], convo[args.turns :]  # fresh: user messages never archived
    console.print(
        f"data: {label}: {len(turns):,} turns, used as {args.turns:,} archived turns "
        f"(mean {sum(len(json.dumps(t)) for t in archived) / len(archived):,.0f} JSON bytes per turn)"
    )
    with tempfile.TemporaryDirectory(prefix="lantern-bench-proxy-") as tmp:
        db = args.db or Path(tmp) / "proxy.db"
        built = build_db(db, archived, console)
        if built:
            console.print(f"archived {args.turns:,} turns through Lantern.archive in {built:.0f} s")
        upstream, server = start_upstream()
        proxy, proc = start_proxy(db, upstream, Path(tmp) / "home")
        headers = {"X-Lantern-Session": SESSION}
        direct_client, proxy_client = httpx.Client(timeout=120), httpx.Client(timeout=120)

        def pair(messages: list[dict]) -> tuple[float, float, dict]:
            payload = {"model": "tiny", "messages": messages}
            t0 = time.perf_counter()
            r = direct_client.post(upstream + "/chat/completions", json=payload)
            t1 = time.perf_counter()
            r.raise_for_status()
            t2 = time.perf_counter()
            p = proxy_client.post(proxy + "/chat/completions", json=payload, headers=headers)
            t3 = time.perf_counter()
            p.raise_for_status()
            return t1 - t0, t3 - t2, p.json()["choices"][0]["message"]

        fresh_iter = iter(fresh)
        sent: dict[str, list[list[dict]]] = {"normal": [], "compaction": []}
        live = [SYSTEM] + [m for t in archived[-args.window :] for m in t]
        results = {}
        for kind in ("normal", "compaction"):
            direct, through, sizes = [], [], []
            for i in range(5 + args.requests):
                question = next(fresh_iter)[0]
                if kind == "normal":
                    messages = live + [question]
                else:
                    summary = {
                        "role": "user",
                        "content": (  # Claude Code's opening, then a summary of its own
                            f"This session is being continued from a previous conversation that ran out of context. "
                            f"The conversation is summarized below:\nThe user and the assistant edited the repository "
                            f"with aider; {question['content'][:300]}"
                        ),
                    }
                    messages = [SYSTEM, summary] + [m for t in archived[-3:] for m in t] + [question]
                d, p, reply = pair(messages)
                sent[kind].append(messages)
                if kind == "normal":
                    live = messages + [reply]
                if i >= 5:
                    direct.append(d)
                    through.append(p)
                    sizes.append(len(json.dumps(messages)))
            results[kind] = (direct, through, sizes)
            console.print(f"  {kind}: overhead p50 {pct([p - d for d, p in zip(direct, through)], 50) * 1000:.1f} ms")
        direct_client.close()
        proxy_client.close()
        proc.terminate()
        proc.communicate(timeout=30)
        server.should_exit = True

        table = Table(
            title=f"Proxy overhead per request, session of {args.turns:,} archived turns "
            f"({args.requests} requests per kind, after 5 warm-up)"
        )
        for col in (
            "request",
            "request KB (median)",
            "direct p50 ms",
            "direct p95 ms",
            "proxy p50 ms",
            "proxy p95 ms",
            "overhead p50 ms",
            "overhead p95 ms",
            "proxy ÷ direct (p50)",
            "target",
        ):
            table.add_column(col, justify="right")
        for kind, (direct, through, sizes) in results.items():
            over = [p - d for d, p in zip(direct, through)]
            o50 = pct(over, 50) * 1000
            table.add_row(
                kind,
                f"{pct(sizes, 50) / 1000:.0f}",
                f"{pct(direct, 50) * 1000:.1f}",
                f"{pct(direct, 95) * 1000:.1f}",
                f"{pct(through, 50) * 1000:.1f}",
                f"{pct(through, 95) * 1000:.1f}",
                f"{o50:.1f}",
                f"{pct(over, 95) * 1000:.1f}",
                f"{pct(through, 50) / pct(direct, 50):.1f}x",
                ("meets" if o50 <= TARGET_P50_MS else "MISSES") + f" <= {TARGET_P50_MS:.0f}",
            )
        console.print(table)
        console.print(
            "direct = the same request sent straight to the upstream; overhead = proxy − direct per request: "
            "detection, recovery when compacted, the HTTP hop, and the archive of the previous request's turns "
            "and reply when it is still running (the proxy archives after sending the response; requests "
            "here follow each other with only the direct request in between)"
        )
        if args.profile:
            console.print(profile_memory_work(db, sent), markup=False, highlight=False)
    console.print(meter.report())


if __name__ == "__main__":
    main()
