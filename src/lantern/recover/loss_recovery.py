"""The compaction recovery (docs/architecture.md §3.8): what a compaction lost (recover/loss.py), packed into the
block to inject after it (recover/loss_pack.py). It ranks no vector: it reads the session's archived text and tags,
so it answers with no embedding model loaded and without numpy (a hook's cold start: docs/daemon.md), and finds
turns stored text-first (archive/pipeline.py) as it finds any other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lantern.model import RecoveredEntry, Recovery
from lantern.scope import Scope

if TYPE_CHECKING:
    from lantern.llm import LLMClient
    from lantern.recover.rerank import RerankResult
    from lantern.store.protocol import StoreProtocol

__all__ = ["recover_compaction"]


def recover_compaction(
    store: StoreProtocol,
    summary: str,
    *,
    live_text: str,
    task: str,
    session: str,
    scope: Scope,
    budget: int,
    exclude_ids: Iterable[int] = (),
    llm: LLMClient | None = None,
    rerank_top_n: int = 20,
    rerank_prompt_chars: int = 8_000,
    prune_below: float = 0.0,
) -> Recovery:
    """The compaction recovery (docs/architecture.md §3.8): what ``session``'s archived turns hold and neither
    ``summary`` nor ``live_text`` states (recover/loss.py), packed into ``budget`` characters (recover/loss_pack.py).
    ``task``: the last user message (empty: the newest archived one); ``exclude_ids``: entries still in the live
    context (their text counts as live). ``Recovery.loss`` reports every lost item, packed or cut;
    ``Recovery.reason`` says why the block is empty (``nothing_archived``: the session has no archived turn in
    ``scope``, ``Recovery.loss`` then an empty report; ``nothing_lost``: every specific is still stated;
    ``budget``: too small for one item). With ``llm``, one listwise call (recover/rerank.py ``rerank_shown``)
    orders the ``rerank_top_n`` heaviest items, each shown with the line it was last seen in, by how much the task
    needs them; the items it names go first
    (``Recovery.rerank``; a failed call keeps the weight order). Entries pruned by reinforcement (confidence
    below ``prune_below``, reinforce.py) are left out: their specifics are not offered. Reads only."""
    from lantern.recover.loss import Loss, find_loss
    from lantern.recover.loss_pack import pack_loss

    turns = store.session_turns(session, scope)
    task = task or _newest_user_text(turns)
    if turns and prune_below > 0:
        pruned = store.entries([t[0] for t in turns], text=False, tags=False)
        turns = [t for t in turns if t[0] not in pruned or pruned[t[0]].confidence >= prune_below]
    gone = set(exclude_ids)
    if gone:
        live_text = "\n".join([live_text, *(text for i, _, text in turns if i in gone)])
        turns = [t for t in turns if t[0] not in gone]
    query = "\n".join(p for p in (task.strip(), summary) if p)  # what the block answers, as events keep it
    recovery = Recovery(query=query, text="", entries=[], chars=0, budget=budget, loss=Loss())  # one shape always
    if not turns:
        recovery.reason = "nothing_archived"
        return recovery
    loss = find_loss(turns, summary, live_text, task, tags=store.tags(t[0] for t in turns))
    recovery.loss = loss
    if not loss.items:
        recovery.reason = "nothing_lost"
        return recovery
    if llm is not None:
        recovery.rerank = _rerank_loss(llm, loss, task or summary, rerank_top_n, rerank_prompt_chars)
    block = pack_loss(loss, budget)
    if not block.text:
        recovery.reason = "budget"
        return recovery
    recovery.text, recovery.chars = block.text, len(block.text)
    weight: dict[int, float] = {}
    for it in loss.packed:
        weight[it.last.entry_id] = max(weight.get(it.last.entry_id, 0.0), it.weight)
    recovery.entries = [
        RecoveredEntry(
            id=entry_id,
            session=session,
            turn=turn,
            score=weight.get(entry_id, 0.0),
            text="\n".join(block.lines[entry_id]),
            excerpt=True,
        )
        for entry_id, turn in block.cited.items()
    ]
    return recovery


def _newest_user_text(turns: list[tuple[int, int, str]]) -> str:
    """The newest user message of a session's archived ``(id, turn, text)``, "" when there is none."""
    from lantern.model import split_rendered

    for _, _, text in reversed(turns):
        for b in reversed(split_rendered(text)):
            if b.kind == "message" and b.role == "user" and b.text.strip():
                return b.text
    return ""


def _rerank_loss(llm: LLMClient, loss: Any, task: str, top_n: int, prompt_chars: int) -> RerankResult:
    """Put the lost items the LLM names first (``loss.items`` reordered in place); see ``recover_compaction``."""
    from lantern.recover.rerank import rerank_shown

    top = loss.items[:top_n]
    lines = loss.lines([(it.last, it.value) for it in top])
    shown = [(k, f"{it.value} — {line}") for k, (it, (line, _)) in enumerate(zip(top, lines))]
    result = rerank_shown(llm, task, shown, prompt_chars)
    if result.order is not None:
        loss.items[: len(top)] = [top[k] for k in result.order]
    return result
