"""Lantern: archive every turn of an LLM conversation, recover what compaction lost (zero LLM calls).

    from lantern import Lantern
    with Lantern("memory.db") as lantern:
        lantern.archive([{"role": "user", "content": "the db listens on 5433"}], session="s1")
        print(lantern.recover("which port does the database use?").text)
"""

from .api import Lantern
from .config import Config
from .errors import EmbedderMismatchError, LanternError, ModelNotFoundError, TranscriptFormatError
from .model import ArchiveResult, Candidate, Entry, Hit, Message, RecoveredEntry, Recovery, Tag, ToolCall, ToolResult, Turn

__version__ = "0.1.0"

__all__ = [
    "ArchiveResult",
    "Candidate",
    "Config",
    "EmbedderMismatchError",
    "Entry",
    "Hit",
    "Lantern",
    "LanternError",
    "Message",
    "ModelNotFoundError",
    "RecoveredEntry",
    "Recovery",
    "Tag",
    "ToolCall",
    "ToolResult",
    "TranscriptFormatError",
    "Turn",
]
