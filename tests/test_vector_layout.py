"""meta ``vector_blocks`` (store/sqlite.py ``check_embedder``): the block layout the int8 vectors are stored in
(store/vectors.py). A damaged or hand-edited value is refused on open, before anything is written by it."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from lantern.errors import LanternError
from lantern.store.sqlite import Store
from test_fulltext_index import new_entry

_LAYOUT_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 9) | st.floats(0, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=examples(80), deadline=None)
@given(
    value=_LAYOUT_JSON.map(json.dumps)
    | st.text(max_size=12).filter(bool)
    | st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=3).map(json.dumps)
)
def test_a_damaged_vector_layout_is_refused_or_reads_back_what_was_written(value):
    """Any value of meta ``vector_blocks`` (damaged, hand-edited): opening raises LanternError naming it and nothing
    is written, or the layout holds every dim, so a vector written by it reads back (it wrote rows that dropped
    dims, or that no later handle could decode, and read them with numpy's reshape errors)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/a.db"
        store = Store(path)
        store.check_embedder("test", 4)
        with store.transaction() as db:
            db.execute("UPDATE meta SET value = ? WHERE key = 'vector_blocks'", (value,))
        store.close()
        store = Store(path)
        try:
            store.check_embedder("test", 4)
        except LanternError as e:
            assert "vector_blocks" in str(e) and store.count() == 0
            store.close()
            return
        vec = np.array([0.5, -0.25, 0.125, 1.0], np.float32)
        store.add([new_entry("s", "a turn", "a turn")], vec[None, :])
        blob = store.db.execute("SELECT vector FROM embeddings").fetchone()[0]
        assert np.allclose(store.decode_vectors([blob])[0], vec, atol=0.01)
        store.close()
