"""What a cold process loads for a recovery that it does not need (issue 37, item 3): numpy 2's ``np.unique`` imports
``numpy.ma`` for a masked-array check (~100 ms of a cold hook on a loaded machine, BENCHMARKS.md §24); the read
path's distinct positions come from ``store.vectors.distinct``, the same arrays without it. A new process that
archives and recovers (every signal, the keyword signal's idf weights, the neighbour window) never imports it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from budget import examples
from lantern.store.vectors import distinct

REPO = Path(__file__).resolve().parents[1]


@settings(max_examples=examples(200), deadline=None)
@given(
    values=hnp.arrays(
        dtype=st.sampled_from([np.int64, np.int32, np.intp]),
        shape=st.integers(0, 300),
        elements=st.integers(-50, 5000),
    )
)
def test_distinct_is_np_unique(values):
    got, want = distinct(values), np.unique(values)
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_new_process_recovering_never_imports_numpy_ma(tmp_path):
    code = (
        "import sys, json\n"
        "from lantern import Lantern\n"
        "with Lantern(sys.argv[1]) as lt:\n"
        "    lt.archive([{'role': 'user', 'content': 'Start postgres for billing on port 5433 (compose.yml).'},\n"
        "                {'role': 'assistant', 'content': 'Started: docker run -p 5433:5432 postgres:16.'},\n"
        "                {'role': 'user', 'content': 'Add a README section about billing.'},\n"
        "                {'role': 'assistant', 'content': 'Added a Deployment section to README.md.'}], session='s')\n"
        "    rec = lt.recover('which port does the billing postgres use in compose.yml?', session='s', min_score=0)\n"
        "    assert rec.text, rec.reason\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "m.db")], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = set(json.loads(done.stderr[done.stderr.rindex("[") :]))
    assert "lantern.recover.rank" in loaded and "numpy.ma" not in loaded
