"""Edge cases of the default embedder "routed" (embed.RoutedE5Embedder) and its semantic_e5 signal on the real
store with the real models: mixed stores, odd inputs, reindex and import between embedders."""

from __future__ import annotations

import json

import pytest
from tests.test_routed import EN_CONVERSATION, ZH_CONVERSATION, _archive

from lantern import EmbedderMismatchError, Lantern
from lantern.config import Config
from lantern.errors import ExportFormatError

pytestmark = pytest.mark.real_models  # the routed embedders and their blocks: the real models


def test_semantic_e5_ranks_only_the_entries_that_have_an_e5_part(tmp_path):
    """An English entry whose e5 part is not filled yet (archive/fill.py; the fill on recovery is off here) has
    none (cosine exactly 0 to any e5 query vector): it must get no semantic_e5 rank; ranked, the order of those
    ties was arbitrary and still earned RRF votes."""
    with Lantern(tmp_path / "mixed.db", config=Config(fill_on_recover=0)) as lt:
        _archive(lt, ZH_CONVERSATION[:2], session="zh")
        _archive(lt, EN_CONVERSATION, session="en")
        for query in ("which port does the database listen on?", "数据库的端口是多少？"):
            rec = lt.explain(query)
            e5_ranked = [c for c in rec.candidates if "semantic_e5" in c.ranks]
            assert e5_ranked and all(c.entry.session == "zh" for c in e5_ranked), query
            assert all(c.scores["semantic_e5"] != 0.0 for c in e5_ranked)
            assert [c.ranks["semantic_e5"] for c in sorted(e5_ranked, key=lambda c: c.ranks["semantic_e5"])] == list(
                range(1, len(e5_ranked) + 1)
            )


def test_an_export_of_another_embedder_names_that_embedder_for_a_new_database(tmp_path):
    """The mismatch error tells how to import into a database of the export's embedder: its CLI name (e5,
    routed-v1, ...), not a fixed list that predates them; the database it names then takes the vectors as they are."""
    out = tmp_path / "e5.jsonl"
    with Lantern(tmp_path / "e5.db", "e5") as lt:
        _archive(lt, ZH_CONVERSATION[:2])
        lt.export(out)
    with Lantern(tmp_path / "routed.db") as lt:
        with pytest.raises(EmbedderMismatchError, match="--embedder e5 --db NEW import"):
            lt.import_(out)
        assert lt.store.count() == 0
    with Lantern(tmp_path / "new.db", "e5") as lt:
        assert lt.import_(out).added == 2


def test_an_import_with_a_lone_surrogate_is_refused_by_line_and_field(tmp_path):
    """A JSON escape "\\ud800" in a record's text decodes to a lone surrogate, which neither SQLite nor the
    models can encode: the line is refused as a bad field (as a NUL is), not a bare UnicodeEncodeError mid-batch."""
    out = tmp_path / "zh.jsonl"
    with Lantern(tmp_path / "zh.db") as lt:
        _archive(lt, ZH_CONVERSATION[:1])
        lt.export(out, embeddings=False)
    header, record = out.read_text().splitlines()
    rec = json.loads(record)
    rec["summary"], rec["text"] = "数据库\ud800端口", "数据库\ud800端口"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(header + "\n" + json.dumps(rec) + "\n")
    with Lantern(tmp_path / "new.db") as lt:
        with pytest.raises(ExportFormatError, match="surrogate") as err:
            lt.import_(bad, embeddings=False)
        assert err.value.line == 2 and lt.store.count() == 0
