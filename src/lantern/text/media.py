"""Images and inline binary data in transcripts -> short text placeholders (ours; the paper does not specify).

An image is archived as ``[image: <caption>]`` (its caption, alt text or title; else its http(s) URL) or
``[image]``, never as its bytes: a base64 image would flood the index (FTS5 tokens, tags, summary) with noise.
``scrub_inline_data`` removes base64 that arrives inside plain text (data URLs, markdown images, bare blobs).
"""

from __future__ import annotations

import re
from typing import Any

from lantern import lazy_re

CAPTION_MAX_CHARS = 300  # a caption longer than this is cut (ours)
BLOB_MIN_CHARS = 1024  # an unbroken base64 run this long is data, not text (ours)

_CAPTION_KEYS = ("caption", "alt", "alt_text", "title", "description", "blip_caption", "name")
_MD_IMAGE = lazy_re.compile(r"!\[([^\]\n]{0,300})\]\(\s*data:[^)\s]*\)")
_DATA_URL = lazy_re.compile(r"data:([\w.+-]+/[\w.+-]+)?(?:;[\w.+=-]+)*;base64,[A-Za-z0-9+/_=-]*")
# starts only at a run start: linear
_BLOB = lazy_re.compile(rf"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{{{BLOB_MIN_CHARS},}}={{0,2}}")
# base64 wrapped in lines (``base64`` wraps at 76 columns, MIME at 76, PEM at 64): 8+ full lines of one width
# between 40 and 200 characters, then a shorter last line; replaced when at least BLOB_MIN_CHARS in all (ours)
_WRAPPED = lazy_re.compile(r"(?m)^(?:[A-Za-z0-9+/]{40,200}\r?\n){8,}[A-Za-z0-9+/]*={0,2}$")
_SPACE = lazy_re.compile(r"\s+")


def _caption(value: Any) -> str | None:
    if isinstance(value, str) and value.strip() and not value.lstrip().startswith("data:"):
        text = _SPACE.sub(" ", value).strip()
        return text[:CAPTION_MAX_CHARS] + ("…" if len(text) > CAPTION_MAX_CHARS else "")
    return None


def _url(part: dict) -> str | None:
    for holder in (part, part.get("image_url"), part.get("source")):
        if isinstance(holder, str):
            url = holder
        elif isinstance(holder, dict) and isinstance(holder.get("url"), str):
            url = holder["url"]
        else:
            continue
        if url.startswith(("http://", "https://")) and len(url) <= 2048:
            return url
    return None


def image_placeholder(part: Any) -> str:
    """An image part/block (OpenAI ``image_url``, Responses/Codex ``input_image``, Anthropic ``image``) ->
    ``[image: caption]`` from its ``caption``/``alt``/``alt_text``/``title``/``description`` (also inside
    ``image_url``), else ``[image: <http(s) url>]``, else ``[image]``. Never its data."""
    if isinstance(part, dict):
        for holder in (part, part.get("image_url") if isinstance(part.get("image_url"), dict) else {}):
            for key in _CAPTION_KEYS:
                caption = _caption(holder.get(key))
                if caption:
                    return f"[image: {caption}]"
        url = _url(part)
        if url:
            return f"[image: {url}]"
    return "[image]"


def _small(m: re.Match) -> bool:
    """A data URL whose payload is under BLOB_MIN_CHARS is kept verbatim (a tiny icon, or text that only looks
    like one; the redaction look-alike corpus holds such strings)."""
    payload = m.group(0).rpartition("base64,")[2]
    return len(payload) < BLOB_MIN_CHARS


def _md_image(m: re.Match) -> str:
    if _small(m):
        return m.group(0)
    alt = _caption(m.group(1))
    return f"[image: {alt}]" if alt else "[image]"


def _data_url(m: re.Match) -> str:
    if _small(m):
        return m.group(0)
    mime = m.group(1) or ""
    return "[image]" if mime.startswith("image/") else f"[data: {mime}]" if mime else "[data]"


def scrub_inline_data(s: str) -> str:
    """``s`` with inline binary data replaced: markdown ``![alt](data:...)`` -> ``[image: alt]``, a base64 data
    URL -> ``[image]`` (or ``[data: <mime>]``), each when its payload has at least 1,024 characters; and any unbroken
    base64-alphabet run of at least 1,024
    characters drawn from at least 16 distinct symbols -> ``[base64 data: N chars]``, also when it is wrapped in lines
    of one width (``base64``, MIME, PEM; ``_wrapped``). Text without such data is returned unchanged (same object)."""
    if "base64," in s:
        s = _MD_IMAGE.sub(_md_image, s)
        s = _DATA_URL.sub(_data_url, s)
    if len(s) >= BLOB_MIN_CHARS:
        s = _BLOB.sub(_blob, s)
        if "\n" in s:
            s = _WRAPPED.sub(_wrapped, s)
    return s


def _wrapped(m: re.Match) -> str:
    """A run of base64 lines -> ``[base64 data: N chars]`` when its full lines share one width, the last is no
    longer, and it holds at least BLOB_MIN_CHARS characters drawn from at least 16 symbols; else kept."""
    lines = m.group(0).replace("\r", "").split("\n")
    width = len(lines[0])
    if any(len(x) != width for x in lines[:-1]) or len(lines[-1]) > width:
        return m.group(0)
    run = "".join(lines)
    if len(run) < BLOB_MIN_CHARS or len(set(run[:4096])) < 16:
        return m.group(0)
    return f"[base64 data: {len(run)} chars]"


def _blob(m: re.Match) -> str:
    run = m.group(0)
    if len(set(run[:4096])) < 16:  # "-----..." or "aaaa...": a long run of few symbols is text, not data
        return run
    return f"[base64 data: {len(run)} chars]"
