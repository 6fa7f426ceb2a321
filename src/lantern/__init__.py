"""Lantern: archive every turn of an LLM conversation, recover what compaction lost (zero LLM calls).

from lantern import Lantern
with Lantern("memory.db") as lantern:
    lantern.archive([{"role": "user", "content": "the db listens on 5433"}], session="s1")
    print(lantern.recover("which port does the database use?").text)
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~10 ms at a hook's start)

__version__ = "0.1.0"

# every public name loads on first use, so a process that needs none of them (a Claude Code hook that reaches the
# warm daemon, or whose prompt needs no recovery; ``lantern --help``) starts in tens of milliseconds: ``Lantern``
# pulls numpy, the store and the pipeline, and even ``lantern.config`` compiles regular expressions at import
_WHERE = {
    "Lantern": "lantern.api",
    "Config": "lantern.config",
    **dict.fromkeys(
        (
            "DatabaseUnavailableError",
            "EmbedderMismatchError",
            "LanternError",
            "ModelNotFoundError",
            "StoreVersionError",
            "TranscriptFormatError",
            "UnsupportedBackendError",
        ),
        "lantern.errors",
    ),
    **dict.fromkeys(
        (
            "ArchiveResult",
            "Candidate",
            "Entry",
            "Hit",
            "Message",
            "RecoveredEntry",
            "Recovery",
            "Tag",
            "ToolCall",
            "ToolResult",
            "Turn",
        ),
        "lantern.model",
    ),
}

if TYPE_CHECKING:
    from lantern.api import Lantern
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


def __getattr__(name: str):
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'lantern' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


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
