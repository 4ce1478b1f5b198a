"""The recall-quality benchmark's pure parts: LoCoMo loading, BM25, recall@k
and the offline fusions."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import numpy as np
import pytest

from benchmarks.bm25 import BM25, tokenize
from benchmarks.quality import (
    Question,
    evidence_ids,
    figures,
    linear_fusion,
    load,
    memory_payload,
    parse_session_time,
    recall_at_k,
    result_ids,
    rrf_fusion,
    scope_params,
    table,
    top,
    turn_content,
)

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
            {
                "speaker": "Bob",
                "dia_id": "D1:2",
                "text": "Look at this!",
                "blip_caption": "a photo of a red bicycle",
                "img_url": ["https://example.org/x.jpg"],
            },
        ],
        "session_2_date_time": "12:48 am on 1 February, 2024",
        "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "The dog is called Rex."}],
    },
    "qa": [
        {"question": "What pet did Ann adopt?", "answer": "a dog", "evidence": ["D1:1"], "category": 4},
        {"question": "What does Bob ride?", "answer": "a bike", "evidence": ["D1:2; D2:1"], "category": 1},
        {"question": "Anything?", "answer": "x", "evidence": ["D9:9"], "category": 3},
        {"question": "Adversarial?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
        {"question": "When?", "answer": "May", "evidence": ["D1:1", "D7:3"], "category": 2},
    ],
}


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([SAMPLE]))
    return path


def test_session_time_is_parsed_as_utc():
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("12:48 am on 1 February, 2024") == datetime(2024, 2, 1, 0, 48, tzinfo=UTC)


def test_turn_content_names_the_speaker_and_the_photo():
    assert turn_content({"speaker": "Ann", "text": "Hi"}) == "Ann: Hi"
    assert turn_content({"speaker": "Bob", "text": "Look", "blip_caption": "a photo of a cat"}) == (
        "Bob: Look [shares a photo of a cat]"
    )


def test_packed_evidence_is_split():
    assert evidence_ids(["D8:6; D9:17", "D1:2"]) == ["D8:6", "D9:17", "D1:2"]
    assert evidence_ids([]) == []


def test_load_extracts_turns_in_order_with_their_session(data_file):
    (conversation,), _ = load(data_file)
    assert [t.dia_id for t in conversation.turns] == ["D1:1", "D1:2", "D2:1"]
    assert [t.session for t in conversation.turns] == [1, 1, 2]
    assert conversation.turns[1].content == "Bob: Look at this! [shares a photo of a red bicycle]"
    assert conversation.turns[2].timestamp == datetime(2024, 2, 1, 0, 48, tzinfo=UTC)


def test_load_repairs_drops_and_skips_evidence_and_says_so(data_file):
    (conversation,), notes = load(data_file)
    by_number = {q.number: q for q in conversation.questions}
    assert sorted(by_number) == [0, 1, 4]
    assert by_number[1].evidence == ("D1:2", "D2:1")
    assert by_number[4].evidence == ("D1:1",)
    assert notes.questions_other_categories == 1
    assert len(notes.split_evidence) == 1
    assert notes.dropped_evidence == ["conv-x#2: 'D9:9'", "conv-x#4: 'D7:3'"]
    assert notes.questions_without_evidence == ["conv-x#2: 'Anything?'"]


def test_load_limits_questions_per_conversation(data_file):
    (conversation,), _ = load(data_file, limit_questions=2)
    assert [q.number for q in conversation.questions] == [0, 1]


def test_memory_payload_carries_the_session_time_tag_and_turn(data_file):
    (conversation,), _ = load(data_file)
    payload = memory_payload(conversation.turns[0])
    assert payload == {
        "content": "Ann: I adopted a dog.",
        "type": "Context",
        "timestamp": "2023-05-08T13:56:00+00:00",
        "tags": ["locomo:conv-x"],
        "metadata": {"dia_id": "D1:1", "session": 1, "speaker": "Ann"},
    }
    # --no-timestamps: stamped on arrival, as an agent writing as it goes would store it.
    assert "timestamp" not in memory_payload(conversation.turns[0], timestamps=False)
    assert memory_payload(conversation.turns[0], timestamps=False)["content"] == payload["content"]


def test_automem_style_tags_each_turn_and_leaves_its_time_to_metadata(data_file):
    (conversation,), _ = load(data_file)
    payload = memory_payload(conversation.turns[0], style="automem")
    assert payload["tags"] == ["locomo-test", "conversation:conv-x", "session:1", "speaker:ann"]
    assert "timestamp" not in payload  # stamped on arrival; the session's time is metadata
    assert payload["metadata"]["session_datetime"] == "01:56 PM on 08 May, 2023"
    assert payload["metadata"]["dialog_id"] == "D1:1"
    assert scope_params("conv-x", "automem") == {"tags": "conversation:conv-x", "tag_match": "exact"}
    assert scope_params("conv-x") == {"tags": "locomo:conv-x"}


def test_result_ids_read_either_shape():
    body = {"results": [{"id": "a"}, {"memory": {"id": "b"}}, {"score": 1.0}]}
    assert result_ids(body) == ["a", "b"]
    assert result_ids({}) == []


def test_tokenize_lowercases_splits_and_drops_stopwords():
    assert tokenize("Don't you LOVE the 2 dogs?!") == ["love", "2", "dogs"]


def test_bm25_ranks_the_rarer_matching_term_higher():
    index = BM25(["the cat sat on the mat", "the dog sat on the log", "a cat and a dog"])
    scores = index.scores("cat")
    assert scores[1] == 0.0
    # Same tf, and the shorter document wins.
    assert scores[2] > scores[0] > 0
    assert index.rank("dog log") == [1, 2, 0]
    assert index.rank("dog log", k=1) == [1]


def test_bm25_matches_the_formula_by_hand():
    documents = ["apple banana", "apple apple cherry", "durian"]
    index = BM25(documents, k1=1.2, b=0.75)
    average = (2 + 3 + 1) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    expected = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / average))
    assert index.scores("apple")[1] == pytest.approx(expected)
    assert index.idf("apple") == pytest.approx(idf)
    assert index.idf("unknown") == 0.0
    assert index.scores("the of") == [0.0, 0.0, 0.0]


def test_bm25_refuses_an_empty_corpus():
    with pytest.raises(ValueError):
        BM25([])


def test_recall_at_k_counts_distinct_evidence_in_the_cut():
    ranked = ["D1", "D2", "D3", "D4"]
    assert recall_at_k(ranked, ["D2", "D4"], 2) == 0.5
    assert recall_at_k(ranked, ["D2", "D4"], 4) == 1.0
    assert recall_at_k(ranked, ["D9"], 4) == 0.0
    assert recall_at_k([], ["D1"], 10) == 0.0
    with pytest.raises(ValueError):
        recall_at_k(ranked, [], 1)


def test_figures_average_per_category_and_over_all_questions():
    questions = [
        Question("c", 0, "q0", 4, ("a",)),
        Question("c", 1, "q1", 4, ("b",)),
        Question("c", 2, "q2", 1, ("a", "b")),
    ]
    rankings = {"c#0": ["a", "x"], "c#1": ["x", "b"], "c#2": ["b", "x"]}
    result = figures(rankings, questions, (1, 2))
    assert result["single-hop"] == {"R@1": 50.0, "R@2": 100.0, "any@5": 100.0, "session@5": 100.0}
    assert result["multi-hop"] == {"R@1": 50.0, "R@2": 50.0, "any@5": 100.0, "session@5": 100.0}
    assert result["overall"]["R@1"] == pytest.approx(100 * (1 + 0 + 0.5) / 3)
    assert math.isnan(result["temporal"]["R@1"])
    counts = {"multi-hop": 1, "temporal": 0, "open-domain": 0, "single-hop": 2, "overall": 3}
    printed = table({"bm25": result}, counts, (1, 2))
    assert "4 single-hop" in printed and "100.0" in printed


def test_linear_fusion_scales_bm25_by_its_best_score():
    dense = np.array([0.5, 0.1, 0.0])
    lexical = np.array([0.0, 4.0, 2.0])
    assert linear_fusion(dense, lexical, 0.6) == pytest.approx([0.3, 0.46, 0.2])
    assert linear_fusion(dense, np.zeros(3), 0.6) == pytest.approx(0.6 * dense)


def test_rrf_fusion_and_top_keep_corpus_order_on_ties():
    first = np.array([3.0, 2.0, 1.0])
    second = np.array([1.0, 2.0, 3.0])
    fused = rrf_fusion(first, second, k=60)
    assert fused == pytest.approx([1 / 61 + 1 / 63, 2 / 62, 1 / 63 + 1 / 61])
    assert top(fused, ["a", "b", "c"], 2) == ["a", "c"]


def test_loose_measures_count_any_evidence_turn_and_evidence_sessions():
    from benchmarks.quality import any_at_k, session_at_k, session_of

    assert session_of("D8:6") == "D8"
    assert any_at_k(["D1:1", "D2:3"], ["D2:3", "D9:1"], 2) == 1.0
    assert any_at_k(["D1:1", "D2:3"], ["D2:3"], 1) == 0.0
    assert session_at_k(["D1:1", "D2:4"], ["D2:3"], 2) == 1.0
    assert session_at_k(["D1:1", "D2:4"], ["D3:3"], 2) == 0.0


def test_folds_fuse_the_pool_as_recall_fuses_it_and_fit_on_the_other_conversations():
    from benchmarks.quality_folds import PoolItem, Reach, fit, fused_order, held_out

    # b matches the query's words weakly but sits a minute from the strong a; c is alone, days away.
    pool = [
        PoolItem("a", {"vector": 0.9, "keyword": 0.0}, 0.0),
        PoolItem("c", {"vector": 0.45, "keyword": 0.0}, 500_000.0),
        PoolItem("b", {"vector": 0.3, "keyword": 0.5}, 60.0),
    ]
    assert fused_order(pool, {"vector": 1.0}, Reach(1800)) == ["a", "c", "b"]
    assert fused_order(pool, {"vector": 1.0, "neighbourhood": 0.5}, Reach(1800)) == ["a", "b", "c"]
    assert fused_order(pool, {"vector": 1.0, "neighbourhood": 0.5}, Reach(0)) == ["a", "c", "b"]

    def objective(rankings):  # b wanted second
        return sum(r.index("b") == 1 for r in rankings.values())

    weights = fit({"q": pool}, objective, {"vector": 1.0}, Reach(1800), fitted=("neighbourhood",), grid=(0.0, 0.5))
    assert weights == {"vector": 1.0, "neighbourhood": 0.5}
    # Held out: each conversation ranked with what the other one chose.
    pools = {"one": {"one#0": pool}, "two": {"two#0": pool}}
    rankings, chosen = held_out(pools, lambda _: objective, {"vector": 1.0}, Reach(1800))
    assert rankings["one#0"] == ["a", "b", "c"]
    assert set(chosen) == {"one", "two"}


@pytest.mark.parametrize("adjacent", [0, 2])
def test_the_folds_fuse_a_pool_in_the_order_recall_ranks_it(adjacent):
    """The benchmark's offline fusion and recall's ranking agree (the folds'
    figures mean what recall would do), with the neighbourhood over every
    candidate that close in time and over the adjacent ones only; times
    repeat, as a conversation stored with its sessions' times does, so the
    order they were stored in decides adjacency."""
    from datetime import UTC, datetime, timedelta

    from benchmarks.quality_folds import PoolItem, Reach, fused_order
    from services.core.domain.recall_ranking import Candidate, order, with_neighbourhood
    from tests.factories import memory_at
    from tests.unit.test_recall_domain import policy

    rng = np.random.default_rng(3)
    weights = {"vector": 0.4, "keyword": 0.3, "speaker": 0.3, "neighbourhood": 1.0}
    at = datetime(2026, 1, 1, tzinfo=UTC)
    pool, candidates = [], []
    for i in range(60):
        components = {"vector": float(rng.random()), "keyword": float(rng.random()), "speaker": float(rng.integers(2))}
        when = at + timedelta(minutes=10 * int(rng.integers(0, 60)))
        stored = at + timedelta(seconds=int(rng.permutation(1000)[0]), microseconds=i)
        pool.append(PoolItem(f"m{i}", components, when.timestamp(), stored=stored.timestamp()))
        candidate = Candidate(f"m{i}", memory=memory_at(f"m{i}", when, importance=0.5, recorded_at=stored))
        candidate.components = {**components, "neighbourhood": 0.0}
        candidate.final = sum(weights.get(n, 0.0) * v for n, v in components.items())
        candidates.append(candidate)
    reach = policy(neighbourhood_seconds=1800.0, neighbourhood_adjacent=adjacent)
    with_neighbourhood(candidates, reach, weights, search=True)
    assert [c.id for c in order(candidates, "score")] == fused_order(pool, weights, Reach(1800.0, adjacent))


def test_the_reranked_folds_order_a_pool_as_recall_serves_it():
    """The benchmark's reranked order (benchmarks/quality_rerank.py) is the
    order recall's second stage gives the same candidates with the shipped model."""
    from benchmarks.quality_folds import PoolItem, Reach, fused
    from benchmarks.quality_rerank import reranked
    from services.core.domain.recall_ranking import Candidate, order
    from services.recall.rerank_stage import RerankStage, load_model
    from tests.factories import memory_at
    from tests.unit.test_recall_domain import req

    model = load_model("")
    assert model is not None
    rng = np.random.default_rng(5)
    weights = {"vector": 0.4, "keyword": 0.15, "speaker": 0.2, "related": 0.1, "tag": 0.1}
    at = datetime(2026, 1, 1, tzinfo=UTC)
    pool, candidates = [], []
    for i in range(40):
        components = {
            "vector": round(float(rng.random()), 6),
            "keyword": round(float(rng.random()) * float(rng.integers(2)), 6),
            "speaker": float(rng.integers(2)),
            "related": round(float(rng.random()) * 0.5, 6),
            "tag": 0.857143,
        }
        pool.append(PoolItem(f"m{i}", components, at.timestamp()))
    for item, score in fused(pool, weights, Reach(0)):
        candidate = Candidate(item.dia_id, memory=memory_at(item.dia_id, at, importance=0.5))
        candidate.components, candidate.final = dict(item.components), score
        candidates.append(candidate)
    RerankStage(model, depth=25).apply(req(queries=["x"]), candidates, {})
    served = [c.id for c in order(candidates, "score")]
    assert served == reranked(pool, weights, Reach(0), 25, model)
    assert served[:25] != [item.dia_id for item, _ in fused(pool, weights, Reach(0))][:25]  # it did reorder
