"""Columns of the SQLite ``entries`` row stored in fewer bytes than their values (migration m009; issue #23):
``summary`` and ``tags`` deflated, ``content_hash`` as its 32-byte SHA-256 digest.

A value is stored as a BLOB holding its UTF-8 bytes compressed with raw deflate (RFC 1951; zlib ``wbits=-15``,
level 9) when that is shorter, else as the TEXT itself: SQLite keeps the storage class of each value (a TEXT column
stores a BLOB as given), so ``unpack`` tells the two apart by type and a row written before m009 reads the same.
At 10,000 real aider turns the ``entries`` table takes 3,512 -> 2,873 bytes per turn and the content hash's UNIQUE
index 74 -> 41 (BENCHMARKS.md §18, ``bench_bytes.py``). ``hints`` stays plain JSON: the in-process index reads it
for every row at each cold load (store/index.py), while summary and tags are read only for the entries a recovery
ranks, packs or shows.
"""

from __future__ import annotations

import zlib

from lantern import lazy_re

PACKED_COLUMNS = ("summary", "tags")  # the entries columns stored through pack / unpack
# ours: the most a stored value inflates to. A summary holds at most 1,200 characters and the tags come from at most
# 128,000 characters of a turn (text/tags.py tag_window), so a packed value is well under 4 MiB; a BLOB that would
# inflate past this (a deflate bomb in a database from elsewhere: ``lantern copy``'s source) is refused unread
MAX_UNPACKED_BYTES = 16 << 20
_WBITS = -15  # raw deflate: no zlib header (2 bytes) or Adler-32 trailer (4 bytes) per value
_LEVEL = 9


def pack(value: str | bytes) -> str | bytes:
    """The stored form of a text value: its UTF-8 bytes deflated (bytes) when shorter than them, else ``value``
    itself (str). A value already packed (bytes) is returned as it is, so packing twice changes nothing. Raises
    UnicodeEncodeError for a str holding a lone surrogate (as SQLite's binding does for such a str)."""
    if isinstance(value, bytes):
        return value
    raw = value.encode("utf-8")
    if len(raw) < 8:  # deflate's block header and end code take ~2 bytes: nothing this short gets shorter
        return value
    packer = zlib.compressobj(_LEVEL, zlib.DEFLATED, _WBITS)
    deflated = packer.compress(raw) + packer.flush()
    return deflated if len(deflated) < len(raw) else value


def unpack(value: str | bytes) -> str:
    """The text of a stored value: a BLOB inflated and decoded as UTF-8, a str as it is. Raises zlib.error or
    UnicodeDecodeError for a BLOB that ``pack`` did not write (a damaged row; one that inflates past
    ``MAX_UNPACKED_BYTES`` or does not end where a deflate stream ends), having inflated at most one byte more."""
    if isinstance(value, bytes):
        inflater = zlib.decompressobj(_WBITS)
        raw = inflater.decompress(value, MAX_UNPACKED_BYTES + 1)
        if len(raw) > MAX_UNPACKED_BYTES:
            raise zlib.error(f"a packed value inflates past {MAX_UNPACKED_BYTES} bytes")
        if not inflater.eof:
            raise zlib.error("a packed value ends inside its deflate stream")
        return raw.decode("utf-8")
    return value


_HEX_DIGEST = lazy_re.compile(r"[0-9a-f]{64}")


def pack_hash(content_hash: str | bytes) -> str | bytes:
    """The stored form of a content hash (``model.content_hash``: 64 lowercase hex characters): its 32-byte digest.
    Any other value (bytes already, or a str that is not such a hash) as it is, so the UNIQUE index still compares
    like with like and packing twice changes nothing."""
    if isinstance(content_hash, str) and _HEX_DIGEST.fullmatch(content_hash):
        return bytes.fromhex(content_hash)
    return content_hash


def unpack_hash(stored: str | bytes) -> str:
    """The content hash of a stored value: a digest as 64 lowercase hex characters, a str as it is."""
    return stored.hex() if isinstance(stored, bytes) else stored
