"""The adaptive score floor of a recall (`adaptive_floor`), pure: where the
scores of a ranking drop sharply near the top, what lies below the drop is
weak evidence and is left out, as long as at least half the results stay."""

from __future__ import annotations

from collections.abc import Sequence


def adaptive_floor(scores: Sequence[float], *, min_results: int, gap_ratio: float) -> float | None:
    """The score at the largest drop between neighbours in the top half of
    the ranking (at least its first `min_results` places), when that drop is
    more than `gap_ratio` of the best score and the results at or above it
    are at least half of them; None when there is no such drop."""
    ranked = sorted(scores, reverse=True)
    if len(ranked) <= min_results or ranked[0] <= 0:
        return None
    reach = max(min_results, len(ranked) // 2)
    at = max(range(1, reach), key=lambda i: ranked[i - 1] - ranked[i])  # the first of equal drops
    if ranked[at - 1] - ranked[at] <= gap_ratio * ranked[0]:
        return None
    floor = ranked[at]
    kept = sum(1 for s in ranked if s >= floor)
    return floor if kept >= (len(ranked) + 1) // 2 else None
