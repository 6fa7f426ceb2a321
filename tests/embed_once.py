"""``remembering(embedder)``: a real embedder whose sub-models compute the vectors of a batch of texts once, for
tests that embed the same texts again for a reason other than the embedding (the same questions on a second backend,
or recovered again under other options)."""

from __future__ import annotations

import numpy as np


def remembering(embedder):
    """``embedder`` with each model's vectors of a batch of texts computed once and given again, bit for bit, for the
    same batch: the sub-models of a routed embedder (everything above them, routing and which blocks a store holds,
    runs as it is), or the embedder itself when it is one model (MiniLM). A query embedding is ~85% of a recovery's
    CPU with the default embedder (~30 ms); ingesting the demo's aider excerpt with MiniLM ~3 s. Returns
    ``embedder``."""
    models = [m for m in (getattr(embedder, name, None) for name in ("minilm", "use", "e5")) if m is not None]
    for model in models or [embedder]:
        for name in ("embed", "embed_query"):
            if hasattr(model, name):
                computed: dict[tuple[str, ...], np.ndarray] = {}

                def once(texts, _compute=getattr(model, name), _computed=computed):
                    key = tuple(texts)
                    if key not in _computed:
                        _computed[key] = _compute(texts)
                    return _computed[key].copy()

                setattr(model, name, once)
    return embedder
