"""`make bench`: figures for the write path, enrichment, recall and consolidation, each on a fresh
embedded stack. `python -m benchmarks --only write` runs one part."""

from __future__ import annotations

import argparse
import sys

from benchmarks import consolidation, enrichment, recall_latency, write_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", choices=("write", "enrichment", "recall", "consolidate"))
    parser.add_argument("-n", type=int, default=500, help="sequential requests per latency figure")
    parser.add_argument("--batches", type=int, default=10, help="500-item batches for throughput")
    parser.add_argument("--enrich-count", type=int, default=2000, help="memories for enrichment throughput")
    parser.add_argument("--rate", type=float, default=20.0, help="stores/s for time-to-searchable")
    parser.add_argument("--steady", type=int, default=300, help="stores at that rate")
    parser.add_argument("--recall-sizes", default="10000,100000", help="memory counts for recall latency")
    parser.add_argument("--recall-queries", type=int, default=200, help="queries per recall latency figure")
    parser.add_argument(
        "--recall-words", choices=recall_latency.WORDS, default="locomo", help="the vocabulary of contents and queries"
    )
    parser.add_argument("--consolidate-size", type=int, default=100_000, help="memories a decay run goes over")
    args = parser.parse_args()
    if args.only in (None, "write"):
        write_path.run(args.n, args.batches)
    if args.only in (None, "enrichment"):
        enrichment.run(args.enrich_count, args.rate, args.steady)
    if args.only in (None, "recall"):
        sizes = tuple(int(s) for s in args.recall_sizes.split(","))
        recall_latency.run(sizes, args.recall_queries, args.recall_words)
    if args.only in (None, "consolidate"):
        consolidation.run(args.consolidate_size, args.recall_queries, args.recall_words)
    return 0


if __name__ == "__main__":
    sys.exit(main())
