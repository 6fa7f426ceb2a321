"""What a compaction lost (docs/architecture.md §3.8): the specifics of the archived turns that neither the summary
nor the live context holds, ranked by how likely the next turns are to use them. Zero LLM calls.

    blocks  = the session's archived entries split back into messages, tool calls and tool results
              (model.split_rendered), in order; the ones whose text is still live are not lost
    items   = their lookup hints (text/tags.py: paths, identifiers, flags, commands, hashes, URLs, numbers with
              units, errors, versions, ports), minus every value the summary or the live context states
    weight  = a logistic score of features each item carries (``FEATURES``): its kind, how recently and how often
              it was seen, by whom (the user, the assistant, a tool call, only a tool's output), whether the
              summary names its file, and how much its words share with the live context, the summary's end and
              the last user message

The weights (``WEIGHTS``) were fit by ``lantern eval realcompact --fit`` (eval/realcompact.py) on the realcompact
dev set (real Claude Code compactions: the tokens the next 10 turns used that the summary lost), L2-regularised
logistic regression on standardized features; docs/results/realcompact.md gives the fit and its held-out figures.
Our design: the paper ranks whole turns by the query only (§3), which at a compaction returns what the summary
already says.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lantern import lazy_re
from lantern.model import Tag, split_rendered
from lantern.text.clean import normalize_space
from lantern.text.tags import extract_tags, untagged_span

__all__ = [
    "FEATURES",
    "INTERCEPT",
    "WEIGHTS",
    "LostItem",
    "Loss",
    "Seen",
    "find_loss",
    "item_type",
    "live_blocks",
    "features_of",
    "scores",
]

MIDDLE_CHARS, MIDDLE_RESULT_CHARS = 4_000, 1_000  # ours: what is tagged of a block in a long entry's middle
LIVE_TAG_CHARS = 64_000  # ours: the live context's lookup hints are read from its last 64,000 characters
MIN_VALUE_CHARS = 3  # ours: shorter values ("ok", "v1") are not specifics
SUMMARY_TAIL_CHARS = 2_500  # ours: the summary's end names the current work and the next step
TASK_CHARS = 3_000  # ours: the last user message's first characters name the task
# the item types of the loss report, by tag kind; an identifier is refined by its form (item_type)
TYPES = ("path", "url", "command", "flag", "dotted", "identifier", "hash", "error", "number", "version", "port")
_KINDS = ("path", "url", "identifier", "quoted", "command", "hash", "number", "error", "version", "port", "date")
_PART = lazy_re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")
_HUMP = lazy_re.compile(r"([a-z0-9])([A-Z])")

# Feature names, in the order of ``features_of``'s vector. ``dist``: blocks from the item's last occurrence to the
# compaction (0: the newest lost block); parts: the item's word parts (split at non-alphanumerics and camelCase humps,
# >= 3 characters, lowercased).
FEATURES = (
    *(f"kind:{k}" for k in _KINDS),
    "flag",  # starts with "-"
    "dotted",  # an identifier holding "."
    "spaced",  # holds a space (a command line)
    "prose",  # a quoted span of plain words (``_prose``): a label, a description, a to-do, not a specific
    "absolute",  # starts with "/"
    "log_dist",
    "recent",  # dist < 20
    "log_first_dist",
    "first_position",  # first occurrence / blocks
    "log_blocks",  # blocks holding it
    "log_calls",  # tool calls holding it
    "log_user",  # user messages holding it
    "log_assistant",  # assistant messages holding it
    "tool_output_only",
    "file_in_summary",  # its last path component is in the summary
    "dir_in_live",  # its directory is a directory of a live path
    "parts_live",  # share of its parts among the live context's tag parts
    "parts_summary",
    "parts_summary_tail",
    "parts_task",  # among the last user message's parts
    "with_live",  # share of its blocks that hold a live tag too
    "log_length",
    "log_block_tags",  # tags of the sparsest block holding it (a dump of 500 names makes each less likely)
)

# fit on the realcompact dev set by `lantern eval realcompact --fit` (module docstring; docs/results/realcompact.md):
# 88 compactions, 1,470 lost items each on average; one weight per FEATURES name, on the raw feature scale
INTERCEPT = 5.3639
WEIGHTS: dict[str, float] = {
    "kind:path": 0.8900,
    "kind:url": 0.2242,
    "kind:identifier": 1.3439,
    "kind:quoted": -1.0053,
    "kind:command": -0.4667,
    "kind:hash": 0.6151,
    "kind:number": -1.7344,
    "kind:error": -10.3060,
    "kind:version": -6.9033,
    "kind:port": -7.8450,
    "kind:date": -8.6287,
    "flag": 1.0538,
    "dotted": 0.0682,
    "spaced": 3.2127,
    "prose": -1.7647,
    "absolute": 0.2628,
    "log_dist": -0.6251,
    "recent": 1.4476,
    "log_first_dist": -0.2839,
    "first_position": -2.7346,
    "log_blocks": -0.3413,
    "log_calls": 0.2632,
    "log_user": 0.0176,
    "log_assistant": 0.2139,
    "tool_output_only": -0.9342,
    "file_in_summary": 1.1613,
    "dir_in_live": -0.7140,
    "parts_live": 0.8588,
    "parts_summary": -0.6898,
    "parts_summary_tail": 0.4219,
    "parts_task": 0.4258,
    "with_live": -0.4665,
    "log_length": 0.1545,
    "log_block_tags": -0.5803,
}


@dataclass
class Seen:
    """One place an item was seen: the entry (``entry_id``, ``turn``), the message ``side`` (user, assistant, call,
    result) and the ``tool`` name (calls and results; "" otherwise)."""

    entry_id: int
    turn: int
    side: str
    tool: str
    block: int  # position of the block among the lost blocks (0: oldest)


@dataclass
class LostItem:
    """A specific the compaction lost: ``value`` verbatim as archived, its tag ``kind`` and report ``type``
    (``item_type``), ``weight`` in (0, 1) (the logistic score), and where it was ``seen`` (oldest first)."""

    value: str
    kind: str
    type: str
    weight: float
    seen: list[Seen] = field(default_factory=list)
    features: list[float] = field(default_factory=list, repr=False)
    packed: bool = False
    covered_by: str | None = None  # a packed value that holds this one (a path holding a file name)

    @property
    def last(self) -> Seen:
        return self.seen[-1]

    def to_json(self) -> dict[str, Any]:
        last = self.last
        return {
            "value": self.value,
            "type": self.type,
            "weight": round(self.weight, 4),
            "turn": last.turn,
            "entry": last.entry_id,
            "seen": len(self.seen),
            "packed": self.packed or self.covered_by is not None,
        }


@dataclass
class Loss:
    """What a compaction lost (``Recovery.loss``): every lost item ranked by weight (``items``), how many specifics
    of the archived turns the summary or the live context still ``kept``, and the archived ``blocks`` read."""

    items: list[LostItem] = field(default_factory=list)
    kept: int = 0
    blocks: int = 0
    live_blocks: int = 0
    texts: list[str] = field(default_factory=list, repr=False)  # each lost block's text, by Seen.block
    places: list[Seen] = field(default_factory=list, repr=False)  # where each lost block is, by Seen.block

    def line(self, seen: Seen, value: str) -> str:
        """The line of the block ``seen`` points at that holds ``value``, whitespace collapsed, cut to
        ``LINE_CHARS`` characters around it ("" when the block is not known)."""
        return _line_of(self.texts[seen.block], value) if 0 <= seen.block < len(self.texts) else ""

    def line_key(self, seen: Seen, value: str) -> tuple[int, int]:
        """Which archived line ``line`` would show: (lost block, the line's offset in it); two items seen on one
        line share it."""
        ok = 0 <= seen.block < len(self.texts)
        return (seen.block, line_start(self.texts[seen.block], value) if ok else -1)

    def lines(self, wanted: Sequence[tuple[Seen, str]]) -> list[tuple[str, tuple[int, int]]]:
        """``(line, line_key)`` of each ``(seen, value)``, each block read once: one Aho-Corasick pass per
        distinct block finds the first occurrence of all its values (linear in the blocks' text, where ``line``
        per pair costs pairs × block characters)."""
        out: list[tuple[str, tuple[int, int]]] = [("", (seen.block, -1)) for seen, _ in wanted]
        by_block: dict[int, list[int]] = {}
        for k, (seen, _) in enumerate(wanted):
            if 0 <= seen.block < len(self.texts):
                by_block.setdefault(seen.block, []).append(k)
        for block, ks in by_block.items():
            text = self.texts[block]
            values = {wanted[k][1] for k in ks}
            first: dict[str, int] = {}
            automaton = _automaton(values)
            for end, (value, _, _) in automaton.iter(text):
                first.setdefault(value, end - len(value) + 1)
                if len(first) == len(values):
                    break
            for k in ks:
                at = first.get(wanted[k][1], -1)
                out[k] = (_line_at(text, at, wanted[k][1]), (block, _line_start_at(text, at)))
        return out

    def by_type(self) -> dict[str, dict[str, int]]:
        """``{type: {"lost": n, "packed": n}}`` over every item, types in ``TYPES`` order."""
        out: dict[str, dict[str, int]] = {}
        for item in self.items:
            row = out.setdefault(item.type, {"lost": 0, "packed": 0})
            row["lost"] += 1
            row["packed"] += int(item.packed or item.covered_by is not None)
        return {t: out[t] for t in sorted(out, key=lambda t: TYPES.index(t) if t in TYPES else len(TYPES))}

    @property
    def packed(self) -> list[LostItem]:
        return [i for i in self.items if i.packed or i.covered_by is not None]

    def to_json(self, items: int = 50) -> dict[str, Any]:
        """``{"lost", "kept", "packed", "by_type", "items": the first ``items`` packed ones, then "cut": the
        best-weighted ones not packed}``."""
        packed = self.packed
        cut = [i for i in self.items if not (i.packed or i.covered_by is not None)]
        return {
            "lost": len(self.items),
            "kept": self.kept,
            "packed": len(packed),
            "by_type": self.by_type(),
            "items": [i.to_json() for i in packed[:items]],
            "cut": [i.to_json() for i in cut[:items]],
        }


def item_type(value: str, kind: str, sides: Iterable[str] = ()) -> str:
    """The report type of a tag value: ``flag`` (``--json``), ``dotted`` (``state.BaseCommit``), ``command`` (a
    quoted span with a space that a tool call carried: ``git log --oneline``), ``url``, ``path``, else the tag kind
    (a quoted span elsewhere, or of plain words (``_prose``: a call's description), is a ``name``)."""
    if kind == "identifier":
        if value.startswith("-"):
            return "flag"
        return "dotted" if "." in value else "identifier"
    if kind == "quoted":
        return "command" if " " in value and "call" in set(sides) and not _prose(value, kind) else "name"
    if kind == "command":
        return "command"
    return kind


@functools.lru_cache(maxsize=65_536)
def _parts(text: str) -> frozenset[str]:
    """The word parts of a value: split at non-alphanumerics and camelCase humps, >= 3 characters, lowercased."""
    return frozenset(p.lower() for p in _PART.findall(_HUMP.sub(r"\1 \2", text)))


_CODE = lazy_re.compile(r"[/_=$<>{}\[\]`\\|@#]|--|\w[.-]\w|\w\(")


def _prose(value: str, kind: str) -> bool:
    """A quoted span of plain words: it holds a space and none of the characters code is written with (a path's
    ``/``, ``_``, ``=``, brackets, ``--``, ``a.b``, ``a-b``, a call's ``f(``). Such a span is a UI label, a tool
    call's description, a to-do or a choice offered to the user (``"Run tests and lint"``), which the next turns
    rarely use verbatim (docs/results/realcompact.md)."""
    return kind == "quoted" and " " in value and _CODE.search(value) is None


def _file(value: str) -> str:
    return value.rstrip("/").rsplit("/", 1)[-1]


def _dir(value: str) -> str:
    v = value.rstrip("/")
    return v.rsplit("/", 1)[0] if "/" in v else ""


@dataclass
class _Block:
    entry_id: int
    turn: int
    side: str
    tool: str
    text: str
    start: int  # offset in the entry's text
    entry: int  # index of the entry in ``turns``


def session_blocks(turns: Sequence[tuple[int, int, str]]) -> list[_Block]:
    """The messages, tool calls and tool results of a session's entries (``(id, turn, text)`` in turn order, as
    ``store.session_turns`` returns them), in order."""
    out = []
    for k, (entry_id, turn, text) in enumerate(turns):
        for b in split_rendered(text):
            side = b.kind if b.kind != "message" else (b.role if b.role in ("user", "assistant") else "")
            out.append(_Block(entry_id, turn, side, b.name if b.kind != "message" else "", b.text, b.start, k))
    return out


class _Context:
    """What the live side of the compaction states: the summary, the live context and the tags of both."""

    def __init__(self, summary: str, live: str, task: str):
        self.summary = summary
        self.known = summary + "\n" + live
        self.live_tags = {t.value for t in extract_tags(live[-LIVE_TAG_CHARS:]) if len(t.value) >= MIN_VALUE_CHARS}
        self.live_dirs = {_dir(v) for v in self.live_tags if "/" in v}
        self.live_parts = set().union(*(_parts(v) for v in self.live_tags)) if self.live_tags else set()
        self.summary_parts = _parts(summary)
        self.tail_parts = _parts(summary[-SUMMARY_TAIL_CHARS:])
        self.task_parts = _parts(task[:TASK_CHARS])


@dataclass
class _Stats:
    kind: str
    blocks: list[int] = field(default_factory=list)
    sides: Counter = field(default_factory=Counter)
    seen: list[Seen] = field(default_factory=list)


def features_of(
    value: str, s: _Stats, n: int, ctx: _Context, block_tags: list[int], with_live: list[bool]
) -> list[float]:
    """The ``FEATURES`` vector of one lost value (see the names' comments)."""
    dist = n - 1 - s.blocks[-1]
    first = n - 1 - s.blocks[0]
    parts = _parts(value)
    np_ = max(1, len(parts))
    pathlike = "/" in value or "." in value
    sides = s.sides
    total = sum(sides.values())
    return [
        *(float(s.kind == k) for k in _KINDS),
        float(value.startswith("-")),
        float(s.kind == "identifier" and "." in value),
        float(" " in value),
        float(_prose(value, s.kind)),
        float(value.startswith("/")),
        math.log1p(dist),
        float(dist < 20),
        math.log1p(first),
        s.blocks[0] / max(1, n),
        math.log1p(len(s.blocks)),
        math.log1p(sides["call"]),
        math.log1p(sides["user"]),
        math.log1p(sides["assistant"]),
        float(sides["result"] == total),
        float(pathlike and _file(value) in ctx.summary),
        float("/" in value and _dir(value) in ctx.live_dirs),
        len(parts & ctx.live_parts) / np_,
        len(parts & ctx.summary_parts) / np_,
        len(parts & ctx.tail_parts) / np_,
        len(parts & ctx.task_parts) / np_,
        sum(with_live[b] for b in s.blocks) / len(s.blocks),
        math.log(len(value)),
        math.log1p(min(block_tags[b] for b in s.blocks)),
    ]


def scores(
    features: Sequence[Sequence[float]], weights: dict[str, float] | None = None, intercept: float | None = None
) -> list[float]:
    """The logistic weight in (0, 1) of each ``FEATURES`` vector (default: the fitted ``WEIGHTS`` and
    ``INTERCEPT``)."""
    w = WEIGHTS if weights is None else weights
    coef = [w[name] for name in FEATURES]
    b = INTERCEPT if intercept is None else intercept
    # plain floats: a compaction's few thousand items cost milliseconds, and a cold hook loads no numpy for them
    out = []
    for vector in features:
        z = min(50.0, max(-50.0, math.fsum(f * c for f, c in zip(vector, coef)) + b))
        out.append(1.0 / (1.0 + math.exp(-z)))
    return out


def _vocabulary(
    turns: Sequence[tuple[int, int, str]], tags: dict[int, list[Tag]] | None, blocks: Sequence[_Block]
) -> dict[str, str]:
    """value -> kind of every specific of ``turns`` of at least ``MIN_VALUE_CHARS`` characters: the stored lookup
    hints (``store.tags``) when given, else extracted from each entry's text; plus, for an entry longer than the
    tagging window (text/tags.py ``tag_window``: its middle was not tagged), the hints of the messages and tool
    calls in that middle (their first ``MIDDLE_CHARS``) and of the tool results there (their first
    ``MIDDLE_RESULT_CHARS``); plus the simple commands of every tool call's command line (``commands``)."""
    vocab: dict[str, str] = {}

    def add(found: Iterable[Tag]) -> None:
        for t in found:
            if len(t.value) >= MIN_VALUE_CHARS and t.kind in _KINDS:
                vocab.setdefault(t.value, t.kind)

    for entry_id, _, text in turns:
        stored = tags.get(entry_id) if tags is not None else None
        add(stored if stored is not None else extract_tags(text))
    spans = {k: untagged_span(text) for k, (_, _, text) in enumerate(turns)} if tags is not None else {}
    for b in blocks:
        start, end = spans.get(b.entry, (0, 0))
        if start <= b.start < end:
            add(extract_tags(b.text[: MIDDLE_RESULT_CHARS if b.side == "result" else MIDDLE_CHARS]))
        if b.side == "call":
            for command in commands(b.text):
                vocab.setdefault(command, "command")
    return vocab


_SHELL_SPLIT = lazy_re.compile(r"&&|\|\||[;|\n]")
COMMAND_KEYS = ("command", "cmd", "script")
MAX_COMMAND_CHARS = 160  # ours: a longer simple command is a script, not a specific


def commands(arguments: str) -> list[str]:
    """The simple commands of a tool call's command line: the arguments are JSON holding ``command`` / ``cmd`` /
    ``script`` as a string, or as an argv list (Codex's ``["bash", "-lc", "..."]``: its last item); the line is
    split at ``&&``, ``||``, ``;``, ``|`` and line breaks outside quotes; each part of 2 to ``MAX_COMMAND_CHARS``
    characters holding a space is kept (``cd /repo``, ``git log --oneline -5``). Unreadable arguments give [], and
    so do arguments nested deeper than an answer may be (an LLM wrote them: llm.parse_answer's bounds)."""
    from lantern.llm import parse_answer

    if not arguments.lstrip().startswith("{") or len(arguments) > 100_000:
        return []
    try:
        args = parse_answer(arguments)
    except ValueError:
        return []
    if not isinstance(args, dict):
        return []
    out = []
    for key in COMMAND_KEYS:
        line = args.get(key)
        if isinstance(line, list) and line and all(isinstance(x, str) for x in line):
            line = line[-1]
        if isinstance(line, str):
            out += [p for p in _simple_commands(line) if " " in p and len(p) <= MAX_COMMAND_CHARS]
    return out


def _simple_commands(line: str) -> list[str]:
    """``line`` split at shell operators outside single or double quotes, each part stripped. A backslash outside
    single quotes escapes the next character; a backslash-newline continues the command on the next line (POSIX
    shell, "Escape Character"), and only the part's first line is kept, since a value is one line (``gh api x \\``
    then ``--field a=1`` gives ``gh api x``, never ``--field a=1``). Linear."""
    parts, start, quote, cut = [], 0, "", -1
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c == "\\":
            if cut < 0 and line.startswith("\n", i + 1):
                cut = i
            i += 1
        elif c in "'\"":
            quote = c
        elif c in "&|;\n":
            if line.startswith(("&&", "||"), i) or c != "&":
                parts.append(line[start : cut if cut >= 0 else i])
                i += 2 if line.startswith(("&&", "||"), i) else 1
                start, cut = i, -1
                continue
        i += 1
    parts.append(line[start : cut if cut >= 0 else len(line)])
    return [p.strip() for p in parts if p.strip()]


LIVE_PROBE_CHARS = 64  # ours: a block's first characters looked for in the live text before the whole is compared


def live_blocks(texts: Sequence[str], live: str) -> list[bool]:
    """Whether each of ``texts`` (a block's text), whitespace collapsed, occurs in ``live`` (whitespace collapsed
    already); a blank text never does. One Aho-Corasick pass over ``live`` finds where each text's first
    ``LIVE_PROBE_CHARS`` characters occur, and only there are the distinct texts it starts and not yet found
    compared whole: linear in ``live`` and the texts when probes are not repeated prefixes of texts missing from
    ``live`` (a substring test per block costs blocks × live characters)."""
    import ahocorasick

    out = [False] * len(texts)
    wanted: dict[str, list[int]] = {}  # a distinct collapsed text -> its blocks
    for k, text in enumerate(texts):
        collapsed = normalize_space(text)
        if collapsed:
            wanted.setdefault(collapsed, []).append(k)
    probes: dict[str, list[str]] = {}  # a probe -> the distinct texts it starts
    for collapsed in wanted:
        probes.setdefault(collapsed[:LIVE_PROBE_CHARS], []).append(collapsed)
    if not probes or not live:
        return out
    a = ahocorasick.Automaton()
    for probe in probes:
        a.add_word(probe, probe)
    a.make_automaton()
    for end, probe in a.iter(live):
        pending = probes[probe]
        if not pending:
            continue
        start = end - len(probe) + 1
        found = [t for t in pending if live.startswith(t, start)]
        for t in found:
            for k in wanted[t]:
                out[k] = True
        if found:
            probes[probe] = [t for t in pending if t not in found]
    return out


def _automaton(values: Iterable[str]) -> Any:
    """An Aho-Corasick automaton (pyahocorasick) over ``values``: one pass finds every occurrence of all of them."""
    import ahocorasick

    a = ahocorasick.Automaton()
    for v in values:
        a.add_word(v, (v, v[0].isalnum(), v[-1].isalnum()))
    if len(a):
        a.make_automaton()
    return a


def _occurrences(automaton: Any, text: str) -> Iterator[tuple[int, str]]:
    """(start, value) of each occurrence in ``text`` of a value of ``automaton`` that is not part of a longer word
    (no letter, digit or ``_`` right before or after it) and is not a JSON object's key (``"file_path":``: the
    schema of a tool call's arguments or of a tool's JSON output, not a specific of the work)."""
    if not len(automaton):
        return
    n = len(text)
    for end, (value, word_start, word_end) in automaton.iter(text):
        start = end - len(value) + 1
        if text.startswith('":', end + 1) and start > 0 and text[start - 1] == '"':
            continue
        if word_start and start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
            continue
        if word_end and end + 1 < n and (text[end + 1].isalnum() or text[end + 1] == "_"):
            continue
        yield start, value


def find_loss(
    turns: Sequence[tuple[int, int, str]],
    summary: str,
    live: str,
    task: str = "",
    *,
    tags: dict[int, list[Tag]] | None = None,
    weights: dict[str, float] | None = None,
    intercept: float | None = None,
) -> Loss:
    """The specifics of ``turns`` (the session's archived ``(id, turn, text)``, in turn order) that neither
    ``summary`` nor ``live`` (the live context's text, whitespace collapsed as ``Lantern.live_text`` gives it)
    states, ranked by weight, heaviest first. ``task``: the last user message (empty: none). ``tags``: each entry's
    stored lookup hints by id (default: extracted from the text). A block (message, tool call or tool result) whose
    whole text is in ``live`` is live: its values are not lost. A value is stated when it occurs verbatim
    (case-sensitive) in the summary or the live text. Cost: one Aho-Corasick pass (pyahocorasick) over the
    summary and live
    text and one over the archived text, linear in their length plus the occurrences found."""
    blocks = session_blocks(turns)
    is_live = live_blocks([b.text for b in blocks], live)
    ctx = _Context(summary, live, task)
    vocab = _vocabulary(turns, tags, blocks)
    known = _automaton(vocab)
    stated = {v for _, v in _occurrences(known, ctx.known)}
    lost = {v: k for v, k in vocab.items() if v not in stated}
    finder = _automaton(set(lost) | ctx.live_tags)
    lost_blocks = [i for i, gone in enumerate(is_live) if not gone]
    position = {b: i for i, b in enumerate(lost_blocks)}  # block index -> position among the lost blocks
    entry_blocks: dict[int, list[int]] = {}
    for i, b in enumerate(blocks):
        entry_blocks.setdefault(b.entry, []).append(i)
    stats: dict[str, _Stats] = {}
    found: list[set[str]] = [set() for _ in lost_blocks]
    for k, (_, _, text) in enumerate(turns):
        mine = entry_blocks.get(k, [])
        starts = [blocks[i].start for i in mine]
        for start, value in _occurrences(finder, text):
            i = mine[bisect.bisect_right(starts, start) - 1]
            if i in position:
                found[position[i]].add(value)
    for p, values in enumerate(found):
        b = blocks[lost_blocks[p]]
        for value in values:
            kind = lost.get(value)
            if kind is None:
                continue
            s = stats.get(value)
            if s is None:
                s = stats[value] = _Stats(kind)
            s.blocks.append(p)
            s.sides[b.side] += 1
            s.seen.append(Seen(b.entry_id, b.turn, b.side, b.tool, p))
    block_tags = [len(values) for values in found]
    with_live = [bool(values & ctx.live_tags) for values in found]
    n = len(lost_blocks)
    values = list(stats)
    vectors = [features_of(v, stats[v], n, ctx, block_tags, with_live) for v in values]
    items = [
        LostItem(v, stats[v].kind, item_type(v, stats[v].kind, stats[v].sides), w, stats[v].seen, f)
        for v, w, f in zip(values, scores(vectors, weights, intercept), vectors)
    ]
    items.sort(key=lambda it: (-it.weight, -it.last.block, it.value))
    texts = [blocks[i].text for i in lost_blocks]
    places = [Seen(b.entry_id, b.turn, b.side, b.tool, p) for p, b in enumerate(blocks[i] for i in lost_blocks)]
    return Loss(items=items, kept=len(stated), blocks=len(blocks), live_blocks=sum(is_live), texts=texts, places=places)


LINE_CHARS = 160  # ours: the line an item was seen in is kept up to this many characters around it


def line_start(text: str, value: str) -> int:
    """The offset in ``text`` of the line holding ``value``'s first occurrence (-1: not in ``text``)."""
    return _line_start_at(text, text.find(value))


def _line_start_at(text: str, at: int) -> int:
    """The offset in ``text`` of the line holding offset ``at`` (-1 for ``at`` < 0)."""
    return -1 if at < 0 else text.rfind("\n", 0, at) + 1


def _line_of(text: str, value: str) -> str:
    """The line of ``text`` holding ``value``'s first occurrence, whitespace collapsed, cut to about
    ``LINE_CHARS`` characters around it at word boundaries (never inside a word: a cut end is marked ``…``)."""
    return _line_at(text, text.find(value), value)


def _line_at(text: str, at: int, value: str) -> str:
    """``_line_of`` for the occurrence of ``value`` at offset ``at`` of ``text`` ("" when ``at`` < 0)."""
    if at < 0:
        return ""
    start = _line_start_at(text, at)
    end = text.find("\n", at)
    end = len(text) if end < 0 else end
    head = tail = ""
    if end - start > LINE_CHARS:
        half = max(0, (LINE_CHARS - len(value)) // 2)
        cut_start, cut_end = max(start, at - half), min(end, at + len(value) + half)
        if cut_start > start:  # the first whole word after the cut, never past the value
            space = text.find(" ", cut_start, at)
            start, head = (space + 1 if space >= 0 else at), "… "
        if cut_end < end:  # the last whole word before the cut, never inside the value
            space = text.rfind(" ", at + len(value), cut_end + 1)
            end, tail = (space if space >= 0 else at + len(value)), " …"
    return head + normalize_space(text[start:end]) + tail
