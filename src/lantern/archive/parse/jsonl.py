"""Plain ``{role, content}`` transcripts (JSON list, ``{"messages": [...]}`` or JSONL), and the primitives every
JSON-based parser shares: ``ParseResult``, ``clean_text``, reading a source, loading JSON/JSONL, role and time
normalization. (They live here because the plain format is the base the OpenAI and Anthropic parsers extend.)
"""

from __future__ import annotations

import bisect
import codecs
import json
import os
import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lantern import lazy_re
from lantern.errors import TranscriptFormatError
from lantern.model import Message
from lantern.text.clean import clean_text
from lantern.text.media import image_placeholder


@dataclass
class ParseResult:
    """What a parser produced: ``messages`` in order, ``skipped`` input items dropped (each with a ``warnings``
    entry), and the ``format`` name that was used."""

    messages: list[Message] = field(default_factory=list)
    skipped: int = 0
    warnings: list[str] = field(default_factory=list)
    format: str = ""

    def skip(self, why: str) -> None:
        """Count one dropped input item and record why."""
        self.skipped += 1
        self.warnings.append(why)


# Default_Ignorable_Code_Point, first and last code point of each range: the characters a renderer shows nothing
# for (zero-width spaces and joiners, LRM / RLM and the other bidi controls, the Mongolian vowel separator, the
# combining grapheme joiner, invisible operators, variation selectors, tags, Hangul fillers, soft hyphen ...).
# From the Unicode Character Database, DerivedCoreProperties.txt, Unicode 14.0 (the version of Python 3.11's
# unicodedata, which has no such property): https://www.unicode.org/Public/14.0.0/ucd/DerivedCoreProperties.txt,
# "Total code points: 4174"; adjacent ranges of the file are merged here.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
_IGNORABLE_STARTS = [first for first, _ in DEFAULT_IGNORABLE]


def invisible(char: str) -> bool:
    """Whether the character ``char`` shows nothing: whitespace (``str.isspace``) or a Unicode
    Default_Ignorable_Code_Point (``DEFAULT_IGNORABLE``, UCD DerivedCoreProperties.txt)."""
    if char.isspace():
        return True
    code = ord(char)
    i = bisect.bisect_right(_IGNORABLE_STARTS, code) - 1
    return i >= 0 and code <= DEFAULT_IGNORABLE[i][1]


def blank(text: str | None) -> bool:
    """Whether a message's text says nothing: None, empty, or only ``invisible`` characters (whitespace and
    Default_Ignorable_Code_Point characters such as U+200B, U+200E, U+180E, U+2061, which ``str.strip`` keeps).
    Every parser skips such content as empty (``empty content; skipped``)."""
    return not text or all(map(invisible, text))


ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "bot": "assistant",
    "model": "assistant",
    "gpt": "assistant",
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "function": "tool",
}


def norm_role(role: Any) -> str | None:
    """Map a role name (any case) to ``user``/``assistant``/``system``/``tool``; None when unknown or not a str."""
    return ROLES.get(role.strip().lower()) if isinstance(role, str) else None


def parse_time(value: Any) -> datetime | None:
    """An ISO 8601 string (``Z`` allowed) or epoch seconds/milliseconds -> datetime; None when absent or unparseable.

    ISO strings keep their own offset (naive if they have none); epoch numbers give UTC-aware datetimes.
    """
    try:
        if isinstance(value, str) and value.strip():
            return datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return datetime.fromtimestamp(value / 1000 if value > 1e11 else value, tz=timezone.utc)
    except (ValueError, OverflowError, OSError):
        pass
    return None


def message_time(m: dict) -> datetime | None:
    """The time of a message dict from its ``timestamp``, ``time`` or ``created_at`` field."""
    for key in ("timestamp", "time", "created_at"):
        if key in m:
            return parse_time(m[key])
    return None


def content_text(content: Any) -> str:
    """Text of a ``content`` field: a str as is; a list of parts/blocks -> their texts joined with newlines
    (images -> ``[image: caption]`` or ``[image]``, never their data; tool/thinking blocks are ignored here, unknown
    blocks and bare
    objects are kept as JSON); None -> ``""``. Other JSON values are dumped as JSON. The result is not yet
    cleaned."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return dumps(content)
    parts = []
    for p in content:
        if isinstance(p, str):
            parts.append(p)
        elif isinstance(p, dict):
            kind = kind_of(p)
            if isinstance(p.get("text"), str):  # text, input_text, output_text
                parts.append(p["text"])
            elif kind in ("image_url", "image", "input_image"):
                parts.append(image_placeholder(p))
            elif kind in ("document", "file", "input_file"):
                parts.append("[document]")
            elif kind == "input_audio":
                parts.append("[audio]")
            elif isinstance(p.get("refusal"), str):
                parts.append(p["refusal"])
            elif kind not in _BLOCKS_HANDLED_ELSEWHERE:
                parts.append(dumps(p))  # an unknown block or a bare object: kept as JSON, never dropped
    return "\n".join(parts)


# blocks that the format parsers turn into tool calls / results, or drop on purpose (model reasoning)
_BLOCKS_HANDLED_ELSEWHERE = {
    "tool_use",
    "tool_result",
    "server_tool_use",
    "web_search_tool_result",
    "thinking",
    "redacted_thinking",
    "function_call",
    "function_call_output",
}


def _integer(digits: str) -> int | str:
    """A JSON integer literal -> ``int``, or the digit string itself when it is longer than Python converts
    (``sys.get_int_max_str_digits()``, 4,300 by default): every digit kept (archived as a JSON string, in quotes),
    never a whole-file error."""
    limit = sys.get_int_max_str_digits()
    return int(digits) if not limit or len(digits) <= limit else digits


def loads(text: str | bytes) -> Any:
    """``json.loads`` for transcripts: an integer too long for Python (e.g. 5,000 digits) stays its digit string
    instead of raising ValueError. Raises ValueError (JSONDecodeError) and RecursionError as ``json.loads``."""
    return json.loads(text, parse_int=_integer)


NESTED_TOO_DEEPLY = "JSON nested too deeply"  # the one message for a value deeper than Python can walk


def dumps(value: Any) -> str:
    """``value`` as JSON text (non-ASCII kept); ``str(value)`` for live objects JSON cannot encode (a cycle).
    Raises RecursionError for a value nested deeper than Python can walk (``str`` could not walk it either):
    ``parse`` turns it into TranscriptFormatError(NESTED_TOO_DEEPLY)."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def kind_of(x: Any) -> str | None:
    """The ``type`` of a block/record when it is a dict with a str ``type``; else None (a list or number there
    must not reach a set lookup)."""
    kind = x.get("type") if isinstance(x, dict) else None
    return kind if isinstance(kind, str) else None


def str_or_none(v: Any) -> str | None:
    return clean_text(v) if isinstance(v, str) else None


# --- sources and JSON -----------------------------------------------------------------------------------------


def utf16_without_bom(data: bytes) -> str | None:
    """``"utf-16-le"``/``"utf-16-be"`` when ``data`` looks like UTF-16 text without a BOM, else None.

    The test (ours): even length, and in the first 4 KB at least 30% of the bytes at odd (LE) or even (BE)
    positions are NUL while under 5% of the other positions are (ASCII characters, as JSON's braces and quotes,
    are ``XX 00`` in UTF-16-LE; a few CJK characters such as U+4E00 are ``00 4E``). Binary data has NULs at both
    parities; a decoding error afterwards still means binary."""
    head = data[:4096]
    if len(data) % 2 or len(head) < 2:
        return None
    even, odd = head[0::2], head[1::2]
    zeros_even, zeros_odd = even.count(0), odd.count(0)
    if zeros_odd >= 0.3 * len(odd) and zeros_even < 0.05 * len(even):
        return "utf-16-le"
    if zeros_even >= 0.3 * len(even) and zeros_odd < 0.05 * len(odd):
        return "utf-16-be"
    return None


def utf32_without_bom(data: bytes) -> str | None:
    """``"utf-32-le"``/``"utf-32-be"`` when ``data`` looks like UTF-32 text without a BOM, else None.

    The test (ours): a length that is a multiple of 4, and in the first 4 KB every code unit's top byte NUL and
    the next one at most 0x10 (a code point is at most U+10FFFF), with some non-NUL byte. Text in UTF-16 or
    UTF-8 breaks the pattern within a few characters; a decoding error afterwards still means binary."""
    head = data[:4096]
    if len(data) % 4 or len(head) < 4 or not head.strip(b"\x00"):
        return None
    if not head[3::4].strip(b"\x00") and max(head[2::4]) <= 0x10:
        return "utf-32-le"
    if not head[0::4].strip(b"\x00") and max(head[1::4]) <= 0x10:
        return "utf-32-be"
    return None


def decode(data: bytes, source: str | None = None) -> str:
    """Bytes -> text: UTF-8 (BOM dropped), UTF-32 or UTF-16 with a BOM, or either without one
    (``utf32_without_bom``, ``utf16_without_bom``).

    Raises TranscriptFormatError("binary data ...", "invalid UTF-8 ...") for NUL bytes or invalid UTF-8."""
    try:
        if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):  # before UTF-16: FF FE 00 00 starts FF FE
            return data.decode("utf-32")
        if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return data.decode("utf-16")
        wide = (utf32_without_bom(data) or utf16_without_bom(data)) if b"\x00" in data else None
        if wide:
            try:
                return data.decode(wide)
            except UnicodeDecodeError:
                pass  # NULs in a UTF-32- or UTF-16-like pattern that is not valid text: binary
        if b"\x00" in data:
            raise TranscriptFormatError("binary data (contains NUL bytes)", source=source)
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = data[e.start]
        hint = (
            " If it is Latin-1 or Windows-1252 text, convert it to UTF-8 first, e.g. iconv -f cp1252 -t utf-8 "
            "FILE > FILE.utf8 (-f latin1 if iconv refuses a byte)"
            if bad >= 0x80 and _legacy_8bit(data)
            else ""
        )
        raise TranscriptFormatError(
            f"invalid UTF-8 (byte 0x{bad:02X} at byte {e.start}).{hint}", source=source
        ) from None


def _legacy_8bit(data: bytes) -> bool:
    """True when ``data`` reads as single-byte legacy text: no control bytes but tab/CR/LF, and the bytes
    ≥ 0x80 are a small share (≤ 30%) of letters' accents rather than a binary's noise; read on the first 64 KB
    (ours, a hint only)."""
    head = data[:65536]
    high = len(head) - len(head.translate(None, bytes(range(0x80, 0x100))))
    controls = len(head) - len(head.translate(None, bytes(b for b in range(0x20) if b not in (9, 10, 13))))
    return controls == 0 and high <= 0.3 * len(head)


def check_head(head: bytes, source: str | None = None) -> None:
    """Refuse a file by its first bytes (up to 4 KB) when they hold NUL bytes outside a UTF-16 or UTF-32 pattern
    (with or without a BOM): binary data (an image, a database, a sparse file), never read whole. Raises
    TranscriptFormatError("binary data ..." / "invalid UTF-8 ...")."""
    if b"\x00" not in head or head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)):
        return  # (the UTF-32-LE BOM starts with the UTF-16-LE one)
    if utf16_without_bom(head[: len(head) - len(head) % 2]) or utf32_without_bom(head[: len(head) - len(head) % 4]):
        return
    raise TranscriptFormatError("binary data (contains NUL bytes)", source=source)


def read_source(source: Any, name: str | None = None) -> Any:
    """A path (``str``/``Path``), bytes, text or loaded object -> text (``str``) or the loaded object (list/dict;
    a tuple becomes a list).

    A ``str`` is taken as a file path when it is one line, not JSON-looking, and an existing file; a one-line
    ``str`` that looks like a path (has a separator or a file suffix) but does not exist raises
    TranscriptFormatError. Unreadable files, binary data and unsupported types raise TranscriptFormatError."""
    if isinstance(source, (list, dict)):
        return source
    if isinstance(source, tuple):
        return list(source)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return decode(bytes(source), name)
    if isinstance(source, str):
        line = source.strip()
        if "\n" in line or not line or line[0] in "{[#>" or len(line) > 4096:
            return source
        try:
            is_file = os.path.isfile(line)
        except (ValueError, OSError):
            is_file = False
        if not is_file:
            if re.fullmatch(r".*[/\\].*|.+\.(jsonl?|md|txt)", line, re.IGNORECASE):
                # the string is not echoed: it may be chat text holding a secret (a URL with a password)
                raise TranscriptFormatError(
                    f"a one-line string of {len(line)} characters looks like a file path but no such file exists; "
                    "pass a pathlib.Path for a file, or the messages themselves",
                    source=name,
                )
            return source
        source = Path(line)
    if isinstance(source, os.PathLike):
        try:
            with open(source, "rb") as f:  # read on from the head, not seeked back: a pipe (/dev/stdin, <(...)) too
                head = f.read(4096)
                check_head(head, name or str(source))  # a binary file is refused before it is read whole
                data = head + f.read()
        except OSError as e:
            raise TranscriptFormatError(
                f"cannot read file: {e.strerror or e}", source=name or str(source)
            ) from e  # the cause: unreadable, not a format question
        return decode(data, name or str(source))
    raise TranscriptFormatError(f"unsupported source type {type(source).__name__}", source=name)


_LINE_ENDS = lazy_re.compile(r"\r\n|\r|\n")


class JsonLines(list):
    """The objects of a JSONL file; ``line_numbers[i]`` is the 1-based line of item ``i``."""

    def __init__(self, items: list, line_numbers: list[int]):
        super().__init__(items)
        self.line_numbers = line_numbers


def load_json(text: str, source: str | None = None) -> tuple[Any, int, list[str]]:
    """Text -> ``(object, skipped, warnings)``: a whole JSON document, or JSONL (one JSON object per line).

    JSONL is chosen when the document does not parse but its lines do (the first one, or at least half); the
    object is then a ``JsonLines`` list and bad lines are skipped, counted and named in a warning. Raises
    TranscriptFormatError (with ``line``)
    for empty text, a JSON syntax error in a whole document, or a JSONL file where no line parses."""
    if not text.strip():
        raise TranscriptFormatError("empty", source=source)
    try:
        return loads(text), 0, []
    except RecursionError:
        raise TranscriptFormatError(NESTED_TOO_DEEPLY, source=source) from None
    except ValueError as e:
        error = e
    # LF, CRLF or a lone CR end a line (a raw CR cannot be inside a JSON string): CR-only and mixed files too
    lines = [(n, ln) for n, ln in enumerate(_LINE_ENDS.split(text), 1) if ln.strip()]
    items, good, bad = [], [], []
    for n, ln in lines:
        try:
            obj = loads(ln)
        except RecursionError:
            bad.append((n, f"line {n}: {NESTED_TOO_DEEPLY}; skipped"))
            continue
        except ValueError as e:
            bad.append((n, f"line {n}: invalid JSON ({getattr(e, 'msg', e)}); skipped"))
            continue
        if isinstance(obj, dict):
            items.append(obj)
            good.append(n)
        else:
            bad.append((n, f"line {n}: not a JSON object; skipped"))
    first_ok = bool(lines) and lines[0][0] not in {n for n, _ in bad}
    if items and len(lines) > 1 and (first_ok or len(items) * 2 >= len(lines)):
        return JsonLines(items, good), len(bad), [w for _, w in bad]
    line = getattr(error, "lineno", None)
    msg = getattr(error, "msg", str(error))
    raise TranscriptFormatError(f"invalid JSON: {msg}", line=line, source=source)


def unwrap(m: Any) -> Any:
    """An agent-log item ``{"message": {...}, "timestamp": ...}`` without a ``role`` -> the inner message with the
    outer ``timestamp``/``time``; any other item unchanged."""
    if isinstance(m, dict) and "role" not in m and isinstance(m.get("message"), dict):
        inner = dict(m["message"])
        for key in ("timestamp", "time"):
            if key in m:
                inner.setdefault(key, m[key])
        return inner
    return m


def message_items(data: Any, source: str | None = None) -> tuple[list[tuple[str, Any]], Any]:
    """A loaded transcript -> ``(items, system)`` where items are ``(where, item)`` pairs, ``where`` being
    ``"line N"`` for JSONL and ``"message N"`` otherwise (for warnings). Accepts a list of messages,
    ``{"messages": [...], "system": ...}`` or one message dict; wrapped items ``{"message": {...}, "timestamp": ...}``
    (agent logs) are unwrapped. Raises TranscriptFormatError when no message list is found."""
    system = None
    if isinstance(data, dict):
        if isinstance(data.get("messages"), list):
            system, data = data.get("system"), data["messages"]
        elif "role" in data or isinstance(data.get("message"), dict):
            data = [data]
        else:
            raise TranscriptFormatError(
                "no messages found: expected a list of messages or an object with 'messages'",
                field="messages",
                source=source,
            )
    if not isinstance(data, list):
        raise TranscriptFormatError(f"no messages found: got a JSON {type(data).__name__}", source=source)
    lines = getattr(data, "line_numbers", None)
    return [(f"line {lines[i]}" if lines else f"message {i + 1}", unwrap(m)) for i, m in enumerate(data)], system


def where_error(message: str, where: str, key: str, source: str | None = None) -> TranscriptFormatError:
    """A TranscriptFormatError for field ``key`` of the item at ``where`` (``"line N"`` -> ``line=N``,
    ``"message N"`` -> ``field="messages[N-1].key"``)."""
    kind, _, number = where.partition(" ")
    if kind == "line" and number.isdigit():
        return TranscriptFormatError(message, line=int(number), field=key, source=source)
    if kind == "message" and number.isdigit():
        return TranscriptFormatError(message, field=f"messages[{int(number) - 1}].{key}", source=source)
    if kind == "record" and number.isdigit():
        return TranscriptFormatError(message, field=f"[{int(number) - 1}].{key}", source=source)
    return TranscriptFormatError(message, field=f"{where}.{key}" if where else key, source=source)


_OPENAI_KEYS = ("tool_calls", "function_call", "tool_call_id")
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "server_tool_use", "web_search_tool_result"}


def check_foreign(fmt: str, m: dict, where: str, source: str | None = None) -> None:
    """Raise TranscriptFormatError when item ``m`` carries tool structure that parser ``fmt`` would drop
    silently (ours: a forced wrong ``--format`` is an error, not a quiet loss): OpenAI ``tool_calls``/
    ``function_call``/``tool_call_id`` under ``anthropic`` or ``jsonl``; Anthropic ``tool_use``/``tool_result``
    blocks under ``openai`` or ``jsonl``. The error names the line (or message index) and the field."""
    if fmt in ("anthropic", "jsonl"):
        for key in _OPENAI_KEYS:
            if m.get(key):
                raise where_error(
                    f"OpenAI tool structure ({key!r}) that the {fmt} parser would drop; use format 'openai' or 'auto'",
                    where,
                    key,
                    source,
                )
    if fmt in ("openai", "jsonl") and isinstance(m.get("content"), list):
        for block in m["content"]:
            kind = kind_of(block)
            if kind in _ANTHROPIC_BLOCKS:
                raise where_error(
                    f"Anthropic {kind!r} block that the {fmt} parser would drop; use format 'anthropic' or 'auto'",
                    where,
                    "content",
                    source,
                )


def start(data: Any, fmt: str, source: str | None) -> tuple[list[tuple[str, Any]], Any, ParseResult]:
    """Common opening of the JSON parsers: read/load ``data`` -> ``(items, system, ParseResult)`` (see
    ``message_items``; the result already counts bad JSONL lines)."""
    result = ParseResult(format=fmt)
    data = read_source(data, source)
    if isinstance(data, str):
        data, result.skipped, result.warnings = load_json(data, source)
    items, system = message_items(data, source)
    return items, system, result


def records(data: Any, fmt: str, source: str | None) -> tuple[list[tuple[str, Any]], ParseResult]:
    """Opening of the record-based parsers (Codex, ShareGPT): read/load ``data`` -> ``([(where, record)], result)``
    with no unwrapping; a JSON object is one record, a JSON list or JSONL file its items. The result already
    counts bad JSONL lines. Raises TranscriptFormatError for text that is not JSON/JSONL, or a JSON scalar."""
    result = ParseResult(format=fmt)
    data = read_source(data, source)
    if isinstance(data, str):
        data, result.skipped, result.warnings = load_json(data, source)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise TranscriptFormatError(f"expected JSON objects, got a JSON {type(data).__name__}", source=source)
    lines = getattr(data, "line_numbers", None)
    return [(f"line {lines[i]}" if lines else f"record {i + 1}", r) for i, r in enumerate(data)], result


def check_item(m: Any, where: str, result: ParseResult) -> str | None:
    """The normalized role of item ``m``, or None after counting it as skipped with a warning naming ``where``."""
    if not isinstance(m, dict):
        result.skip(f"{where}: not an object; skipped")
        return None
    if "role" not in m:
        result.skip(f"{where}: missing field 'role'; skipped")
        return None
    role = norm_role(m["role"])
    if role is None:
        result.skip(f"{where}: unknown role {str(m['role'])[:40]!r}; skipped")
    return role


# --- the plain format -----------------------------------------------------------------------------------------


class PlainItems:
    """The plain format, one item at a time (state shared across a document; used by ``parse_jsonl`` and by
    streaming ingest). ``feed(where, m, result)`` appends to ``result.messages`` or skips with a warning."""

    fmt = "jsonl"

    def __init__(self, source: str | None = None):
        self.source = source

    def feed(self, where: str, m: Any, result: ParseResult) -> None:
        role = check_item(m, where, result)
        if role is None:
            return
        check_foreign(self.fmt, m, where, self.source)
        raw = m.get("content") if m.get("content") is not None else m.get("text")
        text = clean_text(content_text(raw))
        if blank(text):
            result.skip(f"{where}: empty content; skipped")
            return
        result.messages.append(Message(role=role, text=text, time=message_time(m), name=str_or_none(m.get("name"))))


def parse_jsonl(data: Any, source: str | None = None) -> ParseResult:
    """Plain transcripts: ``{"role", "content"}`` per item (``content`` a str or list of text parts, or a ``text``
    key instead; optional ``name`` and ``timestamp``/``time`` ISO strings -> ``Message.time``).

    ``data``: JSONL/JSON text, a path, bytes, or a loaded list/dict. Items without a role, with an unknown role
    or with empty content are skipped and counted. Raises TranscriptFormatError when ``data`` is not JSON/JSONL
    or holds no message list, or when an item carries OpenAI/Anthropic tool structure (``check_foreign``)."""
    items, system, result = start(data, "jsonl", source)
    if isinstance(system, str) and not blank(system):
        result.messages.append(Message(role="system", text=clean_text(system)))
    feeder = PlainItems(source)
    for where, m in items:
        feeder.feed(where, m, result)
    return result
