"""LoCoMo (``locomo10.json``): a list of samples, each a two-person conversation spread over many sessions."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from lantern import lazy_re
from lantern.archive.parse.jsonl import ParseResult, blank, load_json, read_source
from lantern.errors import TranscriptFormatError
from lantern.model import Message
from lantern.text.clean import clean_text

_SESSION = lazy_re.compile(r"session_(\d+)")
_DATE = lazy_re.compile(r"\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*", re.I)
_MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        1,
    )
}


def parse_locomo_date(s: Any) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> ``datetime(2023, 5, 8, 13, 56)``; None when absent or not in that shape."""
    m = _DATE.fullmatch(s) if isinstance(s, str) else None
    month = _MONTHS.get(m.group(5).lower()) if m else None
    if not m or not month:
        return None
    hour, minute = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0), int(m.group(2))
    try:
        return datetime(int(m.group(6)), month, int(m.group(4)), hour, minute)
    except ValueError:
        return None


def is_locomo_sample(obj: Any) -> bool:
    """True for a dict whose ``conversation`` is a dict holding ``session_1``."""
    return isinstance(obj, dict) and isinstance(obj.get("conversation"), dict) and "session_1" in obj["conversation"]


def parse_locomo(data: Any, source: str | None = None, sample: str | None = None) -> ParseResult:
    """LoCoMo samples -> one Message per dialogue utterance.

    ``data``: the JSON text, a path, bytes, a loaded list of samples or one sample dict
    ``{"sample_id", "conversation": {"speaker_a", "speaker_b", "session_<n>": [turn...], "session_<n>_date_time"}}``
    where a turn is ``{"speaker", "dia_id", "text"}`` plus optional ``img_url``/``blip_caption``. Every utterance is
    its own turn: ``role="user"``, ``name=speaker``, ``session=f"{sample_id}:session_{n}"``, ``time`` from the
    session date string, ``meta={"dia_id", "sample_id"}``; an image turn gets ``" [image: <blip_caption>]"``
    appended. Sessions come from the ``session_<n>`` keys in numeric order. ``sample`` selects one sample_id.
    Samples without a conversation and turns without text are skipped and counted. Raises
    TranscriptFormatError for non-JSON text, data that is not a sample list, or an unknown ``sample``."""
    result = ParseResult(format="locomo")
    data = read_source(data, source)
    if isinstance(data, str):
        data, result.skipped, result.warnings = load_json(data, source)
    samples = [data] if isinstance(data, dict) else data
    if not isinstance(samples, list):
        raise TranscriptFormatError("LoCoMo data must be a list of samples", source=source)
    found = False
    for i, s in enumerate(samples, 1):
        if not is_locomo_sample(s):
            result.skip(f"sample {i}: no 'conversation' with 'session_1'; skipped")
            continue
        sample_id = str(s.get("sample_id", f"sample-{i}"))
        if sample is not None and sample_id != sample:
            continue
        found = True
        conv = s["conversation"]
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)) and isinstance(conv[k], list))
        for n in numbers:
            when = parse_locomo_date(conv.get(f"session_{n}_date_time"))
            for j, turn in enumerate(conv[f"session_{n}"], 1):
                text = turn.get("text") if isinstance(turn, dict) else None
                if not isinstance(text, str):
                    result.skip(f"{sample_id} session_{n} turn {j}: missing field 'text'; skipped")
                    continue
                if isinstance(turn.get("blip_caption"), str):
                    text += f" [image: {turn['blip_caption']}]"
                elif turn.get("img_url"):
                    text += " [image]"
                if blank(text):
                    result.skip(f"{sample_id} session_{n} turn {j}: empty text; skipped")
                    continue
                speaker = turn.get("speaker")
                result.messages.append(
                    Message(
                        role="user",
                        text=clean_text(text),
                        name=clean_text(speaker) if isinstance(speaker, str) else None,
                        session=f"{sample_id}:session_{n}",
                        time=when,
                        meta={"dia_id": str(turn.get("dia_id", f"D{n}:{j}")), "sample_id": sample_id},
                    )
                )
    if sample is not None and not found:
        raise TranscriptFormatError(f"sample {sample!r} not found", field="sample_id", source=source)
    return result
