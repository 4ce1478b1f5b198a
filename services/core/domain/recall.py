"""Transition only: the former services.core.domain.recall is now three
modules by job (recall_text: words, stems, BM25 and the frequency rules;
recall_request: policy, scope and the request; recall_ranking: candidates
and their ranking). These are the names the graph adapter still imports
from here; import them from those modules, and this module goes."""

from services.core.domain.recall_request import Scope
from services.core.domain.recall_text import DF_REACH, TextHit, df_count_cap

__all__ = ["DF_REACH", "Scope", "TextHit", "df_count_cap"]
