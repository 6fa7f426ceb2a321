"""``lantern eval realcompact``: recovery after real Claude Code compactions (docs/evaluation.md#realcompact).

The protocol of the dataset's SOURCE.md (``../shared/data/realcompact``): every turn before a compaction is archived;
the live context after it is the runtime's own summary plus the last ``LIVE`` turns; a *fact* is a token the next 10
turns used that was in the turns before, outside the live ones, and that the summary lost (the dataset labels them;
this module never derives its own). A fact is recovered when its token is in the injected block. Per budget: the
mean over events of the share of facts recovered (macro, with a bootstrap CI clustered by session) and the pooled
share; per repository; per fact type; characters per recovered fact; latency.

Systems, all on the same store and live context:

- ``lantern``: ``Lantern.recover_compaction(summary, live=..., session=...)``, what every integration calls;
- ``query-by-summary``: the previous release's compaction recovery, ``recover(last user message + summary)``
  excluding the live turns, no floor (read through ``explain``: no reinforcement between events);
- ``bm25``: the same query, full-text signal only, no MMR;
- ``newest-turns``: the newest archived turns before the live ones, whole, newest first, while they fit;
- ``token-list``: the lost specifics (recover/loss.py) as a bare list ranked by frequency × recency, no model.

Archiving: each session's turns are archived in one ``archive`` call per compaction (the turns since the previous
one), as the hooks' incremental ingest does; the store is a temporary SQLite file per session.

``fit``: refit recover/loss.py's weights (L2 logistic regression, Newton's method, on standardized features) on the
events' lost items, labelled by the dataset's facts (an item is positive when it is a fact's token, or a command
holding one), and report leave-one-repository-out figures with the refit weights.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from lantern.api import Lantern
from lantern.compaction import summary_query_text
from lantern.config import Config
from lantern.errors import LanternError
from lantern.eval.stats import bootstrap_ci_clustered, wilcoxon_p
from lantern.recover import loss as loss_model
from lantern.recover.loss import FEATURES, Loss, find_loss
from lantern.recover.loss_pack import pack_loss

__all__ = ["BUDGETS", "LIVE", "SYSTEMS", "Event", "load_events", "run", "render", "fit_weights"]

BUDGETS = (2000, 4000, 6000)
LIVE = 4  # turns of ``before`` that stay live after the compaction (SOURCE.md)
SYSTEMS = ("lantern", "query-by-summary", "bm25", "newest-turns", "token-list")
PREVIOUS = "query-by-summary"  # the previous release's compaction recovery: the paired comparison's baseline
TOKEN_LIST_HALF = 50.0  # blocks: the token list's recency half-life (ours)
L2 = 1.0  # the fit's ridge penalty on standardized weights (ours)


@dataclass
class Event:
    """One real compaction: its session (``session``, ``repo``), its index ``k`` in the session, the ``summary``,
    ``before`` (every turn before it: dicts ``{role, text, tool}``) and the labelled ``facts`` / ``kept``."""

    session: str
    repo: str
    k: int
    summary: str
    before: list[dict[str, Any]]
    facts: list[dict[str, Any]]
    kept: list[dict[str, Any]]


@dataclass
class Result:
    """Per event and system: the facts recovered at each budget, the block's characters and the latency (ms)."""

    event: Event
    recovered: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    chars: dict[tuple[str, int], int] = field(default_factory=dict)
    ms: dict[tuple[str, int], float] = field(default_factory=dict)
    loss: Loss | None = None


def load_events(data: Path) -> tuple[list[list[Event]], list[tuple[str, str]]]:
    """The dataset's sessions, each a list of events in order, and the files skipped with their reason
    (``(name, reason)``: unreadable JSON, a missing field). Raises LanternError when ``data`` has no ``sessions``
    folder."""
    folder = Path(data) / "sessions"
    if not folder.is_dir():
        raise LanternError(f"{data}: no sessions/ folder (the realcompact dataset: ../shared/data/realcompact)")
    sessions, skipped = [], []
    for path in sorted(folder.glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            events = [
                Event(
                    doc["id"],
                    doc["source"]["repo"],
                    int(e["k"]),
                    e["summary"] or "",
                    e["before"],
                    e.get("facts") or [],
                    e.get("kept") or [],
                )
                for e in doc["events"]
            ]
        except (OSError, ValueError, KeyError, TypeError) as err:
            skipped.append((path.name, f"{type(err).__name__}: {err}"))
            continue
        sessions.append(events)
    return sessions, skipped


def messages(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dataset's turns as OpenAI chat messages: a tool call an assistant message with one ``tool_calls`` item
    (its JSON input as the arguments), a tool output a ``tool`` message."""
    out: list[dict[str, Any]] = []
    for i, t in enumerate(turns):
        text = t.get("text") or ""
        if t.get("role") == "tool":
            out.append({"role": "tool", "content": text, "tool_call_id": f"c{i}"})
        elif t.get("tool"):
            call = {"id": f"c{i}", "type": "function", "function": {"name": t["tool"], "arguments": text}}
            out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            out.append({"role": t.get("role") or "user", "content": text})
    return out


def _hit(block: str, facts: Sequence[dict[str, Any]]) -> list[str]:
    return [f["token"] for f in facts if f["token"] in block]


def _newest(turns: Sequence[dict[str, Any]], budget: int) -> str:
    out, used = [], 0
    for t in reversed(turns):
        text = t.get("text") or ""
        if used + len(text) + 1 > budget:
            continue
        out.append(text)
        used += len(text) + 1
    return "\n".join(out)


def _token_list(loss: Loss, budget: int) -> str:
    n = max(1, len(loss.texts))
    ranked = sorted(loss.items, key=lambda it: -len(it.seen) * math.exp(-(n - 1 - it.last.block) / TOKEN_LIST_HALF))
    out, used = [], 0
    for it in ranked:
        if used + len(it.value) + 1 > budget:
            continue
        out.append(it.value)
        used += len(it.value) + 1
    return "\n".join(out)


def _last_user(turns: Sequence[dict[str, Any]]) -> str:
    return next((t["text"] for t in reversed(turns) if t.get("role") == "user" and (t.get("text") or "").strip()), "")


def run(
    data: Path,
    *,
    budgets: Sequence[int] = BUDGETS,
    systems: Sequence[str] = SYSTEMS,
    limit: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> tuple[list[Result], list[tuple[str, str]]]:
    """Run the protocol (module docstring) over the dataset at ``data``: one ``Result`` per event with facts (each
    with lantern's ``Loss``, for ``fit``), in the dataset's order, and the files skipped. ``limit``: at most that
    many sessions. ``workers``: processes the sessions run in (default: the usable CPUs, at most 4; 1: this
    process); the figures are the same either way, each session having its own store."""
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise LanternError(f"unknown system(s) {', '.join(unknown)}: choose from {', '.join(SYSTEMS)}")
    sessions, skipped = load_events(data)
    sessions = sessions[:limit] if limit else sessions
    total = sum(len(s) for s in sessions)
    workers = workers or min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    results: list[Result] = []
    done = 0
    with tempfile.TemporaryDirectory(prefix="lantern-realcompact-") as tmp:
        jobs = [(Path(tmp) / f"{k}.db", events, tuple(budgets), tuple(systems)) for k, events in enumerate(sessions)]
        if workers <= 1 or len(jobs) <= 1:
            outputs: Any = map(_session_job, jobs)
            pool = None
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
            outputs = pool.map(_session_job, jobs)
        try:
            for (_, events, _, _), out in zip(jobs, outputs):
                results += out
                done += len(events)
                if progress:
                    progress(done, total)
        finally:
            if pool is not None:
                pool.shutdown(cancel_futures=True)
    return results, skipped


def _session_job(job: tuple[Path, list[Event], tuple[int, ...], tuple[str, ...]]) -> list[Result]:
    path, events, budgets, systems = job
    return _session(path, events, budgets, systems, replace(Config(), signals=("fulltext",), use_mmr=False))


def _session(path: Path, events: list[Event], budgets, systems, bm25_config: Config) -> list[Result]:
    out = []
    archived: list[dict[str, Any]] = []
    with Lantern(path) as lt, Lantern(path, config=bm25_config) as bm:
        session = events[0].session
        for ev in events:
            if ev.before[: len(archived)] != archived:  # not a continuation: archive the whole history again
                session, archived = f"{ev.session}#{ev.k}", []
            new = ev.before[len(archived) :]
            if new:
                lt.archive(messages(new), session=session)
            archived = list(ev.before)
            if ev.facts:
                out.append(_event(lt, bm, session, ev, budgets, systems))
    return out


def _event(lt: Lantern, bm: Lantern, session: str, ev: Event, budgets, systems) -> Result:
    live = messages(ev.before[-LIVE:])
    res = Result(ev)
    query = "\n".join(p for p in (_last_user(ev.before[-LIVE:]).strip(), summary_query_text(ev.summary)) if p)
    token_loss = None
    for b in budgets:
        for name in systems:
            start = time.perf_counter()
            if name == "lantern":
                rec = lt.recover_compaction(ev.summary, live=live, session=session, budget=b)
                block = rec.text
                if res.loss is None:
                    res.loss = rec.loss
            elif name in ("query-by-summary", "bm25"):
                handle = lt if name == "query-by-summary" else bm
                block = handle.explain(query, session=session, budget=b, exclude=live, proactive=True, min_score=0).text
            elif name == "newest-turns":
                block = _newest(ev.before[:-LIVE], b)
            else:
                token_loss = token_loss or res.loss or _loss_of(lt, session, ev, live)  # lantern's, when it ran
                block = _token_list(token_loss, b)
            res.ms[name, b] = (time.perf_counter() - start) * 1000
            res.recovered[name, b] = _hit(block, ev.facts)
            res.chars[name, b] = len(block)
    return res


def _loss_of(lt: Lantern, session: str, ev: Event, live: list[dict[str, Any]]) -> Loss:
    from lantern.scope import resolve

    turns = lt.store.session_turns(session, resolve(lt.scope, None, None, None))
    tags = lt.store.tags(t[0] for t in turns)
    return find_loss(turns, ev.summary, lt.live_text(live), _last_user(ev.before[-LIVE:]), tags=tags)


# ------------------------------------------------------------------------------------------------ the report
def _macro(results: Sequence[Result], name: str, b: int) -> list[float]:
    return [len(r.recovered[name, b]) / len(r.event.facts) for r in results]


def summary_table(results: Sequence[Result], budgets: Sequence[int], systems: Sequence[str]) -> dict[str, Any]:
    """The figures of the report as plain values: per budget and system, macro and pooled share, macro CI,
    mean characters, characters per recovered fact, latency p50/p95; the paired test against ``PREVIOUS``."""
    groups = [r.event.session for r in results]
    facts = sum(len(r.event.facts) for r in results)
    out: dict[str, Any] = {"events": len(results), "facts": facts, "budgets": {}}
    for b in budgets:
        rows = {}
        for name in systems:
            shares = _macro(results, name, b)
            got = sum(len(r.recovered[name, b]) for r in results)
            chars = [r.chars[name, b] for r in results]
            ms = [r.ms[name, b] for r in results]
            mean, low, high = bootstrap_ci_clustered(shares, [0.0] * len(shares), groups)
            rows[name] = {
                "macro": mean,
                "macro_ci": [low, high],
                "pooled": 100.0 * got / max(1, facts),
                "chars": float(np.mean(chars)) if chars else 0.0,
                "chars_per_fact": float(sum(chars) / got) if got else None,
                "p50_ms": float(np.percentile(ms, 50)) if ms else 0.0,
                "p95_ms": float(np.percentile(ms, 95)) if ms else 0.0,
            }
        paired = {}
        if "lantern" in systems:
            for other in systems:
                if other == "lantern":
                    continue
                a, c = _macro(results, "lantern", b), _macro(results, other, b)
                diff, low, high = bootstrap_ci_clustered(a, c, groups)
                paired[other] = {"diff_pp": diff, "ci": [low, high], "wilcoxon_p": wilcoxon_p(a, c)}
        out["budgets"][b] = {"systems": rows, "lantern_vs": paired}
    return out


def by_group(results: Sequence[Result], b: int, name: str, key: Callable[[Result], str]) -> dict[str, list[float]]:
    """Macro share of ``name`` at budget ``b`` per group of events (``key``)."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in results:
        out[key(r)].append(len(r.recovered[name, b]) / len(r.event.facts))
    return dict(out)


def by_type(results: Sequence[Result], b: int, name: str) -> dict[str, tuple[int, int]]:
    """Pooled (recovered, facts) of ``name`` at budget ``b`` per fact type."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in results:
        got = set(r.recovered[name, b])
        for f in r.event.facts:
            out[f["type"]][1] += 1
            out[f["type"]][0] += f["token"] in got
    return {k: (v[0], v[1]) for k, v in sorted(out.items(), key=lambda kv: -kv[1][1])}


def render(results: Sequence[Result], budgets: Sequence[int], systems: Sequence[str], meta: dict[str, Any]) -> str:
    """The report as Markdown: the figures per budget, the paired test, per repository, per fact type."""
    table = summary_table(results, budgets, systems)
    kept = [len(r.event.kept) / max(1, len(r.event.kept) + len(r.event.facts)) for r in results]
    lines = [
        "# Recovery after real Claude Code compactions (realcompact dev set)",
        "",
        f"{table['events']} compactions with at least one lost fact, {table['facts']} facts; "
        f"{meta.get('seconds', 0):.0f} s on this machine ({meta.get('when', '')}). The summaries themselves kept "
        f"{100 * float(np.mean(kept)):.1f}% of the look-ahead tokens (macro): the facts are the rest.",
        "",
        "Macro: mean over compactions of the share of its facts in the block, with a 95% bootstrap CI clustered by "
        "session. Pooled: all facts together. Characters: the block's mean length. Latency: the recovery call.",
        "",
    ]
    for b in budgets:
        lines += [
            f"## Budget {b:,} characters",
            "",
            "| system | macro % (95% CI) | pooled % | chars | chars per recovered fact | p50 ms | p95 ms |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, row in table["budgets"][b]["systems"].items():
            cpf = f"{row['chars_per_fact']:.0f}" if row["chars_per_fact"] else "—"
            lines.append(
                f"| {name} | {row['macro']:.1f} ({row['macro_ci'][0]:.1f}–{row['macro_ci'][1]:.1f}) | "
                f"{row['pooled']:.1f} | {row['chars']:.0f} | {cpf} | {row['p50_ms']:.1f} | {row['p95_ms']:.1f} |"
            )
        paired = table["budgets"][b]["lantern_vs"]
        if paired:
            lines += ["", "| lantern minus | pp (95% CI, clustered) | Wilcoxon p |", "|---|---|---|"]
            for other, p in paired.items():
                lines.append(
                    f"| {other} | {p['diff_pp']:+.1f} ({p['ci'][0]:+.1f} to {p['ci'][1]:+.1f}) | "
                    f"{p['wilcoxon_p']:.2g} |"
                )
        lines.append("")
    mid = budgets[len(budgets) // 2]
    if "lantern" in systems:
        lines += [
            f"## Per repository, macro % at {mid:,} characters",
            "",
            "| repository | events | " + " | ".join(systems) + " |",
            "|---|---|" + "---|" * len(systems),
        ]
        groups = {name: by_group(results, mid, name, lambda r: r.event.repo) for name in systems}
        for repo in sorted(groups["lantern"]):
            cells = [f"{100 * np.mean(groups[n][repo]):.1f}" for n in systems]
            lines.append(f"| {repo} | {len(groups['lantern'][repo])} | " + " | ".join(cells) + " |")
        lines += [
            "",
            f"## Per fact type, pooled recovered / facts at {mid:,} characters",
            "",
            "| type | " + " | ".join(systems) + " |",
            "|---|" + "---|" * len(systems),
        ]
        types = {name: by_type(results, mid, name) for name in systems}
        for t, (_, n) in types["lantern"].items():
            lines.append(f"| {t} | " + " | ".join(f"{types[s][t][0]}/{n}" for s in systems) + " |")
        lines.append("")
        lines += _failures(results, mid)
    return "\n".join(lines)


def failures(results: Sequence[Result], b: int) -> dict[str, Any]:
    """Why ``lantern`` missed each fact it missed at budget ``b``: ``not_a_candidate`` (no lost item holds its
    token: the tagger did not see it as a specific, or the summary or live context held a form of it) or
    ``ranked_out`` (an item holds it, ranked too low for the budget; ``ranks``: its best item's rank)."""
    out: dict[str, Any] = {"recovered": 0, "not_a_candidate": 0, "ranked_out": 0, "ranks": []}
    for r in results:
        got = set(r.recovered["lantern", b])
        items = r.loss.items if r.loss is not None else []
        for f in r.event.facts:
            if f["token"] in got:
                out["recovered"] += 1
                continue
            rank = next((k for k, it in enumerate(items, 1) if f["token"] in it.value), None)
            if rank is None:
                out["not_a_candidate"] += 1
            else:
                out["ranked_out"] += 1
                out["ranks"].append(rank)
    return out


def _failures(results: Sequence[Result], b: int) -> list[str]:
    if not any(("lantern", b) in r.recovered for r in results):
        return []
    f = failures(results, b)
    ranks = f["ranks"]
    median = f"{int(np.median(ranks))}" if ranks else "—"
    return [
        f"## Where lantern's misses at {b:,} characters come from",
        "",
        f"- recovered: {f['recovered']}",
        f"- not a candidate (no lost item holds the token): {f['not_a_candidate']}",
        f"- ranked out (a lost item holds it, below the budget's cut; median rank {median}): {f['ranked_out']}",
        "",
    ]


# ------------------------------------------------------------------------------------------------ the fit
def _labels(loss: Loss, facts: Sequence[dict[str, Any]]) -> np.ndarray:
    exact = {f["token"] for f in facts}
    commands = [f["token"] for f in facts if f.get("type") == "command"]
    return np.array(
        [float(it.value in exact or any(c in it.value for c in commands)) for it in loss.items], dtype=float
    )


def fit_weights(results: Sequence[Result], l2: float = L2) -> tuple[float, dict[str, float]]:
    """Refit recover/loss.py's weights on ``results`` (each with its ``loss``, as ``run`` gives them):
    (intercept, weights by feature), on the raw feature scale. Positives are weighted up to balance the classes."""
    xs = [np.array([it.features for it in r.loss.items], dtype=float) for r in results if r.loss and r.loss.items]
    ys = [_labels(r.loss, r.event.facts) for r in results if r.loss and r.loss.items]
    x, y = np.vstack(xs), np.concatenate(ys)
    mu, sd = x.mean(0), x.std(0)
    sd[sd == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mu) / sd])
    w = np.zeros(z.shape[1])
    sw = np.where(y == 1, (len(y) - y.sum()) / max(1.0, y.sum()), 1.0)
    penalty = l2 * np.eye(len(w))
    penalty[0, 0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -50, 50)))
        grad = z.T @ (sw * (p - y)) + penalty @ w
        hess = (z * (sw * p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    raw = w[1:] / sd
    return float(w[0] - (raw * mu).sum()), {name: float(v) for name, v in zip(FEATURES, raw)}


def rescored(results: Sequence[Result], intercept: float, weights: dict[str, float], budget: int) -> list[float]:
    """The macro shares at ``budget`` when each event's lost items are scored with ``weights`` and packed again."""
    shares = []
    for r in results:
        if r.loss is None:
            continue
        for it, w in zip(r.loss.items, loss_model.scores([it.features for it in r.loss.items], weights, intercept)):
            it.weight = w
        r.loss.items.sort(key=lambda it: (-it.weight, -it.last.block, it.value))
        shares.append(len(_hit(pack_loss(r.loss, budget).text, r.event.facts)) / len(r.event.facts))
    return shares


def cross_validate(results: Sequence[Result], budgets: Sequence[int] = BUDGETS) -> dict[str, Any]:
    """Leave-one-repository-out: per held-out repository, weights fit on the others, its events' macro share at
    each budget; and the pooled macro over all held-out events."""
    repos = sorted({r.event.repo for r in results})
    held: dict[int, list[float]] = {b: [] for b in budgets}
    per_repo: dict[str, dict[int, float]] = {}
    for repo in repos:
        train = [r for r in results if r.event.repo != repo]
        test = [r for r in results if r.event.repo == repo]
        if not train or not test:
            continue
        intercept, weights = fit_weights(train)
        per_repo[repo] = {}
        for b in budgets:
            shares = rescored(test, intercept, weights, b)
            held[b] += shares
            per_repo[repo][b] = 100 * float(np.mean(shares))
    return {"macro": {b: 100 * float(np.mean(v)) for b, v in held.items() if v}, "per_repo": per_repo}


def main(
    data: Path,
    out: Path,
    *,
    limit: int | None = None,
    systems: Sequence[str] | None = None,
    fit: bool = False,
    workers: int | None = None,
    command: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """``lantern eval realcompact``: run, then write ``report.md`` and ``results.json`` (and ``fit.json`` with
    ``fit``: the refit weights and their leave-one-repository-out figures) to ``out``. Returns the summary table."""
    import datetime

    start = time.time()
    chosen = tuple(systems or SYSTEMS)
    results, skipped = run(data, systems=chosen, limit=limit, progress=progress, workers=workers)
    if not results:
        raise LanternError(f"{data}: no compaction with a lost fact to evaluate")
    meta = {
        "seconds": time.time() - start,
        "when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": command,
        "skipped": skipped,
    }
    table = summary_table(results, BUDGETS, chosen)
    out.mkdir(parents=True, exist_ok=True)
    report = render(results, BUDGETS, chosen, meta)
    if fit:
        intercept, weights = fit_weights(results)
        cv = cross_validate(results)
        (out / "fit.json").write_text(
            json.dumps({"intercept": intercept, "weights": weights, "leave_one_repo_out": cv}, indent=2) + "\n"
        )
        report += "\n## Refit (leave one repository out)\n\n" + json.dumps(cv["macro"]) + "\n"
    if command:
        report += f"\nCommand: `{command}`\n"
    (out / "report.md").write_text(report)
    (out / "results.json").write_text(json.dumps({"meta": meta, "table": table}, indent=2, default=str) + "\n")
    return table
