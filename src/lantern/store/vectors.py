"""Vectors as stored: int8 per block, all-zero blocks left out (docs/architecture.md §2.9).

An embedding of ``dim`` float32 dims is made of disjoint blocks ``(start, stop)`` (one block for a single model; the
routed embedders' MiniLM, USE and e5 parts: embed/__init__.py ``blocks``). Each block a vector uses is stored as
its float32 scale and its values quantized to int8 (symmetric scalar quantization: ``q = round(v / s)``,
``s = max|v| / 127``); a block that is all zeros (the USE part of an English turn, the e5 part not computed yet)
takes no bytes. A 384-d block is 388 bytes instead of 1,536; the routed embedder's 1,280-d row of an English turn
388 bytes instead of 5,120. Decoding multiplies back (``q * s``): cosines move by about 1e-3, norms by about 1e-3,
and encoding a decoded vector gives the same bytes again (``max |q| = 127``), so an export imported elsewhere is
stored bit for bit as it was.

Blob layout: ``b"\\x01"`` (format), one byte per block (1: present), then per present block: scale (float32 LE)
and its int8 values. A blob of exactly ``4 * dim`` bytes is a raw float32 vector (stores written before this
format); both decode. A blob of any other length (cut short by a disk fault, written by another tool) fits neither:
``decodable`` says so, and ``decode`` / ``decode_many`` raise ValueError for it instead of misreading its bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported by the functions that read or write a vector: FORMAT is read without it
    import numpy as np

FORMAT = 1
Blocks = Sequence[tuple[int, int]]

__all__ = ["FORMAT", "decodable", "decode", "decode_many", "distinct", "encode", "present"]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of the 1-d array ``values``, ascending, in its dtype: ``np.unique(values)`` without the
    masked-array check numpy 2 makes there, which imports ``numpy.ma`` (~100 ms of a cold hook process on a
    loaded machine, BENCHMARKS.md §24). O(n log n)."""
    import numpy as np

    ordered = np.sort(np.asarray(values).ravel())
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def encode(vector: np.ndarray, blocks: Blocks) -> bytes:
    """The stored form of a float32 ``vector`` (dim,) cut into ``blocks``."""
    import numpy as np

    v = np.asarray(vector, np.float32)
    flags = bytearray()
    parts = []
    for start, stop in blocks:
        part = v[start:stop]
        peak = float(np.max(np.abs(part))) if len(part) else 0.0
        if peak == 0.0:
            flags.append(0)
            continue
        flags.append(1)
        scale = peak / 127.0
        parts.append(np.float32(scale).tobytes() + np.rint(part / scale).astype(np.int8).tobytes())
    return bytes([FORMAT]) + bytes(flags) + b"".join(parts)


def present(blob: bytes, blocks: Blocks) -> list[bool]:
    """Per block, whether ``blob`` holds it (nonzero)."""
    import numpy as np

    if _is_compact(blob, blocks):
        return [f == 1 for f in blob[1 : 1 + len(blocks)]]
    raw = np.frombuffer(blob, "<f4")
    return [bool(raw[a:b].any()) for a, b in blocks]


def decodable(blob: object, dim: int, blocks: Blocks) -> bool:
    """Whether ``blob`` is a stored vector of ``dim`` dims cut into ``blocks``: bytes in the int8 layout (its
    format byte, a 0/1 flag per block and exactly the bytes those flags imply) or exactly ``4 * dim`` raw float32
    bytes. Anything else (another length, a text value) cannot be decoded."""
    if not isinstance(blob, (bytes, bytearray)):
        return False
    return _is_compact(blob, blocks) or len(blob) == 4 * dim


def _check(blobs: Sequence[bytes], dim: int, blocks: Blocks) -> None:
    """Raise ValueError naming how many of ``blobs`` are not ``decodable`` and the first one's length."""
    bad = [i for i, blob in enumerate(blobs) if not decodable(blob, dim, blocks)]
    if bad:
        i = bad[0]
        blob = blobs[i]
        size = f"{len(blob)} bytes" if isinstance(blob, (bytes, bytearray)) else f"a {type(blob).__name__} value"
        raise ValueError(
            f"{len(bad)} stored vector(s) cannot be decoded (the first, position {i}: {size}; expected the int8 "
            f"layout of blocks {list(blocks)} or {4 * dim} raw float32 bytes)"
        )


def decode(blob: bytes, dim: int, blocks: Blocks) -> np.ndarray:
    """The float32 vector (dim,) of a stored ``blob`` (either layout); absent blocks are zeros. Raises ValueError
    for a blob ``decodable`` refuses."""
    import numpy as np

    _check([blob], dim, blocks)
    if not _is_compact(blob, blocks):
        return np.frombuffer(blob, "<f4").copy()
    out = np.zeros(dim, np.float32)
    _decode_into(out, blob, blocks)
    return out


def decode_many(blobs: Sequence[bytes], dim: int, blocks: Blocks) -> np.ndarray:
    """float32 (len(blobs), dim): ``decode`` of each blob, vectorized over blobs that share a layout. Raises
    ValueError when a blob is not ``decodable`` (callers that can go on without it filter first)."""
    import numpy as np

    out = np.zeros((len(blobs), dim), np.float32)
    if not blobs:
        return out
    groups: dict[bytes, list[int]] = {}
    raw = 4 * dim
    for i, blob in enumerate(blobs):
        if _is_compact(blob, blocks):
            key = blob[: 1 + len(blocks)]
        elif isinstance(blob, (bytes, bytearray)) and len(blob) == raw:
            key = b"raw"
        else:
            _check(blobs, dim, blocks)
        groups.setdefault(key, []).append(i)
    for key, rows in groups.items():
        if key == b"raw":
            out[rows] = np.frombuffer(b"".join(blobs[i] for i in rows), "<f4").reshape(len(rows), dim)
            continue
        used = [b for b, flag in zip(blocks, key[1:]) if flag == 1]
        width = sum(4 + (b - a) for a, b in used)
        body = np.frombuffer(b"".join(blobs[i][len(key) :] for i in rows), np.uint8).reshape(len(rows), width)
        offset = 0
        for a, b in used:
            scale = body[:, offset : offset + 4].copy().view("<f4")[:, 0]
            q = body[:, offset + 4 : offset + 4 + b - a].view(np.int8).astype(np.float32)
            out[rows, a:b] = q * scale[:, None]
            offset += 4 + b - a
    return out


def _decode_into(out: np.ndarray, blob: bytes, blocks: Blocks) -> None:
    import numpy as np

    flags = blob[1 : 1 + len(blocks)]
    offset = 1 + len(blocks)
    for (a, b), flag in zip(blocks, flags):
        if flag != 1:
            continue
        scale = np.frombuffer(blob, "<f4", 1, offset)[0]
        q = np.frombuffer(blob, np.int8, b - a, offset + 4).astype(np.float32)
        out[a:b] = q * scale
        offset += 4 + b - a


def _is_compact(blob: bytes, blocks: Blocks) -> bool:
    """Whether ``blob`` is in the int8 layout: its format byte, flags of 0/1 and the exact length they imply (a raw
    float32 blob is 4 bytes per dim, about four times any int8 layout of the same blocks)."""
    if not blob or blob[0] != FORMAT or len(blob) < 1 + len(blocks):
        return False
    flags = blob[1 : 1 + len(blocks)]
    if any(f not in (0, 1) for f in flags):
        return False
    return len(blob) == 1 + len(blocks) + sum(4 + (b - a) for (a, b), f in zip(blocks, flags) if f == 1)
