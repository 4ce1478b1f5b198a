"""`make bench-quality`: turn-level evidence recall@k on LoCoMo dev
(locomo-dev.json, named by --data), memgrid's GET /recall next to offline
references computed over the same turns in the same run.

One memory per turn (content "<speaker>: <text>", plus " [shares <caption>]"
when the turn carries a photo) goes in through POST /memory/batch with the
session's date-time as timestamp and a per-conversation tag; each question
of categories 1-4 is asked through GET /recall scoped by that tag. A
question's recall@k is the share of its evidence turns found in the top k;
a category's figure is the mean over its questions, and overall is the mean
over all questions (not over categories).

The references, offline: BM25 over the same content text (benchmarks/bm25.py),
dense cosine with the local all-MiniLM-L6-v2 embedder recall itself uses, a
linear hybrid (w * cosine + (1 - w) * BM25 / max BM25 of the query) and
reciprocal rank fusion (1 / (60 + rank) summed over BM25 and dense).

    python -m benchmarks.quality --offline-only         # references only, no stack
    python -m benchmarks.quality --limit-questions 20   # quick run, 20 questions per conversation
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np

from benchmarks.bm25 import BM25
from benchmarks.quality_folds import FITTED, PoolItem, Reach, fit, held_out
from benchmarks.quality_rerank import held_out as rerank_held_out
from benchmarks.quality_rerank import rerank_depth
from benchmarks.report import percentiles, progress

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
DEFAULT_KS = (1, 5, 10, 50)
#: The deep pool asked of /recall for the held-out folds (its largest limit).
DEFAULT_POOL = 100
BATCH_LIMIT = 500
RRF_K = 60
OVERALL = "overall"

_SESSION = re.compile(r"session_(\d+)")
_EVIDENCE_SEPARATORS = re.compile(r"[;,\s]+")


@dataclass(frozen=True)
class Turn:
    sample_id: str
    dia_id: str
    session: int
    speaker: str
    timestamp: datetime
    content: str


@dataclass(frozen=True)
class Question:
    sample_id: str
    number: int  # position in the sample's qa list
    text: str
    category: int
    evidence: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.sample_id}#{self.number}"


@dataclass
class Conversation:
    sample_id: str
    turns: list[Turn]
    questions: list[Question]


@dataclass
class DataNotes:
    """What loading had to repair or leave out, so the figures can be read honestly."""

    questions_other_categories: int = 0
    split_evidence: list[str] = field(default_factory=list)  # "conv-26#12: 'D8:6; D9:17'"
    dropped_evidence: list[str] = field(default_factory=list)  # "conv-26#3: 'D1:99'"
    questions_without_evidence: list[str] = field(default_factory=list)


def parse_session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware datetime (no zone is given; UTC is assumed)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def turn_content(turn: dict) -> str:
    """The text stored for a turn, and indexed by every reference: speaker, words, photo caption."""
    content = f"{turn['speaker']}: {turn['text']}"
    caption = (turn.get("blip_caption") or "").strip()
    return f"{content} [shares {caption}]" if caption else content


def evidence_ids(raw: Iterable[str]) -> list[str]:
    """Evidence entries split where LoCoMo packs several into one string ("D8:6; D9:17")."""
    return [part for entry in raw for part in _EVIDENCE_SEPARATORS.split(str(entry)) if part]


def load(path: Path, limit_questions: int | None = None) -> tuple[list[Conversation], DataNotes]:
    """The conversations' turns and their questions of categories 1-4 (at most limit_questions each).

    Evidence ids naming no stored turn are dropped; a question left without
    evidence is skipped. Both are listed in the notes.
    """
    notes = DataNotes()
    conversations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        sample_id = sample["sample_id"]
        conversation = sample["conversation"]
        turns = []
        for key, session in conversation.items():
            match = _SESSION.fullmatch(key)
            if not match or not isinstance(session, list):
                continue
            when = parse_session_time(conversation[f"{key}_date_time"])
            for turn in session:
                turns.append(
                    Turn(sample_id, turn["dia_id"], int(match.group(1)), turn["speaker"], when, turn_content(turn))
                )
        known = {turn.dia_id for turn in turns}
        questions = []
        for number, qa in enumerate(sample["qa"]):
            if qa["category"] not in CATEGORIES:
                notes.questions_other_categories += 1
                continue
            where = f"{sample_id}#{number}"
            ids = evidence_ids(qa.get("evidence", []))
            if len(ids) != len(qa.get("evidence", [])):
                notes.split_evidence.append(f"{where}: {qa['evidence']!r}")
            notes.dropped_evidence.extend(f"{where}: {i!r}" for i in ids if i not in known)
            kept = tuple(dict.fromkeys(i for i in ids if i in known))
            if not kept:
                notes.questions_without_evidence.append(f"{where}: {qa['question']!r}")
                continue
            if limit_questions is None or len(questions) < limit_questions:
                questions.append(Question(sample_id, number, qa["question"], qa["category"], kept))
        conversations.append(Conversation(sample_id, turns, questions))
    return conversations, notes


def recall_at_k(ranked: Sequence[str], evidence: Collection[str], k: int) -> float:
    """The share of the evidence found in the first k of the ranking."""
    if not evidence:
        raise ValueError("recall@k needs at least one evidence id")
    return len(set(ranked[:k]) & set(evidence)) / len(set(evidence))


def session_of(dia_id: str) -> str:
    """The session part of a LoCoMo dia_id ("D8:6" -> "D8")."""
    return dia_id.split(":", 1)[0]


def any_at_k(ranked: Sequence[str], evidence: Collection[str], k: int) -> float:
    """1 when any evidence turn is in the first k, else 0 (a looser measure other projects publish)."""
    return 1.0 if set(ranked[:k]) & set(evidence) else 0.0


def session_at_k(ranked: Sequence[str], evidence: Collection[str], k: int) -> float:
    """1 when one of the first k lies in a session holding evidence, else 0 (looser still)."""
    return 1.0 if {session_of(i) for i in ranked[:k]} & {session_of(i) for i in evidence} else 0.0


#: The loose measures, at 5, beside recall@k.
LOOSE = {"any@5": lambda r, e: any_at_k(r, e, 5), "session@5": lambda r, e: session_at_k(r, e, 5)}


def figures(
    rankings: dict[str, list[str]], questions: Sequence[Question], ks: Sequence[int]
) -> dict[str, dict[str, float]]:
    """Mean recall@k (as a percentage) per category name and overall, keyed
    "R@k", and the loose any@5 and session@5."""
    groups: dict[str, list[Question]] = {name: [] for name in CATEGORIES.values()}
    for question in questions:
        groups[CATEGORIES[question.category]].append(question)
    groups[OVERALL] = list(questions)
    result = {}
    for name, members in groups.items():
        measures = {f"R@{k}": (lambda r, e, k=k: recall_at_k(r, e, k)) for k in ks} | LOOSE
        result[name] = {
            label: (
                100.0 * float(np.mean([measure(rankings[q.key], q.evidence) for q in members]))
                if members
                else float("nan")
            )
            for label, measure in measures.items()
        }
    return result


def linear_fusion(dense: np.ndarray, lexical: np.ndarray, dense_weight: float) -> np.ndarray:
    """w * cosine + (1 - w) * BM25 scaled by the query's best BM25 score (0 when nothing matched)."""
    top = lexical.max(initial=0.0)
    scaled = lexical / top if top > 0 else np.zeros_like(lexical)
    return dense_weight * dense + (1.0 - dense_weight) * scaled


def rrf_fusion(*scores: np.ndarray, k: int = RRF_K) -> np.ndarray:
    """Reciprocal rank fusion: the sum of 1 / (k + rank) with ranks from 1, ties in corpus order."""
    fused = np.zeros(len(scores[0]))
    for score in scores:
        ranks = np.empty(len(score))
        ranks[np.argsort(-score, kind="stable")] = np.arange(1, len(score) + 1)
        fused += 1.0 / (k + ranks)
    return fused


def top(scores: np.ndarray, ids: Sequence[str], depth: int) -> list[str]:
    """The ids of the `depth` best scores, ties in corpus order."""
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:depth]]


def offline_rankings(
    conversations: Sequence[Conversation], depth: int, dense_weight: float
) -> tuple[dict[str, dict[str, list[str]]], dict[str, float]]:
    """BM25, dense, hybrid and RRF rankings (dia_ids) per question key, and the seconds each part took."""
    from services.core.adapters.embedders import LocalMiniLMEmbedder

    embedder = LocalMiniLMEmbedder()
    methods = ("bm25", "dense", "hybrid", "rrf")
    rankings: dict[str, dict[str, list[str]]] = {m: {} for m in methods}
    seconds = {"bm25": 0.0, "embedding": 0.0}
    total = sum(len(c.turns) + len(c.questions) for c in conversations)
    embedded = 0
    for conversation in conversations:
        ids = [turn.dia_id for turn in conversation.turns]
        started = time.perf_counter()
        index = BM25([turn.content for turn in conversation.turns])
        lexical = [np.array(index.scores(q.text)) for q in conversation.questions]
        seconds["bm25"] += time.perf_counter() - started
        started = time.perf_counter()
        texts = [turn.content for turn in conversation.turns] + [q.text for q in conversation.questions]
        vectors = np.array(asyncio.run(embedder.embed(texts)))
        seconds["embedding"] += time.perf_counter() - started
        embedded += len(texts)
        progress(f"offline: {conversation.sample_id} embedded ({embedded}/{total} texts)")
        turn_vectors, question_vectors = vectors[: len(ids)], vectors[len(ids) :]
        for question, bm25_scores, question_vector in zip(
            conversation.questions, lexical, question_vectors, strict=True
        ):
            dense = turn_vectors @ question_vector
            rankings["bm25"][question.key] = top(bm25_scores, ids, depth)
            rankings["dense"][question.key] = top(dense, ids, depth)
            rankings["hybrid"][question.key] = top(linear_fusion(dense, bm25_scores, dense_weight), ids, depth)
            rankings["rrf"][question.key] = top(rrf_fusion(bm25_scores, dense), ids, depth)
    return rankings, seconds


def tag_of(sample_id: str) -> str:
    return f"locomo:{sample_id}"


#: How the turns are stored and the questions scoped: this benchmark's own
#: way, or the way AutoMem's LoCoMo benchmark stores them (a tag for the
#: conversation, the session and the speaker each, the session's time in
#: metadata only, so each turn is stamped on arrival), which a harness built
#: for AutoMem's API would use.
STYLES = ("memgrid", "automem")


def memory_payload(turn: Turn, timestamps: bool = True, style: str = "memgrid") -> dict:
    """The POST /memory/batch item for a turn (without its session's time:
    stamped when it arrives, as an agent writing as it goes would)."""
    if style == "automem":
        return {
            "content": turn.content,
            "type": "Context",
            "importance": 0.5,
            "tags": [
                "locomo-test",
                f"conversation:{turn.sample_id}",
                f"session:{turn.session}",
                f"speaker:{turn.speaker.lower().replace(' ', '-')}",
            ],
            "metadata": {
                "source": "locomo_benchmark",
                "conversation_id": turn.sample_id,
                "session_id": str(turn.session),
                "dialog_id": turn.dia_id,
                "speaker": turn.speaker,
                "session_datetime": turn.timestamp.strftime("%I:%M %p on %d %B, %Y"),
            },
        }
    payload = {
        "content": turn.content,
        "type": "Context",
        "tags": [tag_of(turn.sample_id)],
        "metadata": {"dia_id": turn.dia_id, "session": turn.session, "speaker": turn.speaker},
    }
    if timestamps:
        payload["timestamp"] = turn.timestamp.isoformat()
    return payload


def scope_params(sample_id: str, style: str = "memgrid") -> dict[str, str]:
    """The /recall parameters that scope a question to its conversation."""
    if style == "automem":
        return {"tags": f"conversation:{sample_id}", "tag_match": "exact"}
    return {"tags": tag_of(sample_id)}


def result_ids(body: dict) -> list[str]:
    """Memory ids of a /recall answer, in rank order."""
    ids = []
    for item in body.get("results", []):
        memory_id = item.get("id") or (item.get("memory") or {}).get("id")
        if memory_id:
            ids.append(memory_id)
    return ids


def _store(
    client: httpx.Client, conversations: Sequence[Conversation], timestamps: bool = True, style: str = "memgrid"
) -> dict[str, tuple[str, str]]:
    """Every turn stored; memory id -> (sample_id, dia_id)."""
    by_id: dict[str, tuple[str, str]] = {}
    total = sum(len(c.turns) for c in conversations)
    for conversation in conversations:
        for offset in range(0, len(conversation.turns), BATCH_LIMIT):
            chunk = conversation.turns[offset : offset + BATCH_LIMIT]
            items = [memory_payload(t, timestamps, style) for t in chunk]
            reply = client.post("/memory/batch", json={"memories": items})
            reply.raise_for_status()
            memory_ids = reply.json()["memory_ids"]
            if len(memory_ids) != len(chunk):
                raise RuntimeError(f"stored {len(chunk)} turns, got {len(memory_ids)} ids back")
            by_id.update({m: (t.sample_id, t.dia_id) for m, t in zip(memory_ids, chunk, strict=True)})
            progress(f"store: {len(by_id)}/{total} turns")
    return by_id


def _wait_searchable(client: httpx.Client, count: int, timeout: float) -> dict:
    """Poll enrichment status and the vector index until all `count` memories are embedded and indexed."""
    deadline = time.monotonic() + timeout
    last = 0.0
    while True:
        status = client.get("/enrichment/status").raise_for_status().json()
        points = int(client.get("/health").json().get("vector_index", {}).get("points", 0))
        idle = status["pending"] == 0 and status["queue_size"] == 0 and status["inflight"] == 0
        if idle and points >= count:
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"not searchable after {timeout:.0f} s: {points}/{count} indexed, status {status}")
        if time.monotonic() - last >= 5:
            progress(
                f"wait: {points}/{count} in the vector index, enrichment pending {status['pending']}, "
                f"queue {status['queue_size']}, in flight {status['inflight']}, failed {status['failed']}"
            )
            last = time.monotonic()
        time.sleep(1.0)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pool_items(body: dict, by_id: dict[str, tuple[str, str]], sample_id: str) -> list[PoolItem]:
    """A /recall answer's results of the asking conversation, with their score components and times."""
    items = []
    for item in body.get("results", []):
        memory = item.get("memory") or {}
        sample, dia_id = by_id.get(item.get("id") or memory.get("id"), (None, None))
        if sample != sample_id or not memory.get("timestamp"):
            continue
        when = _epoch(memory["timestamp"])
        stored = _epoch(memory["recorded_at"]) if memory.get("recorded_at") else 0.0
        items.append(PoolItem(dia_id, dict(item.get("score_components") or {}), when, stored=stored))
    return items


def save_pools(path: Path, rankings: dict[str, list[str]], pools: dict[str, dict[str, list[PoolItem]]]) -> None:
    """memgrid's served rankings and deep pools as JSON, to fit the folds again without a stack."""
    shaped = {c: {k: [item.__dict__ for item in pool] for k, pool in by.items()} for c, by in pools.items()}
    path.write_text(json.dumps({"rankings": rankings, "pools": shaped}))


def load_pools(path: Path) -> tuple[dict[str, list[str]], dict[str, dict[str, list[PoolItem]]]]:
    saved = json.loads(path.read_text())
    pools = {c: {k: [PoolItem(**item) for item in pool] for k, pool in by.items()} for c, by in saved["pools"].items()}
    return saved["rankings"], pools


def online_rankings(
    conversations: Sequence[Conversation],
    depth: int,
    wait_timeout: float,
    pool: int = DEFAULT_POOL,
    timestamps: bool = True,
    ks: Sequence[int] = DEFAULT_KS,
    extra: Mapping[str, str] | None = None,
    style: str = "memgrid",
    settle: float | None = None,
) -> tuple[dict[str, list[str]], dict[str, dict[str, list[PoolItem]]], dict]:
    """memgrid's /recall rankings (dia_ids) per question key, each question's
    deep pool (`pool` results with their components) by conversation, and
    timings, latencies and oddities. `extra`: more /recall parameters for
    every question (auto_decompose). `style`: how turns are stored and scoped (STYLES).
    `settle`: ask each conversation's questions this many seconds after its
    turns are stored, not once they are all searchable."""
    extra = dict(extra or {})
    from benchmarks.stack import BenchStack

    stats: dict = {"foreign_results": 0}
    rankings: dict[str, list[str]] = {}
    pools: dict[str, dict[str, list[PoolItem]]] = {c.sample_id: {} for c in conversations}
    latencies: list[float] = []
    env = {"EMBEDDING_PROVIDER": "local", "ENRICHMENT_ENABLED": "true", "OPENAI_API_KEY": ""}
    with BenchStack(**env) as stack, stack.client() as client:
        probe = client.get("/recall", params={"query": "probe", "tags": tag_of("probe"), "limit": 1})
        if probe.status_code != 200:
            raise RuntimeError(f"GET /recall answers {probe.status_code}: {probe.text[:300]}")
        # Each conversation stored, then its questions asked: once every turn is searchable
        # (the default), or `settle` seconds after its turns are stored, as a client that
        # does not wait for enrichment asks (AutoMem's LoCoMo harness waits 2 s).
        rounds = [conversations] if settle is None else [[c] for c in conversations]
        by_id: dict[str, tuple[str, str]] = {}
        stats |= {"store_seconds": 0.0, "wait_seconds": 0.0, "query_seconds": 0.0, "enrichment_failed": 0}
        for batch in rounds:
            started = time.perf_counter()
            by_id |= _store(client, batch, timestamps, style)
            stats["store_seconds"] += time.perf_counter() - started
            started = time.perf_counter()
            if settle is None:
                stats["enrichment_failed"] = _wait_searchable(client, len(by_id), wait_timeout)["failed"]
            else:
                time.sleep(settle)
            stats["wait_seconds"] += time.perf_counter() - started
            started = time.perf_counter()
            for question in (q for c in batch for q in c.questions):
                scope = scope_params(question.sample_id, style)
                params = {"query": question.text, **scope, "limit": max(depth, pool), **extra}
                asked = time.perf_counter()
                reply = client.get("/recall", params=params)
                latencies.append(time.perf_counter() - asked)
                reply.raise_for_status()
                ranked = []
                for memory_id in result_ids(reply.json()):
                    sample_id, dia_id = by_id.get(memory_id, (None, None))
                    if sample_id != question.sample_id:
                        stats["foreign_results"] += 1
                        continue
                    ranked.append(dia_id)
                rankings[question.key] = ranked[:depth]
                pools[question.sample_id][question.key] = pool_items(reply.json(), by_id, question.sample_id)
                if len(rankings) % 50 == 0:
                    progress(f"recall: {len(rankings)} questions")
            stats["query_seconds"] += time.perf_counter() - started
        questions = [q for c in conversations for q in c.questions]
        if settle is not None:  # the asked-at-k figures, as in the default, once everything is searchable
            stats["enrichment_failed"] = _wait_searchable(client, len(by_id), wait_timeout)["failed"]
        stats["asked_at"] = _asked_at_each_k(client, questions, by_id, ks, extra, style)
    stats["latency"] = latencies
    return rankings, pools, stats


def _asked_at_each_k(
    client: httpx.Client,
    questions: Sequence[Question],
    by_id: dict[str, tuple[str, str]],
    ks: Sequence[int],
    extra: Mapping[str, str],
    style: str = "memgrid",
) -> dict[int, dict[str, list[str]]]:
    """Each question asked again with limit k, for each cut-off k: what an
    agent asking for k results sees (the shortlist's depth follows the
    limit, so the top k of a deep pool can differ from a reply of k)."""
    asked: dict[int, dict[str, list[str]]] = {}
    for k in ks:
        asked[k] = {}
        for question in questions:
            params = {"query": question.text, **scope_params(question.sample_id, style), "limit": k, **extra}
            body = client.get("/recall", params=params).raise_for_status().json()
            asked[k][question.key] = [
                by_id[m][1] for m in result_ids(body) if by_id.get(m, (None, None))[0] == question.sample_id
            ]
        progress(f"recall asked at limit {k}: {len(questions)} questions")
    return asked


def asked_figures(
    asked: dict[int, dict[str, list[str]]], questions: Sequence[Question], ks: Sequence[int]
) -> dict[str, dict[str, float]]:
    """R@k from the replies asked with limit k; any@5 and session@5 from those of limit 5."""
    by_k = {k: figures(asked[k], questions, ks) for k in ks}
    loose_k = 5 if 5 in by_k else max(ks)
    return {
        name: {f"R@{k}": by_k[k][name][f"R@{k}"] for k in ks} | {m: by_k[loose_k][name][m] for m in LOOSE}
        for name in by_k[ks[0]]
    }


def table(results: dict[str, dict[str, dict[str, float]]], counts: dict[str, int], ks: Sequence[int]) -> str:
    """One block per method, one row per category and overall: recall@k, any@5 and session@5 in percent."""
    measures = [f"R@{k}" for k in ks] + list(LOOSE)
    labels = {name: f"{number} {name}" for number, name in CATEGORIES.items()} | {OVERALL: OVERALL}
    rows = []
    for method, by_category in results.items():
        rows.append(f"{method:<22}{'n':>5}  " + "".join(f"{m:>10}" for m in measures))
        for name, label in labels.items():
            cells = "".join(f"{by_category[name].get(m, float('nan')):>10.1f}" for m in measures)
            rows.append(f"  {label:<20}{counts[name]:>5}  {cells}")
    return "\n".join(rows)


def objective_for(questions: Sequence[Question]) -> Callable[[Sequence[str]], Callable[[dict[str, list[str]]], float]]:
    """The folds' objective over the given conversations' questions: mean R@10 + R@50."""

    def for_conversations(conversations: Sequence[str]) -> Callable[[dict[str, list[str]]], float]:
        asked = [q for q in questions if q.sample_id in conversations]

        def objective(rankings: dict[str, list[str]]) -> float:
            return float(
                np.mean([recall_at_k(rankings[q.key], q.evidence, 10) + recall_at_k(rankings[q.key], q.evidence, 50)
                         for q in asked])
            )  # fmt: skip

        return objective

    return for_conversations


def served_weights() -> tuple[dict[str, float], Reach]:
    """The recall weights and the neighbourhood's reach recall serves by default."""
    from services.core.settings import Settings

    settings = Settings()
    reach = Reach(settings.recall.recall_neighbourhood_seconds, settings.recall.recall_neighbourhood_adjacent)
    return dict(settings.recall.recall_weights["recall"]), reach


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--k", default=",".join(map(str, DEFAULT_KS)), help="cut-offs, comma-separated")
    parser.add_argument("--limit-questions", type=int, help="at most N questions per conversation")
    parser.add_argument("--offline-only", action="store_true", help="no stack: BM25, dense and hybrids only")
    parser.add_argument("--dense-weight", type=float, default=0.6, help="cosine's weight in the linear hybrid")
    parser.add_argument("--wait-timeout", type=float, default=1800.0, help="seconds to wait for enrichment")
    parser.add_argument("--pool", type=int, default=DEFAULT_POOL, help="results asked per question for the folds")
    parser.add_argument("--save-pools", type=Path, help="save memgrid's rankings and deep pools here (JSON)")
    parser.add_argument("--from-pools", type=Path, help="fit the folds on saved pools, without a stack")
    parser.add_argument("--json", type=Path, help="save the figures here")
    parser.add_argument("--no-timestamps", action="store_true",
                        help="store the turns without their sessions' times (each stamped on arrival)")  # fmt: skip
    parser.add_argument("--auto-decompose", action="store_true", help="ask every question with auto_decompose=true")
    parser.add_argument("--style", choices=STYLES, default="memgrid",
                        help="store and scope the turns this way, or as AutoMem's benchmark does")  # fmt: skip
    parser.add_argument("--settle", type=float, metavar="SECONDS",
                        help="ask a conversation SECONDS after storing it, not once searchable")  # fmt: skip
    args = parser.parse_args(argv)
    ks = sorted({int(k) for k in args.k.split(",") if k.strip()})
    depth = max(ks)

    started = time.perf_counter()
    conversations, notes = load(args.data, args.limit_questions)
    questions = [q for c in conversations for q in c.questions]
    turns = sum(len(c.turns) for c in conversations)
    counts = {name: sum(CATEGORIES[q.category] == name for q in questions) for name in CATEGORIES.values()}
    counts[OVERALL] = len(questions)

    results: dict[str, dict[str, dict[str, float]]] = {}
    summary: dict = {}
    latency: list[float] = []
    asked: dict[str, dict[str, float]] = {}
    if args.from_pools or not args.offline_only:
        if args.from_pools:
            memgrid, pools = load_pools(args.from_pools)
        else:
            memgrid, pools, stats = online_rankings(
                conversations, depth, args.wait_timeout, args.pool, not args.no_timestamps, ks,
                {"auto_decompose": "true"} if args.auto_decompose else None, args.style, args.settle,
            )  # fmt: skip
            latency = stats.pop("latency")
            asked = asked_figures(stats.pop("asked_at"), questions, ks)
            summary["memgrid"] = stats | {
                "latency_ms_p50": 1000 * float(np.percentile(latency, 50)),
                "latency_ms_p95": 1000 * float(np.percentile(latency, 95)),
            }
            if args.save_pools:
                save_pools(args.save_pools, memgrid, pools)
        results["memgrid (served)"] = figures(memgrid, questions, ks)
        if asked:
            results["memgrid (asked at k)"] = asked
        start, reach = served_weights()
        folds, chosen = held_out(pools, objective_for(questions), start, reach)
        results["memgrid held-out folds"] = figures(folds, questions, ks)
        # The second stage's folds: each conversation's top reranked by an ensemble fitted on the others.
        evidence = {q.key: set(q.evidence) for q in questions}
        second = rerank_held_out(pools, evidence, objective_for(questions), start, reach, rerank_depth())
        results["memgrid reranked folds"] = figures(second, questions, ks)
        every = {key: pool for by_key in pools.values() for key, pool in by_key.items()}
        summary["fold_weights"] = chosen
        summary["weights_on_all"] = fit(every, objective_for(questions)(list(pools)), start, reach)
    offline, seconds = offline_rankings(conversations, depth, args.dense_weight)
    for method, ranking in offline.items():
        results[method] = figures(ranking, questions, ks)
    summary["offline_seconds"] = seconds
    summary["total_seconds"] = time.perf_counter() - started

    names = ", ".join(c.sample_id for c in conversations)
    print(f"\nLoCoMo dev ({names}): turn-level evidence recall@k, {turns} turns, {len(questions)} questions")
    print(table(results, counts, ks))
    print(
        f"hybrid = {args.dense_weight:g} * cosine + {1 - args.dense_weight:g} * BM25/max; rrf k = {RRF_K}; "
        "overall = mean over questions"
    )
    print(
        f"data: {notes.questions_other_categories} questions of category 5 left out; "
        f"{len(notes.split_evidence)} evidence strings split; {len(notes.dropped_evidence)} evidence ids "
        f"naming no turn dropped; {len(notes.questions_without_evidence)} questions without evidence skipped"
    )
    for entry in notes.split_evidence + notes.dropped_evidence + notes.questions_without_evidence:
        print(f"  {entry}")
    print(
        f"time: {summary['total_seconds']:.1f} s in all; offline BM25 {seconds['bm25']:.2f} s, "
        f"embedding {seconds['embedding']:.1f} s"
    )
    if "fold_weights" in summary:
        fitted = ", ".join(FITTED)
        for held, weights in summary["fold_weights"].items():
            print(f"fold {held} held out: {fitted} = " + ", ".join(f"{weights.get(n, 0):g}" for n in FITTED))
        on_all = summary["weights_on_all"]
        print(f"fitted on every conversation: {fitted} = " + ", ".join(f"{on_all.get(n, 0):g}" for n in FITTED))
        held = results["memgrid held-out folds"][OVERALL]
        verdict = "met" if held["R@10"] >= 70 and held["R@50"] >= 88 else "NOT met"
        print(f"target held-out R@10 >= 70 and R@50 >= 88: {held['R@10']:.1f} / {held['R@50']:.1f} ({verdict})")
    if "memgrid" in summary:
        stats = summary["memgrid"]
        print(
            f"memgrid: store {stats['store_seconds']:.1f} s, until searchable {stats['wait_seconds']:.1f} s, "
            f"{len(questions)} recalls {stats['query_seconds']:.1f} s; enrichment failures "
            f"{stats['enrichment_failed']}; results from another conversation {stats['foreign_results']}"
        )
        print(f"recall latency: {percentiles(latency)}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "data": str(args.data),
                    "ks": ks,
                    "counts": counts,
                    "figures": {
                        method: {
                            name: {k: None if math.isnan(v) else v for k, v in row.items()} for name, row in by.items()
                        }
                        for method, by in results.items()
                    },
                    "notes": notes.__dict__,
                    "summary": summary,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
