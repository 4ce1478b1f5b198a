"""`make bench`: figures for the write path and enrichment, each on a fresh
embedded stack. `python -m benchmarks --only write` runs one part."""

from __future__ import annotations

import argparse
import sys

from benchmarks import enrichment, write_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=("write", "enrichment"))
    parser.add_argument("-n", type=int, default=500, help="sequential requests per latency figure")
    parser.add_argument("--batches", type=int, default=10, help="500-item batches for throughput")
    parser.add_argument("--enrich-count", type=int, default=2000, help="memories for enrichment throughput")
    parser.add_argument("--rate", type=float, default=20.0, help="stores/s for time-to-searchable")
    parser.add_argument("--steady", type=int, default=300, help="stores at that rate")
    args = parser.parse_args()
    if args.only in (None, "write"):
        write_path.run(args.n, args.batches)
    if args.only in (None, "enrichment"):
        enrichment.run(args.enrich_count, args.rate, args.steady)
    return 0


if __name__ == "__main__":
    sys.exit(main())
