"""Confidence intervals and tests: Wilson, cluster bootstrap, Newcombe's paired interval, exact McNemar.

* :func:`wilson_interval`: the Wilson score interval of a proportion, from
  ``scipy.stats.binomtest(k, n).proportion_ci(method="wilson")``; ``(NaN, NaN)`` for ``n == 0``.
* :func:`cluster_bootstrap_ci`: a percentile bootstrap of a proportion that resamples whole clusters
  (cases about one image move together), run by ``scipy.stats.bootstrap`` on cluster indices.
* :func:`newcombe_paired_interval`: Newcombe's score interval for a difference of paired
  proportions (no SciPy equivalent; built from two Wilson intervals).
* :func:`mcnemar_exact_p`: the exact two-sided McNemar test, a binomial test on the discordant pairs.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

#: Index draws per resampling batch (``n_boot x n_clusters`` at most this many), to bound memory.
BOOTSTRAP_BATCH_INDICES = 4_000_000

# SciPy 1.15 renamed bootstrap's `random_state` to `rng`; both take a Generator and draw the same indices.
_RNG_KEYWORD = "rng" if "rng" in inspect.signature(stats.bootstrap).parameters else "random_state"


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion ``successes / n``; (NaN, NaN) when ``n == 0``."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return math.nan, math.nan
    _check_confidence(confidence)
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    # SciPy gives exactly 0 (1) at k = 0 (k = n); the clamps only guard against float noise elsewhere.
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def bootstrap_ratio_ci(
    k: np.ndarray,
    n: np.ndarray,
    *,
    n_boot: int,
    confidence: float,
    rng: np.random.Generator,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``sum(k) / sum(n)`` over units resampled with replacement.

    Each resample draws as many units as there are (their indices, uniformly, from ``rng``); unit
    ``i`` contributes ``k[i]`` successes out of ``n[i]`` trials. ``scipy.stats.bootstrap`` does the
    resampling (on unit indices, with a vectorized ratio statistic) and takes the percentiles.
    A single unit gives its ratio twice, no units (NaN, NaN).
    """
    _check_confidence(confidence)
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    if k.size == 0:
        return math.nan, math.nan
    if k.size == 1:
        # every resample is the one unit (SciPy wants two or more observations)
        ratio = float(k[0] / n[0])
        return ratio, ratio

    def ratio(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        return k[idx].sum(axis=axis) / n[idx].sum(axis=axis)

    res = stats.bootstrap(
        (np.arange(k.size),),
        ratio,
        n_resamples=n_boot,
        batch=max(1, BOOTSTRAP_BATCH_INDICES // k.size),
        vectorized=True,
        confidence_level=confidence,
        method="percentile",
        **{_RNG_KEYWORD: rng},
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def cluster_bootstrap_ci(
    success: Sequence[bool] | np.ndarray,
    clusters: Sequence[Any] | np.ndarray,
    *,
    n_boot: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of a proportion, resampling whole clusters (e.g. ``image_id``).

    Each resample draws as many clusters as there are, with replacement, and takes the share of
    successes over all their units; cases about one image thus move together, which widens the
    interval when they are correlated. Seeded: the same inputs and ``seed`` give the same interval.
    """
    _check_confidence(confidence)
    success = np.asarray(success, dtype=float)
    codes, _ = pd.factorize(pd.Series(np.asarray(clusters, dtype=object)), sort=True)
    if success.shape != codes.shape:
        raise ValueError("success and clusters must have the same length")
    if success.size == 0:
        return math.nan, math.nan
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    k = np.bincount(codes, weights=success)
    n = np.bincount(codes).astype(float)
    return bootstrap_ratio_ci(k, n, n_boot=n_boot, confidence=confidence, rng=np.random.default_rng(seed))


def newcombe_paired_interval(
    both: int, a_only: int, b_only: int, neither: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's (1998, method 10) score interval for a difference of paired proportions ``p_a - p_b``.

    The 2x2 table counts units where both succeed, only A, only B, neither. It combines the Wilson
    intervals of ``p_a`` and ``p_b`` with the phi correlation of the table (0 when undefined).
    """
    n = both + a_only + b_only + neither
    if min(both, a_only, b_only, neither) < 0:
        raise ValueError("counts must be non-negative")
    if n == 0:
        return math.nan, math.nan
    p_a = (both + a_only) / n
    p_b = (both + b_only) / n
    l_a, u_a = wilson_interval(both + a_only, n, confidence)
    l_b, u_b = wilson_interval(both + b_only, n, confidence)
    denom = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    phi = (both * neither - a_only * b_only) / math.sqrt(denom) if denom else 0.0
    delta = math.sqrt(max(0.0, (p_a - l_a) ** 2 - 2 * phi * (p_a - l_a) * (u_b - p_b) + (u_b - p_b) ** 2))
    eps = math.sqrt(max(0.0, (u_a - p_a) ** 2 - 2 * phi * (u_a - p_a) * (p_b - l_b) + (p_b - l_b) ** 2))
    d = p_a - p_b
    return max(-1.0, d - delta), min(1.0, d + eps)


def mcnemar_exact_p(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: a binomial test of ``a_only`` of the discordant units at 1/2."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    return float(stats.binomtest(a_only, discordant, 0.5, alternative="two-sided").pvalue)
