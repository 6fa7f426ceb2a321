"""The assistant reply inside a streamed chat answer, assembled as the proxy relays it (integrations/forward.py):
``_SSEEvents`` parses the ``data:`` events of a Server-Sent Events byte stream fed in arbitrary chunks (linear in
the stream's size); ``_SSEText`` assembles an OpenAI chat-completions stream, ``_AnthropicSSE`` an Anthropic
Messages stream, each into the message the non-streamed reply would hold."""

from __future__ import annotations

import re
from typing import Any

from lantern import lazy_re
from lantern.integrations.schemas import Message
from lantern.llm import parse_answer


class _SSEText:
    """Accumulates the assistant reply of an OpenAI chat-completions SSE stream: the text
    (``choices[0].delta.content``) and the tool calls, whose ``delta.tool_calls[i]`` pieces (``index``, then ``id``,
    ``function.name`` and ``function.arguments`` in fragments) are assembled by ``index``. ``reply`` is the assembled
    assistant message, as the non-streamed ``choices[0].message`` would be; None when the stream held neither."""

    def __init__(self) -> None:
        self.sse = _SSEEvents()
        self.parts: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}

    def feed(self, chunk: bytes) -> None:
        for event in self.sse.events(chunk):
            choices = event.get("choices")
            delta = (
                choices[0].get("delta")
                if isinstance(choices, list) and choices and isinstance(choices[0], dict)
                else None
            )
            if not isinstance(delta, dict):  # a keep-alive or another shape: skip it
                continue
            if isinstance(delta.get("content"), str):
                self.parts.append(delta["content"])
            if isinstance(delta.get("tool_calls"), list):
                for piece in delta["tool_calls"]:
                    self._add_call_piece(piece)

    def _add_call_piece(self, piece: Any) -> None:
        if not isinstance(piece, dict):
            return
        index = piece.get("index") if isinstance(piece.get("index"), int) else len(self.calls)
        call = self.calls.setdefault(index, {"id": None, "type": "function", "name": [], "arguments": []})
        if isinstance(piece.get("id"), str):
            call["id"] = piece["id"]
        if isinstance(piece.get("type"), str):
            call["type"] = piece["type"]
        fn = piece.get("function") if isinstance(piece.get("function"), dict) else {}
        if isinstance(fn.get("name"), str):
            call["name"].append(fn["name"])
        if isinstance(fn.get("arguments"), str):
            call["arguments"].append(fn["arguments"])

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def reply(self) -> Message | None:
        calls = [
            {
                "id": c["id"],
                "type": c["type"],
                "function": {"name": "".join(c["name"]), "arguments": "".join(c["arguments"])},
            }
            for _, c in sorted(self.calls.items())
        ]
        if not self.parts and not calls:
            return None
        reply: Message = {"role": "assistant", "content": self.text or None}
        if calls:
            reply["tool_calls"] = calls
        return reply


_LINE_END = lazy_re.compile(rb"[\r\n]")


class _SSEEvents:
    """The ``data:`` payloads of an SSE byte stream, as JSON objects, fed in arbitrary chunks. Lines end with LF,
    CRLF or CR (the SSE grammar allows all three). Linear in the stream's size: each chunk is scanned once, and a
    line longer than ``MAX_LINE_BYTES`` (not SSE, or one giant event) is dropped instead of buffered (buffered, a
    stream without newlines would be re-copied on every chunk: quadratic, on the event loop)."""

    MAX_LINE_BYTES = 16 << 20  # ours: far above any chat-completion delta

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.overflow = False  # inside a line over MAX_LINE_BYTES: skip to its end

    def events(self, chunk: bytes) -> list[dict[str, Any]]:
        if not _LINE_END.search(chunk):  # no line ends: extend the buffer, nothing to parse yet
            if not self.overflow:
                self.buffer += chunk
                if len(self.buffer) > self.MAX_LINE_BYTES:
                    self.overflow, self.buffer = True, bytearray()
            return []
        data = bytes(self.buffer) + chunk  # once per chunk with a line end; the buffer is only the unfinished line
        held = b""
        if data.endswith(b"\r"):  # maybe the first half of a CRLF split over two chunks
            data, held = data[:-1], b"\r"
        lines = re.split(rb"\r\n|\r|\n", data)
        tail = lines.pop() + held
        out = []
        for line in lines:
            if self.overflow:
                self.overflow = False  # the end of the dropped line
                continue
            event = self._event(line)
            if event is not None:
                out.append(event)
        if self.overflow or len(tail) > self.MAX_LINE_BYTES:
            self.overflow, tail = True, b""
        self.buffer = bytearray(tail)
        return out

    @staticmethod
    def _event(line: bytes) -> dict[str, Any] | None:
        line = line.strip()
        if not line.startswith(b"data:"):
            return None
        data = line[5:].strip()
        if not data or data == b"[DONE]":
            return None
        try:
            event = parse_answer(data, max_bytes=_SSEEvents.MAX_LINE_BYTES)
        except ValueError:
            return None
        return event if isinstance(event, dict) else None


class _AnthropicSSE:
    """Assembles the assistant message of an Anthropic Messages SSE stream: ``content_block_start`` opens block
    ``index`` (text, or tool_use with id and name), ``content_block_delta`` adds ``text_delta.text`` or
    ``input_json_delta.partial_json``. ``reply``: ``{"role": "assistant", "content": [blocks]}`` (tool_use
    ``input`` parsed from the joined JSON, kept as a string when it does not parse); None when empty."""

    def __init__(self) -> None:
        self.sse = _SSEEvents()
        self.blocks: dict[int, dict[str, Any]] = {}

    def feed(self, chunk: bytes) -> None:
        for event in self.sse.events(chunk):
            index = event.get("index")
            if not isinstance(index, int):
                continue
            if event.get("type") == "content_block_start" and isinstance(event.get("content_block"), dict):
                start = event["content_block"]
                self.blocks[index] = {
                    "type": start.get("type"),
                    "id": start.get("id"),
                    "name": start.get("name"),
                    "parts": [start["text"]] if isinstance(start.get("text"), str) else [],
                }
            elif event.get("type") == "content_block_delta" and isinstance(event.get("delta"), dict):
                delta = event["delta"]
                block = self.blocks.setdefault(index, {"type": "text", "id": None, "name": None, "parts": []})
                piece = delta.get("text") if delta.get("type") == "text_delta" else delta.get("partial_json")
                if isinstance(piece, str):
                    block["parts"].append(piece)

    @property
    def reply(self) -> Message | None:
        content = []
        for _, b in sorted(self.blocks.items()):
            joined = "".join(b["parts"])
            if b["type"] == "tool_use":
                try:
                    args = parse_answer(joined) if joined else {}
                except ValueError:
                    args = joined
                content.append({"type": "tool_use", "id": b["id"], "name": b["name"] or "", "input": args})
            elif b["type"] == "text" and joined:
                content.append({"type": "text", "text": joined})
        return {"role": "assistant", "content": content} if content else None
