"""Paired statistics for comparing two systems on the same facts / conversations (docs/architecture.md §6).
scipy does the distributions; each function is small and pure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def wilcoxon_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p of the paired Wilcoxon signed-rank test on a − b (Wilcoxon 1945), zero differences dropped
    (``zero_method="wilcox"``); scipy uses the exact null distribution for small samples without ties. 1.0 when
    every difference is zero or there are no pairs. Note: with n pairs, the smallest exact two-sided p is
    2 / 2**n (n = 5 -> 0.0625), so five conversations can never reach p < 0.05."""
    from scipy.stats import wilcoxon

    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) == 0 or not np.any(d != 0):
        return 1.0
    return float(wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)


def bootstrap_ci(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10_000, level: float = 0.95, seed: int = 0
) -> tuple[float, float, float]:
    """Mean paired difference a − b in percentage points and its percentile bootstrap CI (Efron & Tibshirani 1993,
    §13.3): resample the pairs with replacement ``resamples`` times. Returns (diff_pp, low_pp, high_pp)."""
    d = (np.asarray(a, float) - np.asarray(b, float)) * 100.0
    if len(d) == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    alpha = (1 - level) / 2
    return float(d.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def bootstrap_ci_clustered(
    a: Sequence[float],
    b: Sequence[float],
    groups: Sequence[str],
    *,
    resamples: int = 10_000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Mean paired difference a − b over all pairs (percentage points) and its cluster (case-resampling) bootstrap
    CI: resample the *groups* (conversations / history files) with replacement, keep all pairs of each drawn group,
    recompute the mean over the drawn pairs (Davison & Hinkley 1997, §3.8; Field & Welsh 2007). Pairs inside one
    conversation are not independent, so resampling pairs would understate the width. Returns
    (diff_pp, low_pp, high_pp), percentile interval."""
    d = (np.asarray(a, float) - np.asarray(b, float)) * 100.0
    if len(d) == 0:
        return 0.0, 0.0, 0.0
    names = list(dict.fromkeys(groups))
    index = {g: i for i, g in enumerate(names)}
    gid = np.array([index[g] for g in groups])
    sums = np.bincount(gid, weights=d, minlength=len(names))
    sizes = np.bincount(gid, minlength=len(names)).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(resamples, len(names)))
    means = sums[draws].sum(axis=1) / sizes[draws].sum(axis=1)
    alpha = (1 - level) / 2
    return float(d.mean()), float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def cohens_d_paired(a: Sequence[float], b: Sequence[float]) -> float:
    """Paired Cohen's d (d_z): mean(a − b) / sd(a − b), sd with n − 1 (Cohen 1988, §2.3.5; Lakens 2013 eq. 6).
    0.0 when the differences do not vary (or fewer than two pairs)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    if len(d) < 2:
        return 0.0
    sd = float(d.std(ddof=1))
    return float(d.mean() / sd) if sd > 0 else 0.0


def mcnemar_exact(a: Sequence[bool], b: Sequence[bool]) -> tuple[int, int, float]:
    """Exact McNemar test on paired binary outcomes (McNemar 1947; exact form: the discordant pairs are
    Binomial(n_b + n_c, 1/2) under H0). Returns (a only, b only, two-sided p); p = 1.0 with no discordant pair."""
    from scipy.stats import binomtest

    only_a = sum(1 for x, y in zip(a, b) if x and not y)
    only_b = sum(1 for x, y in zip(a, b) if y and not x)
    n = only_a + only_b
    if n == 0:
        return only_a, only_b, 1.0
    return only_a, only_b, float(binomtest(min(only_a, only_b), n, 0.5, alternative="two-sided").pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm (1979) step-down adjusted p-values, in the input order: sort ascending, p_(i) · (m − i + 1), made
    monotone with a running maximum, capped at 1. NaN entries are passed through and not counted in m."""
    idx = [i for i, p in enumerate(pvalues) if not math.isnan(p)]
    m = len(idx)
    out = [float("nan")] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: pvalues[i])):
        running = max(running, min(1.0, pvalues[i] * (m - rank)))
        out[i] = running
    return out


def fisher_greater_p(a: int, b: int, c: int, d: int) -> float:
    """One-sided p of Fisher's exact test (Fisher 1922) on the 2×2 table [[a, b], [c, d]], alternative: the odds
    ratio (a·d)/(b·c) is greater than 1 (the first row has the larger share in the first column). 1.0 for an empty
    row."""
    from scipy.stats import fisher_exact

    if a + b == 0 or c + d == 0:
        return 1.0
    return float(fisher_exact([[a, b], [c, d]], alternative="greater").pvalue)
