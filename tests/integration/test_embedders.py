"""The real embedders: the local all-MiniLM-L6-v2 model (onnxruntime, the
installed model files), and the real `openai` client over real HTTP against a
stub embeddings server on a free local port (never the real API)."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import openai
import pytest

from services.core.adapters.embedders import LocalMiniLMEmbedder, OpenAIEmbedder, embedder_from
from services.core.settings import Settings

pytestmark = pytest.mark.integration

MODEL = "text-embedding-3-small"
DIMENSION = 8


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


# The local model.


@pytest.fixture(scope="module")
def local() -> LocalMiniLMEmbedder:
    # One instance for the module: the model loads once, on its first call.
    return LocalMiniLMEmbedder(batch_size=32)


async def test_local_vectors_are_384_dimensional_unit_vectors(local):
    vectors = await local.embed(["The cat sits on the mat", "", "café ☕ — déjà vu"])
    assert len(vectors) == 3
    for vector in vectors:
        assert len(vector) == 384
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


async def test_local_paraphrases_are_close_and_unrelated_text_is_not(local):
    cat, paraphrase, revenue = await local.embed(
        ["The cat sits on the mat", "A cat is sitting on a mat", "Quarterly revenue grew by ten percent"]
    )
    # Measured: 0.97 for the paraphrase, about -0.02 and -0.01 for the unrelated sentence.
    assert cosine(cat, paraphrase) > 0.85
    assert cosine(cat, revenue) < 0.2
    assert cosine(paraphrase, revenue) < 0.2


async def test_local_matches_the_published_sentence_transformers_scores(local):
    # sentence-transformers' documented scores for all-MiniLM-L6-v2 (fp32):
    # the int8 model with our tokenisation and pooling lands within 0.01.
    movie, great, guitar, tv = await local.embed(
        ["The new movie is awesome", "The new movie is so great", "A man is playing guitar", "A woman watches TV"]
    )
    assert cosine(movie, great) == pytest.approx(0.8939, abs=0.01)
    assert cosine(guitar, tv) == pytest.approx(-0.0327, abs=0.01)


async def test_local_keeps_the_order_across_batches(local):
    texts = ["short", "a somewhat longer sentence about graphs", "mid length text", "x", "the longest one " * 6]
    alone = [(await local.embed([text]))[0] for text in texts]
    # batch_size 2: three batches, and the length sort inside embed reorders them.
    batched = await LocalMiniLMEmbedder(batch_size=2, intra_op_threads=1).embed(texts)
    for expected, found in zip(alone, batched, strict=True):
        assert cosine(expected, found) > 0.999


async def test_local_padding_does_not_change_a_vector(local):
    text = "The cat sits on the mat"
    (alone,) = await local.embed([text])
    long = "This much longer sentence makes the batch pad the short one with many tokens. " * 3
    in_batch = (await local.embed([long, text, long]))[1]
    assert cosine(alone, in_batch) > 0.999


async def test_local_truncates_at_256_word_pieces_not_the_files_128(local):
    prefix = "memory " * 200  # one word piece each, plus [CLS] and [SEP]
    beyond_128_a, beyond_128_b, beyond_256_a, beyond_256_b = await local.embed(
        [
            prefix + "bananas and apples in the kitchen",
            prefix + "quarterly revenue and tax filings",
            prefix + "memory " * 60 + "bananas and apples in the kitchen",
            prefix + "memory " * 60 + "quarterly revenue and tax filings",
        ]
    )
    assert cosine(beyond_128_a, beyond_128_b) < 0.999  # words after token 128 still count
    assert cosine(beyond_256_a, beyond_256_b) > 0.99999  # words after token 256 are cut


async def test_local_embedding_does_not_block_the_event_loop():
    embedder = LocalMiniLMEmbedder(batch_size=8)  # fresh: the first call also loads the model
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.005)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        await embedder.embed([f"sentence number {i} about memory" for i in range(32)])
    finally:
        ticker.cancel()
    assert ticks > 5


def _rss_anon_mib() -> float:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("RssAnon:")).split()[1]) / 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the process's RSS from /proc")
async def test_local_gives_a_calls_working_memory_back():
    # With onnxruntime's arena a call's activations stayed: after these calls the process held
    # about 550 MiB more than before the model (and more with each new shape: 300 -> 975 MB over
    # the soak's 200 calls of 1-64 texts). Given back, about 150 MiB stay: the model and its session.
    before = _rss_anon_mib()
    embedder = LocalMiniLMEmbedder(batch_size=32, intra_op_threads=1, parallel=2)
    words = ["deploy", "the", "cache", "before", "the", "review", "meeting", "on", "kubernetes", "with", "postgres"]
    calls = [(count, length) for length in (5, 30, 80) for count in (1, 16, 48)]
    for salt, (count, length) in enumerate(calls * 2):
        texts = [" ".join(words[(i + salt + k) % len(words)] for k in range(length)) for i in range(count)]
        await embedder.embed(texts)
    held = _rss_anon_mib() - before
    assert held < 250, f"RssAnon {held:.0f} MiB over its level before the model, after {2 * len(calls)} calls"


def _parts_of(embedder: LocalMiniLMEmbedder) -> list[list[str]]:
    """The texts of each part the embedder runs, recorded as it runs them."""
    parts: list[list[str]] = []
    blocking = embedder._embed_blocking

    def recorded(part: list[str]) -> list[list[float]]:
        parts.append(list(part))
        return blocking(part)

    embedder._embed_blocking = recorded  # type: ignore[method-assign]
    return parts


async def test_local_splits_a_query_and_its_twin_one_a_core_with_the_same_vectors(local):
    # Recall's query embedder (part_size 1, RECALL_EMBED_PARALLEL 2): a question and its nameless
    # twin run side by side, one text a part, instead of one batch of two on one core.
    texts = ["What did Caroline research last week?", "What did research last week?"]
    split = LocalMiniLMEmbedder(intra_op_threads=1, parallel=2, part_size=1)
    parts = _parts_of(split)
    vectors = await split.embed(texts)
    assert sorted(parts) == sorted([[texts[0]], [texts[1]]])
    for a, b in zip(vectors, await local.embed(texts), strict=True):
        assert a == pytest.approx(b, abs=1e-5)
    whole = LocalMiniLMEmbedder(intra_op_threads=1, parallel=2)  # parts of a batch's worth: one part
    whole_parts = _parts_of(whole)
    await whole.embed(texts)
    assert whole_parts == [texts]


async def test_local_embeds_an_empty_list_without_loading():
    assert await LocalMiniLMEmbedder().embed([]) == []


async def test_local_quantized_model_is_built_once_and_stays_close_to_the_float32_one(local, tmp_path):
    quantized = LocalMiniLMEmbedder(quantized=True, cache_dir=tmp_path)
    assert quantized.name == "local:all-MiniLM-L6-v2:dynamic-int8" != local.name
    texts = ["The cat sits on the mat", "Caroline researched adoption agencies", "We deploy Redis on Fridays"]
    near, exact = await quantized.embed(texts), await local.embed(texts)
    # Measured on 600 LoCoMo turns: cosine 0.979 at worst, 0.992 on average.
    assert all(cosine(a, b) > 0.97 for a, b in zip(near, exact, strict=True))
    assert all(cosine(a, b) < 0.9999 for a, b in zip(near, exact, strict=True))  # really another model
    (built,) = tmp_path.glob("*.onnx")
    stamp = built.stat().st_mtime_ns
    again = LocalMiniLMEmbedder(quantized=True, cache_dir=tmp_path)
    # The same batch: activations are quantised per call, so a text's vector moves a little with its batch-mates.
    assert await again.embed(texts) == near
    assert built.stat().st_mtime_ns == stamp and list(tmp_path.glob("*")) == [built]  # loaded, not rebuilt


# The OpenAI embedder against a stub server.


def stub_vector(text: str, dimension: int) -> list[float]:
    """What the stub answers for a text: not unit length, and distinct per text."""
    return [float(ord(text[i % len(text)]) + i) for i in range(dimension)]


def unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    return array / np.linalg.norm(array)


class StubEmbeddings:
    """An OpenAI-compatible POST /v1/embeddings that answers with stub_vector
    for each input, in reverse order (the client must sort by `index`)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.length_offset = 0  # answer vectors this much longer than asked
        self.always_floats = False  # like servers that ignore encoding_format
        self.drop_last = False  # answer one vector too few
        self.status = 200
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                status, reply = stub._answer(self.path, body)
                payload = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def _answer(self, path: str, body: dict) -> tuple[int, dict]:
        with self._lock:
            self.paths.append(path)
            self.requests.append(body)
        if self.status != 200:
            return self.status, {"error": {"message": "boom", "type": "server_error", "code": None}}
        length = body.get("dimensions", DIMENSION) + self.length_offset
        data = []
        for index, text in enumerate(body["input"]):
            vector = stub_vector(text, length)
            if body.get("encoding_format") == "base64" and not self.always_floats:
                encoded: object = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            else:
                encoded = vector
            data.append({"object": "embedding", "index": index, "embedding": encoded})
        if self.drop_last:
            data.pop()
        data.reverse()
        usage = {"prompt_tokens": len(body["input"]), "total_tokens": len(body["input"])}
        return 200, {"object": "list", "data": data, "model": body["model"], "usage": usage}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture
def stub() -> Iterator[StubEmbeddings]:
    server = StubEmbeddings()
    server.start()
    yield server
    server.stop()


@pytest.fixture
async def remote(stub) -> OpenAIEmbedder:
    embedder = OpenAIEmbedder(
        api_key="sk-test", base_url=stub.base_url, model=MODEL, dimension=DIMENSION, batch_size=2, timeout_seconds=5.0
    )
    yield embedder
    await embedder.close()


TEXTS = ["alpha", "bravo", "charlie", "delta", "echo"]


async def test_openai_sends_batches_with_model_and_dimensions(stub, remote):
    await remote.embed(TEXTS)
    assert stub.paths == ["/v1/embeddings"] * 3
    assert [request["input"] for request in stub.requests] == [["alpha", "bravo"], ["charlie", "delta"], ["echo"]]
    for request in stub.requests:
        assert request["model"] == MODEL
        assert request["dimensions"] == DIMENSION


async def test_openai_orders_by_index_and_normalises(stub, remote):
    vectors = await remote.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    for text, vector in zip(TEXTS, vectors, strict=True):
        assert len(vector) == DIMENSION
        assert np.linalg.norm(vector) == pytest.approx(1.0)
        np.testing.assert_allclose(vector, unit(stub_vector(text, DIMENSION)), rtol=1e-6)
    assert remote.name == f"openai:{MODEL}"
    assert remote.dimension == DIMENSION


async def test_openai_accepts_float_lists_from_servers_that_ignore_base64(stub, remote):
    stub.always_floats = True
    vectors = await remote.embed(TEXTS[:3])
    for text, vector in zip(TEXTS[:3], vectors, strict=True):
        np.testing.assert_allclose(vector, unit(stub_vector(text, DIMENSION)), rtol=1e-6)


@pytest.mark.parametrize("offset", [1, -1])
async def test_openai_refuses_a_vector_of_the_wrong_length(stub, remote, offset):
    stub.length_offset = offset
    with pytest.raises(ValueError, match=rf"{DIMENSION + offset}-dimensional vector, expected {DIMENSION}"):
        await remote.embed(TEXTS[:2])


async def test_openai_refuses_an_answer_missing_a_vector(stub, remote):
    stub.drop_last = True
    with pytest.raises(ValueError, match="indices"):
        await remote.embed(TEXTS[:2])


async def test_openai_raises_on_a_server_error_after_one_request(stub, remote):
    stub.status = 500
    with pytest.raises(openai.APIStatusError):
        await remote.embed(TEXTS[:2])
    assert len(stub.requests) == 1


async def test_openai_embeds_an_empty_list_without_a_request(stub, remote):
    assert await remote.embed([]) == []
    assert stub.requests == []


async def test_openai_from_settings_uses_model_size_and_batch_size(stub):
    settings = Settings(
        _env_file=None,
        embedding_provider="auto",
        openai_api_key="sk-test",
        openai_base_url=stub.base_url,
        embedding_model="my-embedder",
        vector_size=16,
        embedding_batch_size=4,
    )
    embedder = embedder_from(settings.models, settings.vectors.vector_size)
    assert isinstance(embedder, OpenAIEmbedder)
    try:
        vectors = await embedder.embed(TEXTS)
    finally:
        await embedder.close()
    assert [len(vector) for vector in vectors] == [16] * 5
    assert [len(request["input"]) for request in stub.requests] == [4, 1]
    assert {request["model"] for request in stub.requests} == {"my-embedder"}
    assert {request["dimensions"] for request in stub.requests} == {16}
