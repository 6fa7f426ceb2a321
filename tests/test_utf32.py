"""UTF-32 transcripts (issue 20, item 5): detected, with a BOM (``FF FE 00 00`` starts like UTF-16-LE's ``FF FE``)
or without one, for a JSON document and a JSONL file alike; binary data with NUL bytes is still refused."""

from __future__ import annotations

import json
import os

import pytest

from lantern import Lantern, TranscriptFormatError
from lantern.archive.parse import parse
from lantern.archive.parse.jsonl import utf32_without_bom

MESSAGES = [
    {"role": "user", "content": "Which port? 端口是多少 😀"},
    {"role": "assistant", "content": "Postgres listens on 5433."},
]
TEXTS = {
    "json": json.dumps(MESSAGES, ensure_ascii=False),
    "jsonl": "\n".join(json.dumps(m, ensure_ascii=False) for m in MESSAGES) + "\n",
}


@pytest.mark.parametrize("encoding", ["utf-32", "utf-32-le", "utf-32-be", "utf-16", "utf-16-be", "utf-8-sig"])
@pytest.mark.parametrize("shape", sorted(TEXTS))
def test_utf32_and_utf16_files_parse_to_the_same_messages(tmp_path, encoding, shape):
    path = tmp_path / f"chat.{shape}"
    path.write_bytes(TEXTS[shape].encode(encoding))
    assert [m.text for m in parse(path).messages] == [m["content"] for m in MESSAGES]


def test_utf32_file_is_ingested(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_bytes(TEXTS["jsonl"].encode("utf-32"))
    with Lantern(tmp_path / "u.db") as lt:
        r = lt.ingest(path)
        assert r.added == 1 and not r.warnings
        assert "5433" in lt.recover("postgres port").text


def test_binary_with_nul_bytes_is_still_refused(tmp_path):
    for i, data in enumerate(
        (b"\x00" * 4096, os.urandom(4096) + b"\x00\x00\x00\x00", b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0d")
    ):
        path = tmp_path / f"blob{i}.json"
        path.write_bytes(data)
        with pytest.raises(TranscriptFormatError):
            parse(path)
    assert utf32_without_bom(b"\x00" * 64) is None
    assert utf32_without_bom("{}".encode("utf-16-le")) is None
    assert utf32_without_bom("{}".encode("utf-32-le")) == "utf-32-le"
