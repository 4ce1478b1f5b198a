"""Dead letters: list them, and re-drive them once the cause is fixed.

    python -m services.core.dlq list   [--consumer NAME] [--limit N]
    python -m services.core.dlq replay [--consumer NAME] [--limit N]
    ... --legacy: those a release before <NATS_STREAM>_DLQ left in the events' stream

(`make replay-dlq ARGS="--consumer enrich"`.) A consumer dead-letters what it
could not handle into <NATS_STREAM>_DLQ with the reason, the original subject
and headers; `replay` publishes each back to its original subject and removes
it from the dead-letter stream once the events' stream acknowledged it (the
rules: services/core/adapters/dead_letters.py). Exit status 1 when a replay failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from services.core.settings import Settings
from services.core.wiring import dead_letter_queue


async def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.core.dlq", description=__doc__.split("\n")[0])
    parser.add_argument("action", choices=["list", "replay"])
    parser.add_argument("--consumer", help="only this consumer's dead letters (e.g. enrich, embed, recall-projector)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many")
    parser.add_argument(
        "--legacy", action="store_true", help="those a release before the dead-letter stream left in the events' stream"
    )
    args = parser.parse_args(argv)
    settings = Settings.load("process", "bus")
    async with dead_letter_queue(settings.bus, settings.process) as queue:
        if args.action == "list":
            for letter in await queue.list(consumer=args.consumer, limit=args.limit, legacy=args.legacy):
                line = {
                    "sequence": letter.sequence,
                    "consumer": letter.consumer,
                    "subject": letter.subject,
                    "deliveries": letter.deliveries,
                    "reason": letter.reason,
                }
                print(json.dumps(line))
            return 0
        report = await queue.replay(consumer=args.consumer, limit=args.limit, legacy=args.legacy)
        print(json.dumps({"replayed": len(report.replayed), "failed": report.failed, "skipped": report.skipped}))
        return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main(sys.argv[1:])))
