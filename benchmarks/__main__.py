"""`make bench`: figures for the write path, enrichment, recall and consolidation, each on a fresh
embedded stack. `python -m benchmarks --only write` runs one part."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import backup, consolidation, enrichment, import_export, recall_latency, scale, write_ab, write_path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only", choices=("write", "write-ab", "enrichment", "recall", "consolidate", "import", "backup", "scale")
    )
    parser.add_argument("-n", type=int, default=500, help="sequential requests per latency figure")
    parser.add_argument("--batches", type=int, default=10, help="500-item batches for throughput")
    parser.add_argument("--ab-base", default=write_ab.BEFORE_TRUST, help="the commit the write A/B compares with")
    parser.add_argument("--ab-memories", type=int, default=10_000, help="memories the write A/B seeds on each side")
    parser.add_argument("--ab-creates", type=int, default=500, help="single creates on each side")
    parser.add_argument("--ab-chunks", type=int, default=5, help="turns the seeding takes, sides alternating")
    parser.add_argument(
        "--ab-env", action="append", default=[], metavar="NAME=VALUE", help="a setting both A/B stacks start with"
    )
    parser.add_argument("--enrich-count", type=int, default=2000, help="memories for enrichment throughput")
    parser.add_argument("--rate", type=float, default=20.0, help="stores/s for time-to-searchable")
    parser.add_argument("--steady", type=int, default=300, help="stores at that rate")
    parser.add_argument("--recall-sizes", default="10000,100000", help="memory counts for recall latency")
    parser.add_argument("--recall-queries", type=int, default=200, help="queries per recall latency figure")
    parser.add_argument(
        "--recall-baselines",
        default="before",
        help="what recall as served is set against (benchmarks/recall_context_cost.py BASELINES), comma-separated",
    )
    parser.add_argument(
        "--recall-words", choices=recall_latency.WORDS, default="locomo", help="the vocabulary of contents and queries"
    )
    parser.add_argument("--consolidate-size", type=int, default=100_000, help="memories a decay run goes over")
    parser.add_argument("--backup-size", type=int, default=100_000, help="memories a backup and restore carry")
    parser.add_argument("--import-count", type=int, default=50_000, help="memories `memgrid import` loads")
    parser.add_argument("--import-parallel", type=int, default=4, help="its batches in flight")
    parser.add_argument("--import-batch", type=int, default=500, help="its batch size")
    parser.add_argument("--scale-sizes", default="100000,1000000", help="memory counts the scale run grows through")
    parser.add_argument("--scale-queries", type=int, default=200, help="distinct queries per scale recall figure")
    parser.add_argument(
        "--scale-warmup", type=int, default=scale.WARMUP, help="unmeasured recalls of each kind before its figures"
    )
    parser.add_argument(
        "--scale-vectors",
        choices=("text", "random"),
        default="text",
        help="the seeded memories' vectors: shaped like text embeddings, or random unit vectors",
    )
    parser.add_argument("--scale-creates", type=int, default=100, help="POST /memory calls per scale create figure")
    parser.add_argument("--scale-no-backup", action="store_true", help="leave backup and restore out of the scale run")
    parser.add_argument("--scale-backup-sizes", default="", help="sizes to back up and restore at (default: every)")
    parser.add_argument("--scale-json", default="build/scale.json", help="where the scale figures go")
    args = parser.parse_args()
    if args.only in (None, "write"):
        write_path.run(args.n, args.batches)
    if args.only in (None, "write-ab"):
        env = dict(pair.split("=", 1) for pair in args.ab_env)
        write_ab.run(args.ab_base, args.ab_memories, args.ab_creates, args.ab_chunks, env)
    if args.only in (None, "enrichment"):
        enrichment.run(args.enrich_count, args.rate, args.steady)
    if args.only in (None, "recall"):
        sizes = tuple(int(s) for s in args.recall_sizes.split(","))
        recall_latency.run(sizes, args.recall_queries, args.recall_words, tuple(args.recall_baselines.split(",")))
    if args.only in (None, "consolidate"):
        consolidation.run(args.consolidate_size, args.recall_queries, args.recall_words)
    if args.only in (None, "backup"):
        backup.run(args.backup_size, args.recall_words)
    if args.only == "scale":  # an hour at 1M: only when asked for
        scale.run(
            tuple(int(s) for s in args.scale_sizes.split(",")),
            args.scale_queries,
            args.scale_creates,
            backup=not args.scale_no_backup,
            backup_sizes=tuple(int(s) for s in args.scale_backup_sizes.split(",")) if args.scale_backup_sizes else None,
            json_path=Path(args.scale_json),
            words_from=args.recall_words,
            warmup=args.scale_warmup,
            vectors=args.scale_vectors,
        )
    if args.only in (None, "import"):
        import_export.run(args.import_count, args.import_parallel, args.import_batch, only_import=args.only == "import")
    return 0


if __name__ == "__main__":
    sys.exit(main())
