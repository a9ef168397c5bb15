"""all-MiniLM-L6-v2 in numpy gives the numbers sentence-transformers publishes for it."""

from __future__ import annotations

import numpy as np
import pytest

from swarmlog.actors.memory.embeddings import MiniLM

# The sentence-transformers quickstart's example and its printed similarities for all-MiniLM-L6-v2.
SENTENCES = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
PUBLISHED = [[1.0000, 0.6660, 0.1046], [0.6660, 1.0000, 0.1411], [0.1046, 0.1411, 1.0000]]


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM()


def test_similarities_match_the_published_reference(model):
    vectors = model.embed(SENTENCES)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors @ vectors.T, PUBLISHED, atol=2e-3)


def test_a_text_embeds_the_same_alone_and_padded_in_a_batch(model):
    long = "A much longer sentence about the weather, with many more tokens than the short one has."
    np.testing.assert_allclose(model.embed(["Sunny."])[0], model.embed(["Sunny.", long])[0], atol=1e-5)


def test_long_texts_are_truncated_to_the_model_limit(model):
    vector = model.embed(["word " * 1000])[0]
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)
