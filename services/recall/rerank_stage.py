"""The reranker's place in a query's recall (domain/rerank.py): after the
first stage's scores and neighbourhood, before the current-state pass, the
best RECALL_RERANK_DEPTH candidates are ordered by the learned model and
take the first stage's scores in that order. Without a model (switched off,
or a file that cannot be read) recall answers in the first stage's order."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import structlog

from services.core.domain import recall_ranking as ranking
from services.core.domain.recall_ranking import Candidate
from services.core.domain.recall_request import INTENTS, RecallRequest
from services.core.domain.rerank import TreeModel, features, reordered

log = structlog.get_logger()

#: The intent whose first stage the model was fitted on (recall's own weights, not browse's).
RANKED_INTENT = INTENTS[0]
#: The model shipped with recall (fitted by benchmarks/quality_rerank.py).
PACKAGED = "rerank_model.json"


def load_model(path: str) -> TreeModel | None:
    """The model at `path` ("" the packaged one); None, with a warning, when
    it cannot be read or does not fit this release's features."""
    try:
        if path:
            text = Path(path).read_text(encoding="utf-8")
        else:
            text = resources.files("services.recall").joinpath(PACKAGED).read_text(encoding="utf-8")
        return TreeModel.from_dict(json.loads(text))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("recall's reranker is off: its model cannot be read", path=path or PACKAGED, error=str(exc))
        return None


class RerankStage:
    def __init__(self, model: TreeModel | None, depth: int):
        self._model = model
        self._depth = depth

    @property
    def active(self) -> bool:
        return self._model is not None and self._depth > 1

    def apply(self, request: RecallRequest, candidates: list[Candidate], debug: dict) -> None:
        """Reorder a query's best candidates by the model (recall intent, ranked by score)."""
        if self._model is None or self._depth <= 1:
            return
        if not request.has_query or request.sort != "score" or request.intent != RANKED_INTENT:
            return
        top = ranking.order([c for c in candidates if c.memory is not None], "score")[: self._depth]
        if len(top) < 2:
            return
        finals = [c.final for c in top]
        try:
            scores = self._model.predict(features([c.components for c in top], finals))
        except (ValueError, IndexError) as exc:  # a model that does not fit: the first stage's order stands
            debug.setdefault("degraded", []).append(f"rerank: {exc}")
            return
        for candidate, final in zip(top, reordered(finals, scores.tolist()), strict=True):
            candidate.final = final
        debug["reranked"] = len(top)
