"""Recall's second stage (services/core/domain/rerank.py and
services/recall/rerank_stage.py): the trees score as LightGBM's own, the
features read the first stage's candidates, the stage reorders a query's top
only, and without a usable model recall keeps the first stage's order."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import lightgbm
import numpy as np
import pytest

from services.core.domain.recall_ranking import Candidate
from services.core.domain.rerank import FEATURES, TreeModel, features, from_lightgbm, reordered
from services.recall.rerank_stage import RerankStage, load_model
from tests.factories import memory_at
from tests.unit.test_recall_domain import req

AT = datetime(2026, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize("leaves", [2, 7, 31])
def test_the_trees_score_as_lightgbms_own(leaves):
    # 2: stumps, whose root has two leaves; 31: deeper, unbalanced trees.
    rng = np.random.default_rng(3)
    rows = rng.random((400, len(FEATURES)))
    rows[:, 4] = rng.integers(0, 2, 400)  # a 0/1 feature, as `exact` is: splits land on its values
    labels = (rows[:, 0] + 0.5 * rows[:, 4] + 0.2 * rng.random(400) > 0.9).astype(int)
    data = lightgbm.Dataset(rows, labels, group=[20] * 20)
    params = {"objective": "lambdarank", "num_leaves": leaves, "min_data_in_leaf": 5, "verbose": -1, "num_threads": 1}
    booster = lightgbm.train(params, data, num_boost_round=30)
    model = from_lightgbm(booster.dump_model())
    fresh = rng.random((50, len(FEATURES)))
    fresh[:, 4] = rng.integers(0, 2, 50)
    assert model.predict(fresh) == pytest.approx(booster.predict(fresh), abs=1e-9)
    # As shipped: through JSON and back.
    shipped = TreeModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert shipped.predict(fresh) == pytest.approx(booster.predict(fresh), abs=1e-9)


def test_a_tree_of_a_single_leaf_scores_its_leaf_and_one_of_too_many_leaves_is_refused():
    stump = {"split_feature": 0, "threshold": 0.5, "decision_type": "<=",
             "left_child": {"leaf_value": -1.0}, "right_child": {"leaf_value": 2.0}}  # fmt: skip
    model = from_lightgbm({"tree_info": [{"tree_structure": {"leaf_value": 0.25}}, {"tree_structure": stump}]})
    rows = np.zeros((2, len(FEATURES)))
    rows[1, 0] = 0.9
    assert model.predict(rows).tolist() == [-0.75, 2.25]

    def chain(depth: int) -> dict:  # a tree of depth + 1 leaves
        if depth == 0:
            return {"leaf_value": 1.0}
        return {"split_feature": 0, "threshold": float(depth), "decision_type": "<=",
                "left_child": chain(depth - 1), "right_child": {"leaf_value": 0.0}}  # fmt: skip

    wide = from_lightgbm({"tree_info": [{"tree_structure": chain(64)}]})
    with pytest.raises(ValueError, match="65 leaves"):
        TreeModel.from_dict(json.loads(json.dumps(wide.to_dict())))


def test_the_features_read_each_candidate_against_the_others():
    rows = features(
        [{"vector": 0.4, "keyword": 1.0}, {"vector": 0.8, "keyword": 0.0}, {"vector": 0.2}],
        [0.9, 0.6, 0.3],
    )
    column = {name: rows[:, index].tolist() for index, name in enumerate(FEATURES)}
    assert rows.shape == (3, len(FEATURES))
    assert column["vector"] == [0.4, 0.8, 0.2]
    assert column["vector/best"] == pytest.approx([0.5, 1.0, 0.25])
    assert column["vector rank"] == pytest.approx([math.log1p(1), 0.0, math.log1p(2)])
    assert column["keyword rank"] == pytest.approx([0.0, math.log1p(1), math.log1p(2)])  # ties keep the order
    assert column["speaker/best"] == [0.0, 0.0, 0.0]  # no candidate has it: no division by 0
    assert column["fused rank"] == pytest.approx([0.0, math.log1p(1), math.log1p(2)])
    assert column["fused/best"] == pytest.approx([1.0, 0.6 / 0.9, 0.3 / 0.9])
    assert features([], []).shape == (0, len(FEATURES))


def test_the_first_stages_scores_are_handed_out_in_the_new_order():
    assert reordered([0.9, 0.6, 0.3], [0.1, 2.0, 0.5]) == [0.3, 0.9, 0.6]
    assert reordered([0.9, 0.6], [1.0, 1.0]) == [0.9, 0.6]  # a tie keeps the first stage's order


def _keyword_model() -> TreeModel:
    """One tree: a candidate with a keyword match above 0.5 scores 1, any other 0."""
    keyword = FEATURES.index("keyword")
    return TreeModel(
        feature=np.array([[keyword]]),
        threshold=np.array([[0.5]]),
        left=np.array([[~0]]),
        right=np.array([[~1]]),
        leaf=np.array([[0.0, 1.0]]),
        depth=1,
    )


def _candidates() -> list[Candidate]:
    made = []
    for memory_id, final, keyword in (("a", 0.9, 0.0), ("b", 0.8, 0.0), ("c", 0.7, 1.0), ("d", 0.2, 1.0)):
        candidate = Candidate(memory_id, memory=memory_at(memory_id, AT))
        candidate.components = {"vector": final, "keyword": keyword}
        candidate.final = final
        made.append(candidate)
    return made


def test_the_stage_reorders_a_querys_top_and_only_its_top():
    candidates = _candidates()
    debug: dict = {}
    RerankStage(_keyword_model(), depth=3).apply(req(queries=["x"]), candidates, debug)
    # c (a keyword match) goes first within the top 3 and takes its best score; d, below the top, stays.
    assert {c.id: c.final for c in candidates} == {"c": 0.9, "a": 0.8, "b": 0.7, "d": 0.2}
    assert debug["reranked"] == 3


@pytest.mark.parametrize(
    "params",
    [{"queries": []}, {"queries": ["x"], "intent": "browse"}, {"queries": ["x"], "sort": "time_desc"}],
    ids=["no query", "browse", "by time"],
)
def test_the_stage_leaves_what_is_not_a_querys_ranking(params):
    candidates = _candidates()
    RerankStage(_keyword_model(), depth=3).apply(req(**params), candidates, {})
    assert [c.final for c in candidates] == [0.9, 0.8, 0.7, 0.2]


def test_without_a_usable_model_recall_keeps_the_first_stages_order(tmp_path):
    assert load_model(str(tmp_path / "missing.json")) is None
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({**_keyword_model().to_dict(), "features": ["vector"]}))
    assert load_model(str(foreign)) is None
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert load_model(str(broken)) is None
    stage = RerankStage(load_model(str(broken)), depth=50)
    candidates = _candidates()
    stage.apply(req(queries=["x"]), candidates, {})
    assert not stage.active
    assert [c.final for c in candidates] == [0.9, 0.8, 0.7, 0.2]


def test_the_shipped_model_reads_this_releases_features():
    model = load_model("")
    assert model is not None
    assert model.names == FEATURES
    assert model.predict(features([{"vector": 0.5}, {"keyword": 1.0}], [0.5, 0.4])).shape == (2,)
