"""Vectors for the scale loader's memories shaped like text embeddings
(benchmarks/scale_seed.py, `--scale-vectors text`).

Embedding a million memories with the local MiniLM would take most of an
hour on two cores, so each memory's vector is built from its words instead:
the MiniLM vectors of the vocabulary's words (embedded once, a few seconds),
averaged with smooth inverse-frequency weights (a/(a + p(word)): common
words count for little), the words' common direction removed, then
normalised. Memories sharing rare words are near each other and a query
embedded by MiniLM lands among the memories holding its words, as with real
embeddings, where random unit vectors (`random`, the loader's old vectors)
put every memory about as far from every other: the hard case for an HNSW
graph, and not what a memory store holds. `fidelity()` measures how close
these vectors come to the real MiniLM embeddings of the same texts:

    python -m benchmarks.scale_vectors [--texts 3000 --queries 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json

import numpy as np

from services.core.adapters.embedders import LocalMiniLMEmbedder

#: Smooth inverse frequency's weight: a / (a + p(word)).
SIF_A = 1e-3
#: The Zipf exponent the loader draws words with (recall_latency.zipf_words).
ZIPF = 1.3


class TextVectors:
    """Vectors for texts made of the vocabulary's words."""

    def __init__(self, words: list[str], embedded: np.ndarray):
        self._index = {w: i for i, w in enumerate(words)}
        ranks = np.arange(1, len(words) + 1, dtype=np.float64)
        share = ranks**-ZIPF
        share /= share.sum()
        weighted = embedded * (SIF_A / (SIF_A + share))[:, None]
        self._common = weighted.mean(axis=0)
        self._common /= np.linalg.norm(self._common)
        self._table = weighted.astype(np.float32)

    @classmethod
    async def embedded(cls, words: list[str]) -> TextVectors:
        """The vocabulary's words embedded by the local MiniLM (seconds for 5,000)."""
        embedder = LocalMiniLMEmbedder(batch_size=256)
        return cls(words, np.asarray(await embedder.embed(words), dtype=np.float32))

    def of(self, texts: list[str]) -> np.ndarray:
        """One unit vector a text: its known words' weighted mean, less the common direction."""
        out = np.zeros((len(texts), self._table.shape[1]), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = [self._index[w] for w in text.split() if w in self._index]
            if ids:
                out[row] = self._table[ids].sum(axis=0)
        out -= np.outer(out @ self._common, self._common).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


async def fidelity(words: list[str], texts: list[str], queries: list[str]) -> dict[str, float]:
    """How these vectors stand against MiniLM's own for the same texts: the
    mean cosine of a text's two vectors, the mean cosine between different
    texts under each (how spread the store is), and the share of the ten
    nearest texts to a MiniLM query that both kinds of vectors agree on."""
    embedder = LocalMiniLMEmbedder(batch_size=64)
    vectors = await TextVectors.embedded(words)
    built = vectors.of(texts)
    real = np.asarray(await embedder.embed(texts), dtype=np.float32)
    asked = np.asarray(await embedder.embed(queries), dtype=np.float32)
    pairs = np.random.default_rng(0).integers(0, len(texts), size=(2000, 2))
    overlap = []
    for query in asked:
        near_real = set(np.argsort(-(real @ query))[:10])
        near_built = set(np.argsort(-(built @ query))[:10])
        overlap.append(len(near_real & near_built) / 10)
    return {
        "same_text_cosine": float(np.mean(np.sum(built * real, axis=1))),
        "between_texts_cosine_built": float(np.mean(np.sum(built[pairs[:, 0]] * built[pairs[:, 1]], axis=1))),
        "between_texts_cosine_real": float(np.mean(np.sum(real[pairs[:, 0]] * real[pairs[:, 1]], axis=1))),
        "query_top10_agreement": float(np.mean(overlap)),
    }


def main() -> None:
    from benchmarks.recall_latency import distinct_queries, vocabulary, zipf_words

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=3000, help="loader texts embedded both ways")
    parser.add_argument("--queries", type=int, default=100, help="MiniLM queries whose ten nearest are compared")
    args = parser.parse_args()
    words = vocabulary(np.random.default_rng(7), "locomo")
    rng = np.random.default_rng(1)
    texts = [" ".join(zipf_words(rng, words, int(rng.integers(10, 26)))) for _ in range(args.texts)]
    queries = distinct_queries(np.random.default_rng(5), words, args.queries)
    print(json.dumps(asyncio.run(fidelity(words, texts, queries))), flush=True)


if __name__ == "__main__":
    main()
