"""A generator of Claude Code session transcripts in the real record shape (Claude Code 2.1.x), for the tests of
rewound branches, compactions and parallel tool calls. Not a fixture file: each test builds the session it needs.

    s = Session()
    s.turn("Start redis for the cache.", "Started redis on 6379.", tools=[("Bash", {"command": "..."}, "ok")])
    s.rewind(1)            # Esc Esc in Claude Code: the next prompt continues from before prompt 1
    s.compact("summary")   # /compact: a compact_boundary (parentUuid null, logicalParentUuid) and the summary
    s.write(path)

What each record carries is what Claude Code writes (checked against the public reverse-engineered descriptions of
the format and the fixture tests/fixtures/claude_code_session.jsonl): the envelope (``parentUuid``, ``isSidechain``,
``userType``, ``cwd``, ``sessionId``, ``version``, ``gitBranch``, ``type``, ``uuid``, ``timestamp``); an assistant
reply streamed as one record per content block sharing ``message.id``, each chained to the one before; a tool
result as a ``user`` record whose ``parentUuid`` is the assistant record that made the call (so parallel calls
leave all but the last result off the one-parent chain); a ``system`` ``turn_duration`` record after each reply; a
``file-history-snapshot`` (no uuid) before each prompt. A rewind writes nothing: the next prompt's ``parentUuid``
is the record before the rewound prompt, and the abandoned records stay in the file.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

SID = "5d0c9e2a-41f7-4b8e-a3c6-9e1f2b7d4a60"
CWD = "/home/dev/shop"


class Session:
    def __init__(self, sid: str = SID, cwd: str = CWD, start: str = "2026-11-24T10:00:00"):
        self.sid, self.cwd = sid, cwd
        self.clock = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
        self.records: list[dict[str, Any]] = []
        self.parent: str | None = None  # the live leaf: the parent of the next chain record
        self.prompts: list[tuple[str, str | None]] = []  # (uuid of each prompt, its parent), in the order written
        self.n = 0

    # ------------------------------------------------------------------ records
    def _uuid(self) -> str:
        self.n += 1  # random-looking (Claude Code's are uuid4) and the same on every run
        return str(uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"{self.sid}/{self.n}"))

    def _tick(self, seconds: float = 2.0) -> str:
        self.clock += timedelta(seconds=seconds)
        return self.clock.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _envelope(self, kind: str, parent: str | None, **extra: Any) -> dict[str, Any]:
        rec = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.sid,
            "version": "2.1.30",
            "gitBranch": "main",
            "type": kind,
            "uuid": self._uuid(),
            "timestamp": self._tick(),
        }
        rec.update(extra)
        self.records.append(rec)
        return rec

    def prompt(self, text: str) -> str:
        """A user prompt chained to the live leaf (a file-history-snapshot first, as Claude Code writes)."""
        rec = self._envelope("user", self.parent, message={"role": "user", "content": text})
        self.records.insert(
            len(self.records) - 1,
            {"type": "file-history-snapshot", "messageId": rec["uuid"], "snapshot": {}, "isSnapshotUpdate": False},
        )
        self.prompts.append((rec["uuid"], self.parent))
        self.parent = rec["uuid"]
        return rec["uuid"]

    def reply(
        self,
        text: str | None = None,
        tools: list[tuple[str, dict, str]] = (),
        after: str | None = None,
        thinking: str | None = "Let me look at this.",
    ) -> None:
        """One assistant API message streamed as records (thinking, each tool_use), its tool results, then the
        ``after`` text as a second message (the reply once the tools ran). Several ``tools`` are parallel calls."""
        mid = f"msg_{self.n:04d}{len(self.records):04d}"
        blocks: list[dict] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking, "signature": "EqQBCkYIBhgCKkDx"})
        if text:
            blocks.append({"type": "text", "text": text})
        calls = []
        for name, args, _ in tools:
            call_id = f"toolu_{self.n:06d}{len(calls)}"
            blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
            calls.append(call_id)
        callers = {}
        for block in blocks:
            rec = self._envelope(
                "assistant",
                self.parent,
                requestId=f"req_{mid}",
                message={"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [block], "stop_reason": None, "usage": {"input_tokens": 4, "output_tokens": 30}},
            )  # fmt: skip
            self.parent = rec["uuid"]
            if block["type"] == "tool_use":
                callers[block["id"]] = rec["uuid"]
        for (_, _, result), call_id in zip(tools, calls):
            rec = self._envelope(
                "user",
                callers[call_id],  # Claude Code: a result's parent is the record that made its call
                message={
                    "role": "user",
                    "content": [{"tool_use_id": call_id, "type": "tool_result", "content": result}],
                },
                toolUseResult={"stdout": result, "stderr": "", "interrupted": False},
                sourceToolAssistantUUID=callers[call_id],
            )
            self.parent = rec["uuid"]  # the next record follows the last one written
        if after:
            rec = self._envelope(
                "assistant",
                self.parent,
                message={"id": mid + "b", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [{"type": "text", "text": after}], "stop_reason": "end_turn"},
            )  # fmt: skip
            self.parent = rec["uuid"]
        rec = self._envelope("system", self.parent, subtype="turn_duration", durationMs=8200, isMeta=False)
        del rec["userType"], rec["gitBranch"]

    def turn(self, prompt: str, text: str | None = None, **kw: Any) -> str:
        """A prompt and its reply; returns the prompt's uuid."""
        uuid = self.prompt(prompt)
        self.reply(text, **kw)
        return uuid

    def rewind(self, prompt_index: int) -> None:
        """Rewind to before prompt ``prompt_index`` (0-based, in the order prompts were written): nothing is written;
        the next record continues from that prompt's parent."""
        self.parent = self.prompts[prompt_index][1]

    def compact(self, summary: str, trigger: str = "manual") -> None:
        """/compact: a compact_boundary whose logicalParentUuid is the live leaf, then the summary record."""
        boundary = self._envelope(
            "system",
            None,
            logicalParentUuid=self.parent,
            subtype="compact_boundary",
            content="Conversation compacted",
            isMeta=False,
            compactMetadata={"trigger": trigger, "preTokens": 48210},
        )
        text = (
            "This session is being continued from a previous conversation that ran out of context. The conversation "
            f"is summarized below:\n{summary}"
        )
        rec = self._envelope(
            "user",
            boundary["uuid"],
            isCompactSummary=True,
            isVisibleInTranscriptOnly=True,
            message={"role": "user", "content": text},
        )
        self.parent = rec["uuid"]

    # ------------------------------------------------------------------ output
    def text(self, start: int = 0) -> str:
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in self.records[start:])

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path

    def append(self, path: Path, start: int) -> int:
        """Append the records from index ``start`` on to ``path`` (the transcript growing); returns the new end."""
        with open(path, "a", encoding="utf-8") as f:
            f.write(self.text(start))
        return len(self.records)


# ---------------------------------------------------------------------------------------------- the sessions
def cache_session(s: Session | None = None) -> Session:
    """Three turns about a shop's cache, where the user rewound the second: the abandoned attempt set the TTL to
    300 s in config/cache.py (with a parallel Read + Grep); the live one set 900 s."""
    s = s or Session()
    s.turn(
        "Start redis for the shop's cache.",
        "Starting redis 7 in docker.",
        tools=[("Bash", {"command": "docker run -d --name shop-cache -p 6380:6379 redis:7"}, "4f1c2b9e7a3d")],
        after="Redis is up on port 6380 (6379 is taken on this machine).",
    )
    s.turn(
        "Set the cache TTL for product pages.",
        "I'll read the cache config and look for the TTL.",
        tools=[
            ("Read", {"file_path": f"{CWD}/config/cache.py"}, "PRODUCT_TTL = 60\nCART_TTL = 30\n"),
            ("Grep", {"pattern": "PRODUCT_TTL", "path": CWD}, f"{CWD}/config/cache.py:1:PRODUCT_TTL = 60"),
        ],
        after="Set PRODUCT_TTL = 300 in config/cache.py: product pages are cached for 300 seconds.",
    )
    s.rewind(1)
    s.turn(
        "Set the cache TTL for product pages to 15 minutes, prices change rarely.",
        "Editing config/cache.py.",
        tools=[
            (
                "Edit",
                {
                    "file_path": f"{CWD}/config/cache.py",
                    "old_string": "PRODUCT_TTL = 60",
                    "new_string": "PRODUCT_TTL = 900",
                },
                "The file has been updated.",
            )
        ],  # fmt: skip
        after="Set PRODUCT_TTL = 900 in config/cache.py: product pages are cached for 900 seconds (15 minutes).",
    )
    return s
