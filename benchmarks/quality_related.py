"""Settings that are not score components (so the folds of `make
bench-quality` cannot refit them from one run's pools), chosen
leave-one-conversation-out over several runs: each run served one value of
the settings (e.g. RECALL_RELATED_THRESHOLD and RECALL_RELATED_PER_WORD, set
in the environment of `make bench-quality --save-pools`), and for each
conversation held out, the run and the weights are chosen on the other
conversations (the folds' objective, R@10 + R@50; the weights fitted as the
folds fit them) and measured on the one held out.

    python -m benchmarks.quality_related "t0.4 p8=build/pools-a.json" "t0.3 p8=build/pools-b.json"

The components' values come from recall itself (each run's pools), so
nothing here recomputes what recall computes.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from benchmarks.quality import (
    CATEGORIES,
    DEFAULT_DATA,
    OVERALL,
    figures,
    load,
    load_pools,
    objective_for,
    served_weights,
)
from benchmarks.quality_folds import fit, fused_order

KS = (1, 5, 10, 50)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="LABEL=PATH: a run's label and the pools it saved")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args(argv)

    conversations, _ = load(args.data)
    questions = [q for c in conversations for q in c.questions]
    objective = objective_for(questions)
    start, reach = served_weights()
    runs = {}
    for spec in args.runs:
        label, _, path = spec.partition("=")
        runs[label] = load_pools(Path(path))[1]
    names = list(next(iter(runs.values())))
    held: dict[str, list[str]] = {}
    for out in names:
        training = [c for c in names if c != out]
        scored = []
        for label, pools in runs.items():
            train = {k: p for c in training for k, p in pools[c].items()}
            weights = fit(train, objective(training), start, reach)
            found = objective(training)({k: fused_order(p, weights, reach) for k, p in train.items()})
            print(f"  fold {out}: run {label}: training objective {found:.4f}")
            scored.append((found, label, weights))
        found, label, weights = max(scored, key=lambda s: s[0])
        print(f"fold {out} held out: run {label}, weights {weights}")
        for key, pool in runs[label][out].items():
            held[key] = fused_order(pool, weights, reach)
    table = figures(held, questions, KS)
    print("held out, the run chosen on the other conversations:")
    for name in [*CATEGORIES.values(), OVERALL]:
        print(f"  {name:12s} " + "  ".join(f"{k} {v:5.1f}" for k, v in table[name].items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
