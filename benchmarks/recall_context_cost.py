"""What recall's ranking levers for quality (issue 25) cost a recall, in
one run: beside the stack's recall, a second recall process over the same
FalkorDB with them off (BASELINES "before": no related words, no speaker or
neighbourhood component, no second query text, the shallower shortlist of
before, no reranker; or one lever off at a time), its own vector index rebuilt from the same
graph; after the same warm-up queries, the same distinct queries are sent to
each in turn over gRPC (SearchMemories, as the gateway calls it), each going
first every other time, so both see the same machine at the same moment, and
the ratio of their p95s is the cost. Contextual embedding is left on in
both: it costs the index's writer, not a recall.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

from benchmarks.report import line, p95, percentiles, progress
from benchmarks.stack import BenchStack
from devstack.servers import free_port
from memgrid.v1 import recall_service_pb2, recall_service_pb2_grpc
from services.core.settings import Settings

#: Each baseline the served recall is set against: the components it
#: leaves out (weighed 0) and the settings it changes besides. "before"
#: (the default) turns every issue-25 lever off at once; the others one each.
BASELINES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "before": (
        ("related", "speaker", "neighbourhood"),
        {
            "RECALL_RELATED_CACHE_WORDS": "0",
            "RECALL_NEIGHBOURHOOD_SECONDS": "0",
            "RECALL_NAMELESS_QUERY_SHARE": "0",
            "RECALL_CANDIDATE_MIN": "30",
            "RECALL_SHORTLIST_MIN": "30",
            "RECALL_RERANK_DEPTH": "0",
            "RECALL_FRESH_WAIT_SECONDS": "0",
        },
    ),
    "rerank": ((), {"RECALL_RERANK_DEPTH": "0"}),
    "fresh": ((), {"RECALL_FRESH_WAIT_SECONDS": "0"}),
    "shortlist": ((), {"RECALL_CANDIDATE_MIN": "30", "RECALL_SHORTLIST_MIN": "30"}),
    "second-text": ((), {"RECALL_NAMELESS_QUERY_SHARE": "0"}),
    "related": (("related",), {"RECALL_RELATED_CACHE_WORDS": "0"}),
}
#: People the queries ask about: a question naming one is embedded twice as served (as asked and nameless).
NAMES = ("Caroline", "Melanie", "Jon", "Gina", "Maria", "John")


def as_questions(queries: list[str]) -> list[str]:
    """Each query as a question naming a person ("What did Melanie say about ...?"),
    as an agent asks of a conversation: what the nameless query and the speaker work on."""
    return [f"What did {NAMES[i % len(NAMES)]} say about {q}?" for i, q in enumerate(queries)]


def baseline_env(stack: BenchStack, data_dir: Path, port: int, baseline: str = "before") -> dict[str, str]:
    """The second recall's environment: the stack's, with the components off, its own index and consumer."""
    left_out, changed = BASELINES[baseline]
    weights = {
        intent: {**w, **dict.fromkeys(left_out, 0.0)}
        for intent, w in Settings.load("recall").recall.recall_weights.items()
    }
    return {
        **stack.env,
        "MEMGRID_DATA_DIR": str(data_dir),
        "RECALL_GRPC_PORT": str(port),
        "RECALL_METRICS_PORT": str(free_port()),
        "PROJECTOR_DURABLE": "bench-baseline-projector",
        "RECALL_WEIGHTS": json.dumps(weights),
        "RECALL_INDEX_CHECK_SECONDS": "0",
        **changed,
    }


def add_stages(stages: dict[str, list[float]], debug_json: str) -> None:
    """One recall's stage timings (state_debug's timings_ms) added to each stage's samples."""
    timings = json.loads(debug_json).get("timings_ms", {}) if debug_json else {}
    for stage, ms in timings.items():
        stages.setdefault(stage, []).append(float(ms))


def stage_figures(stages: dict[str, list[float]]) -> str:
    """Each stage's p50/p95 in ms, in the order the stages ran."""

    def pick(ordered: list[float], q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return "  ".join(
        f"{stage} {pick(sorted(ms), 0.5):.1f}/{pick(sorted(ms), 0.95):.1f}" for stage, ms in stages.items()
    )


def _rebuild(stub, metadata) -> None:
    for _ in stub.RebuildIndex(recall_service_pb2.RebuildIndexRequest(every_tenant=True), metadata=metadata,
                               timeout=3600):  # fmt: skip
        pass


def run(stack: BenchStack, queries: list[str], warmup: list[str], label: str, against: str = "before") -> float:
    """Prints both recalls' latencies and returns the p95 ratio (with / without the components)."""
    queries, warmup = as_questions(queries), as_questions(warmup)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="memgrid-baseline-") as data_dir:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.recall.main"],
            env=baseline_env(stack, Path(data_dir), port, against),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            with (
                grpc.insecure_channel(f"127.0.0.1:{port}") as baseline_channel,
                grpc.insecure_channel(stack.grpc_target("recall")) as served_channel,
            ):
                grpc.channel_ready_future(baseline_channel).result(timeout=120)
                baseline = recall_service_pb2_grpc.RecallServiceStub(baseline_channel)
                served = recall_service_pb2_grpc.RecallServiceStub(served_channel)
                started = time.perf_counter()
                _rebuild(baseline, stack.claim(None))
                progress(f"baseline recall's index rebuilt in {time.perf_counter() - started:.0f} s")
                metadata = stack.claim()
                # The baseline starts cold (its word counts, its index's pages): both are warmed
                # on the same queries first, and take turns going first.
                for warm in warmup:
                    for stub in (baseline, served):
                        stub.SearchMemories(recall_service_pb2.SearchMemoriesRequest(query=warm, limit=10),
                                            metadata=metadata, timeout=60)  # fmt: skip
                samples: dict[str, list[float]] = {"served": [], "baseline": []}
                stages: dict[str, dict[str, list[float]]] = {"served": {}, "baseline": {}}
                turns = (("baseline", baseline), ("served", served))
                for i, query in enumerate(queries):
                    for name, stub in turns if i % 2 == 0 else turns[::-1]:
                        asked = time.perf_counter()
                        reply = stub.SearchMemories(
                            recall_service_pb2.SearchMemoriesRequest(query=query, limit=10, state_debug=True),
                            metadata=metadata,
                            timeout=60,
                        )
                        samples[name].append(time.perf_counter() - asked)
                        add_stages(stages[name], reply.state_debug_json)
        finally:
            process.terminate()
            process.wait(timeout=60)
    line(f"{label}, SearchMemories, baseline {against!r}", percentiles(samples["baseline"]))
    line(f"{label}, SearchMemories as served", percentiles(samples["served"]))
    for name in ("baseline", "served"):
        line(f"{label}, stages p50/p95 ms, {name}", stage_figures(stages[name]))
    ratio = p95(samples["served"]) / p95(samples["baseline"])
    line(f"{label}, p95 as served / baseline {against!r}", f"{ratio:5.2f}x")
    return ratio
