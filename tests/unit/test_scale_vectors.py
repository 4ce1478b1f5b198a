"""The scale loader's text-shaped vectors (benchmarks/scale_vectors.py),
on a made-up word table: no model is loaded."""

import numpy as np

from benchmarks.scale_vectors import TextVectors


def _vectors(size: int = 200, dimension: int = 32) -> tuple[list[str], TextVectors]:
    words = [f"w{i}" for i in range(size)]  # most frequent first, as the loader's vocabulary
    table = np.random.default_rng(0).standard_normal((size, dimension)).astype(np.float32)
    return words, TextVectors(words, table / np.linalg.norm(table, axis=1, keepdims=True))


def test_every_text_gets_a_unit_vector():
    words, vectors = _vectors()
    built = vectors.of(["w0 w1 w150", "w3", "w199 w0 w0"])
    assert built.shape == (3, 32)
    assert np.allclose(np.linalg.norm(built, axis=1), 1.0, atol=1e-5)


def test_texts_sharing_a_rare_word_are_nearer_than_texts_sharing_a_common_one():
    words, vectors = _vectors()
    base, rare, common = vectors.of(["w0 w1 w120 w7", "w0 w2 w120 w9", "w0 w1 w130 w11"])
    # "rare" shares the rare w120 (and the commonest w0); "common" shares w0 and w1, the commonest two
    assert base @ rare > base @ common


def test_the_same_text_gets_the_same_vector_and_word_order_does_not_matter():
    words, vectors = _vectors()
    one, two = vectors.of(["w5 w80 w9", "w9 w5 w80"])
    assert np.allclose(one, two, atol=1e-6)


def test_texts_are_spread_rather_than_all_alike():
    words, vectors = _vectors(size=5000, dimension=64)  # the loader's vocabulary is 5,000 words
    rng = np.random.default_rng(1)
    ranks = [r for r in rng.zipf(1.3, 20_000) if r <= len(words)]
    texts = [" ".join(words[r - 1] for r in ranks[i : i + 15]) for i in range(0, 15 * 300, 15)]
    built = vectors.of(texts)
    cosines = built @ built.T
    between = cosines[np.triu_indices(len(texts), k=1)]
    assert between.mean() < 0.5  # the common words' shared direction is taken out
    assert between.max() < 0.999
