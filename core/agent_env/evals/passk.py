"""pass@k: the chance that at least one of k runs passes, estimated without bias from n runs.

With n completed runs of which c passed, ``pass@k = 1 - C(n-c, k) / C(n, k)`` (the estimator of
Chen et al., 2021). It needs n >= k; fewer completed runs give no estimate (``None``), which is
shown as such rather than guessed.
"""

from __future__ import annotations

from math import comb


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """``1 - C(n-c, k)/C(n, k)``; ``None`` when n < k (too few completed runs to estimate)."""
    if k < 1 or n < 0 or not 0 <= c <= n:
        raise ValueError(f"pass@k needs k >= 1 and 0 <= c <= n (got n={n}, c={c}, k={k})")
    if n < k:
        return None
    if n - c < k:  # every choice of k runs includes a pass
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)
