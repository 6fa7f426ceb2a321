"""``remembering(embedder)``: a real embedder whose sub-models compute the vectors of a batch of texts once, for
tests that embed the same texts again for a reason other than the embedding (the same questions on a second backend,
or recovered again under other options)."""

from __future__ import annotations

import numpy as np


def remembering(embedder):
    """``embedder`` (the default, routed one) with each sub-model's vectors of a batch of texts computed once and
    given again, bit for bit, for the same batch: a query embedding is ~85% of a recovery's CPU with the default
    embedder (~30 ms). Everything above the sub-models (routing, which blocks a store holds) runs as it is; a
    sub-model it lacks is left alone. Returns ``embedder``."""
    for model in (getattr(embedder, name, None) for name in ("minilm", "use", "e5")):
        for name in ("embed", "embed_query"):
            if model is not None and hasattr(model, name):
                computed: dict[tuple[str, ...], np.ndarray] = {}

                def once(texts, _compute=getattr(model, name), _computed=computed):
                    key = tuple(texts)
                    if key not in _computed:
                        _computed[key] = _compute(texts)
                    return _computed[key].copy()

                setattr(model, name, once)
    return embedder
