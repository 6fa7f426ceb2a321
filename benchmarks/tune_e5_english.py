"""Tune-split sweep of ``Config.e5_english_weight`` (issue #22; docs/results/e5-english.md).

    python benchmarks/tune_e5_english.py locomo PATH/locomo10.json OUT 0,0.25,0.5,0.75,1 [--cache DIR]

Runs the eval's own ``run.main`` on the tune split with one system per weight beside ``lantern`` and ``bm25``,
over one archive (the eval's cache), and prints facts recovered (%) and recall@10 per system. Never run on the
report split: weights are chosen on the tune split only.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from lantern.config import Config
from lantern.eval import run
from lantern.eval import systems as eval_systems
from lantern.eval.outcome import System


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("weights", help="comma-separated weights, e.g. 0,0.25,0.5")
    parser.add_argument("--cache", type=Path, default=None, help="the eval's archive cache directory")
    args = parser.parse_args()
    weights = [float(w) for w in args.weights.split(",")]
    every = eval_systems.all_systems

    def with_weights(base: Config | None = None) -> list[System]:
        base = base or Config()
        rest = every(base)
        swept = [
            System(f"e5en-{w:g}", "lantern", dataclasses.replace(base, e5_english_weight=w), f"English e5 weight {w:g}")
            for w in weights
        ]
        return [rest[0], *swept, *rest[1:]]

    eval_systems.all_systems = with_weights
    names = ["lantern", *(f"e5en-{w:g}" for w in weights), "bm25"]
    result = run.main(
        args.dataset,
        args.data,
        args.out,
        split="tune",
        systems=names,
        budgets=None,
        ratios=None,
        plots=False,
        cache_dir=args.cache,
    )
    print(f"{'system':<12} {'recovered %':>12} {'recall@10':>10} {'n':>5}")
    for name in names:
        overall = result["systems"][name]["overall"]
        print(f"{name:<12} {100 * overall['recovered']:>12.2f} {overall['recall@10']:>10.4f} {overall['n']:>5}")


if __name__ == "__main__":
    main()
