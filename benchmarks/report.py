"""How benchmark figures are printed."""

from __future__ import annotations

import statistics
import sys


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def p95(samples: list[float]) -> float:
    """The 95th percentile, picked as percentiles() picks it."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return (
        f"p50 {pick(0.50) * 1000:8.2f} ms  p95 {pick(0.95) * 1000:8.2f} ms  p99 {pick(0.99) * 1000:8.2f} ms  "
        f"mean {statistics.fmean(ordered) * 1000:8.2f} ms"
    )


def line(label: str, figures: str) -> None:
    print(f"{label:<34} {figures}", flush=True)
