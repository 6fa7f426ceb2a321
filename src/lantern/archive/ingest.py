"""Ingest of a transcript file in bounded memory (ours; the paper does not specify): the file is parsed in slices
(``parse/stream.py`` for JSONL, whole otherwise), each slice's messages are chunked together with the unfinished
last turn of the slice before, and complete turns are handed out in batches. The turns are exactly those of
chunking the whole file at once (the chunk rules look only at the current turn), so a re-run, or a resume after
an interruption, produces the same turns and the store's content hash skips the ones already archived.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from lantern.archive.chunk import chunk
from lantern.archive.parse import ParseResult, parse
from lantern.archive.parse.stream import open_stream
from lantern.model import Message, Turn

MAX_WARNINGS = 1000  # warnings kept per ingest; the rest are counted in one last line (ours)


class Slices:
    """The parsed slices of a file and the progress through it: ``fraction()`` in [0, 1] (bytes read for a
    streamed JSONL file; 0 then 1 for a file parsed whole); ``format``; ``streamed``."""

    def __init__(self, path: Path, format: str):
        self.stream = open_stream(path, format)
        self.streamed = self.stream is not None
        self.format = self.stream.format if self.stream else format
        self._done = False
        self._path = path

    def __iter__(self) -> Iterator[ParseResult]:
        if self.stream is not None:
            yield from self.stream.slices()
        else:
            parsed = parse(self._path, self.format)
            self.format = parsed.format
            self._done = True
            yield parsed

    def fraction(self) -> float:
        if self.stream is not None:
            return self.stream.bytes_done / self.stream.bytes_total if self.stream.bytes_total else 1.0
        return 1.0 if self._done else 0.0


class TurnBatches:
    """Complete turns from parsed slices, in batches of ``size`` (the last batch may be smaller); iterate it.

    ``redact(messages) -> (messages, spans redacted)`` runs on each slice's messages; ``on_slice(slice,
    redacted)`` is told of each slice (for skip/warning/redaction counts) before its turns are handed out.
    ``produced``: turns chunked so far; ``estimate()``: the file's total turns estimated from it and the
    fraction of the file read. Memory: one slice, the turns not yet handed out (under ``size``), and the
    unfinished last turn."""

    def __init__(
        self,
        slices: Slices,
        redact: Callable[[list[Message]], tuple[list[Message], int]],
        size: int,
        on_slice: Callable[[ParseResult, int], None],
    ):
        self.slices, self.redact, self.size, self.on_slice = slices, redact, size, on_slice
        self.produced = 0

    def __iter__(self) -> Iterator[list[Turn]]:
        pending: list[Message] = []
        ready: list[Turn] = []
        for piece in self.slices:
            messages, redacted = self.redact(piece.messages)
            self.on_slice(piece, redacted)
            turns = chunk(pending + messages, None)
            pending = turns.pop().messages if turns else []
            self.produced += len(turns)
            ready.extend(turns)
            while len(ready) >= self.size:
                yield ready[: self.size]
                del ready[: self.size]
        last = chunk(pending, None)
        self.produced += len(last)
        ready.extend(last)
        for start in range(0, len(ready), self.size):
            yield ready[start : start + self.size]

    def estimate(self, done: int) -> int:
        """Estimated total turns of the file (exact once it is read): turns chunked / fraction read."""
        fraction = self.slices.fraction()
        guess = round(self.produced / fraction) if fraction > 0 else self.produced
        return max(done, guess, self.produced)


def add_warnings(kept: list[str], new: list[str], dropped: list[int]) -> None:
    """Append ``new`` warnings to ``kept`` up to MAX_WARNINGS; count the rest in ``dropped[0]``."""
    room = MAX_WARNINGS - len(kept)
    kept.extend(new[: max(room, 0)])
    dropped[0] += max(len(new) - max(room, 0), 0)


def ingest_batches(
    path: Path,
    format: str,
    redact: Callable[[list[Message]], tuple[list[Message], int]],
    size: int,
    on_slice: Callable[[ParseResult, int], None],
) -> Iterator[tuple[list[Turn], int]]:
    """``(batch of turns, estimated total turns)`` of the file at ``path`` (``TurnBatches``), then, when it parsed
    as a Claude Code session transcript ``<dir>/<session-id>.jsonl``, of its subagent transcripts
    (``subagents.subagent_files``), each subagent's messages in the sub-session ``sidechain-<id>``. A file at
    ``<session-id>/subagents/[workflows/<run-id>/]agent-<id>.jsonl`` given itself is read as that subagent's. A subagent
    file that is
    not a Claude Code transcript or cannot be read is skipped: one skip and one warning naming it (the session's
    own turns are committed by then). Totals are cumulative over the files."""
    from lantern.archive.subagents import agent_id, as_sidechain, parent_session, subagent_files
    from lantern.errors import TranscriptFormatError

    state = {"format": format, "done": 0}  # of the last file read

    def run(file: Path, fmt: str, agent: str | None, before: int) -> Iterator[tuple[list[Turn], int]]:
        slices = Slices(file, fmt)

        def prepare(messages: list[Message]) -> tuple[list[Message], int]:
            named = as_sidechain(messages, agent) if agent and slices.format == "claude-code" else messages
            return redact(named)

        batches = TurnBatches(slices, prepare, size, on_slice)
        done = 0
        for turns in batches:
            done += len(turns)
            yield turns, before + batches.estimate(done)
        state.update(format=slices.format, done=done)

    yield from run(path, format, agent_id(path) if parent_session(path) else None, 0)
    if state["format"] != "claude-code" or agent_id(path) is not None:
        return
    total = state["done"]
    for agent, file in subagent_files(path, path.stem):
        try:
            yield from run(file, "claude-code", agent, total)
        except (TranscriptFormatError, OSError) as e:
            on_slice(
                ParseResult(
                    skipped=1, warnings=[f"subagent transcript {file.name} skipped: {e}"], format="claude-code"
                ),
                0,
            )
            continue
        total += state["done"]
