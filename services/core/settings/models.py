"""The models: the embedder and the language model (classification, summaries)."""

from __future__ import annotations

from services.core.settings.base import Group


class ModelSettings(Group):
    """Models: the embedder (recall's queries, enrich) and the language model (ingest, enrich, consolidate)."""

    # Embeddings: auto = openai with a key, else the local model.
    embedding_provider: str = "auto"  # auto | local | openai | placeholder
    embedding_model: str = "text-embedding-3-small"  # the OpenAI model (provider openai)
    embedding_batch_size: int = 32  # texts an embedder call takes at once
    # onnxruntime threads for the local model; 1 leaves the other core to spaCy,
    # which runs beside it on each batch (0: onnxruntime decides).
    embedding_threads: int = 1
    # The local model quantised dynamically (int8 matrix products, built from the
    # packaged model on first use and cached in $XDG_CACHE_HOME/memgrid/models):
    # faster, for slightly different vectors, which also move a little with their
    # batch-mates (activations are quantised per call), and slightly lower recall
    # (docs/performance.md). A model change: vectors stored with one setting do
    # not match the other's, re-embed.
    embedding_local_quantized: bool = False
    # The local model gives a call's working memory back when it ends (onnxruntime's
    # arena and memory patterns off, glibc's malloc_trim): a flat RSS under batches
    # of every size; false keeps the arena, whose RSS grows to the largest batches'.
    embedding_release_memory: bool = True

    # Language model (classification, summaries). No key: the LLM steps are skipped.
    openai_api_key: str | None = None  # unset: no LLM steps
    openai_base_url: str | None = None  # any OpenAI-compatible server
    classification_model: str = "gpt-4o-mini"  # classifies a memory sent without a type
    summarization_model: str | None = None  # None: the classification model
    llm_timeout_seconds: float = 20.0  # one LLM call's deadline
    classification_input_chars: int = 1000  # the content the classifier reads at most
    enrichment_circuit_cooldown_seconds: float = 300.0  # LLM calls pause this long after a quota error
    llm_max_concurrency: int = 8  # LLM calls in flight at once
