"""Lantern: archive every turn of an LLM conversation, recover what compaction lost (zero LLM calls).

from lantern import Lantern
with Lantern("memory.db") as lantern:
    lantern.archive([{"role": "user", "content": "the db listens on 5433"}], session="s1")
    print(lantern.recover("which port does the database use?").text)
"""

from lantern.config import Config
from lantern.errors import (
    DatabaseUnavailableError,
    EmbedderMismatchError,
    LanternError,
    ModelNotFoundError,
    StoreVersionError,
    TranscriptFormatError,
    UnsupportedBackendError,
)
from lantern.model import (
    ArchiveResult,
    Candidate,
    Entry,
    Hit,
    Message,
    RecoveredEntry,
    Recovery,
    Tag,
    ToolCall,
    ToolResult,
    Turn,
)

__version__ = "0.1.0"


def __getattr__(name: str):
    # ``Lantern`` (numpy, the store, the pipeline) loads on first use, so a process that never needs it (a Claude
    # Code hook whose prompt needs no recovery, ``lantern --help``) starts in tens of milliseconds.
    if name == "Lantern":
        from lantern.api import Lantern

        return Lantern
    raise AttributeError(f"module 'lantern' has no attribute {name!r}")


__all__ = [
    "ArchiveResult",
    "Candidate",
    "Config",
    "DatabaseUnavailableError",
    "EmbedderMismatchError",
    "Entry",
    "Hit",
    "Lantern",
    "LanternError",
    "Message",
    "ModelNotFoundError",
    "RecoveredEntry",
    "Recovery",
    "StoreVersionError",
    "Tag",
    "ToolCall",
    "ToolResult",
    "TranscriptFormatError",
    "UnsupportedBackendError",
    "Turn",
]
