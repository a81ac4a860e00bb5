"""Text embedders for the ``semantic`` recall ranking: static word vectors, CPU, numpy.

No Django. The default embedder is WordLlama's 256-dimension static model (the
``semantic`` extra installs the ``wordllama`` package): its wheel ships the weights
(``weights/l2_supercat_256.safetensors``, a 32,000 × 256 float16 table) and the
tokenizer (``tokenizers/l2_supercat_tokenizer_config.json``). Its own loader looks for
the tokenizer under another folder name and would try a download, so this module reads
the shipped files itself: the safetensors header with numpy (the format is an 8-byte
length, a JSON header and the raw arrays) and the tokenizer with ``tokenizers``. The
embedding is WordLlama's: the mean of the text's token vectors (no special tokens),
then scaled to unit length (tests/recall/test_semantic.py compares it with
``WordLlama.embed``).

A deployment that brings its own embedder names it in ``MEMORYAPP_EMBEDDER``
(:func:`load`): a dotted path to a callable, or a model2vec-format directory
(``model.safetensors`` + ``tokenizer.json``, the same static-embedding layout). Nothing
is ever downloaded.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import re
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DEFAULT", "Embedder", "EmbedderUnavailable", "StaticEmbedder", "load"]

#: ``MEMORYAPP_EMBEDDER``'s default: the model the ``semantic`` extra ships.
DEFAULT = "wordllama"
_WORDLLAMA_WEIGHTS = "weights/l2_supercat_256.safetensors"
_WORDLLAMA_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_DTYPES = {"F16": np.float16, "F32": np.float32, "BF16": None}


def _digest(word: str) -> bytes:
    # Word caches are keyed by a digest, never the word: an erased memory's words must
    # not stay in a process's memory (docs/compliance.md, process memory).
    return hashlib.blake2b(word.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class EmbedderUnavailable(RuntimeError):
    """The configured embedder cannot be loaded (the extra missing, a bad path)."""


class Embedder:
    """What recall needs of an embedder: a model id and unit vectors for texts.

    Attributes:
        model_id: Names the model; vectors stored under another id are recomputed.
        dim: The vectors' dimension.
    """

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 vectors of unit length (zero for an empty text)."""
        raise NotImplementedError


class StaticEmbedder(Embedder):
    """Mean-pooled static token vectors: WordLlama's and model2vec's model layout.

    A SentencePiece-style tokenizer (a ``▁`` for each space, no pre-tokenizer: the
    shipped one) tokenises each word on its own, since no piece holds a ``▁`` after
    another character: the word's ids are cached, and the tokenizer's BPE model runs
    once per distinct word instead of once per text (a tenth of the cost of a write's
    embedding). tests/recall/test_semantic.py checks the ids equal the tokenizer's.
    Any other tokenizer is called as it is.
    """

    def __init__(self, table: np.ndarray, tokenizer: Any, model_id: str) -> None:
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.tokenizer = tokenizer
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.model_id = model_id
        self.dim = int(self.table.shape[1])
        self._words: dict[bytes, list[int]] = {}
        # Ids past the table are clipped (as WordLlama does) only if the vocabulary has any.
        self._clip = tokenizer.get_vocab_size() > len(self.table)
        self._by_word = _splits_by_word(tokenizer)

    def ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids of each text (no special tokens)."""
        if not self._by_word:
            encoded = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
            return [e.ids for e in encoded]
        words, model = self._words, self.tokenizer.model
        if len(words) > _WORD_CACHE:
            words.clear()
        out = []
        for text in texts:
            ids: list[int] = []
            for word in _WORD.findall(_SPACE + text.replace(" ", _SPACE)):
                key = _digest(word)  # the cache holds no word itself (see _digest)
                found = words.get(key)
                if found is None:
                    found = words[key] = [t.id for t in model.tokenize(word)]
                ids += found
            out.append(ids if text else [])
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        table, top = self.table, len(self.table) - 1
        for n, ids in enumerate(self.ids(texts)):
            if ids:
                # A gather and a sum per text beat one batched gather and a segmented sum
                # (np.add.reduceat along rows is several times slower than this loop). The
                # sum, not the mean: the scaling to unit length below makes them one.
                held = np.asarray(ids)
                if self._clip:
                    np.clip(held, 0, top, out=held)
                table.take(held, axis=0).sum(axis=0, out=out[n])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)


_SPACE = "\u2581"  # "▁", SentencePiece's space
_WORD = re.compile(f"{_SPACE}*[^{_SPACE}]+|{_SPACE}+")
_WORD_CACHE = 200_000  # distinct words cached; cleared (not evicted one by one) past it


def _splits_by_word(tokenizer: Any) -> bool:
    """Whether the tokenizer is the shipped kind: ``▁`` prepended, spaces replaced, no
    pre-tokenizer, BPE, and no vocabulary piece with a ``▁`` after another character."""
    try:
        config = json.loads(tokenizer.to_str())
    except (AttributeError, ValueError):
        return False
    normalizers = (config.get("normalizer") or {}).get("normalizers") or []
    shape = [
        (n.get("type"), n.get("prepend") or n.get("content"), n.get("pattern")) for n in normalizers
    ]
    model = config.get("model") or {}
    vocab = model.get("vocab") or {}
    return (
        shape == [("Prepend", _SPACE, None), ("Replace", _SPACE, {"String": " "})]
        and config.get("pre_tokenizer") is None
        and model.get("type") == "BPE"
        and not any(_SPACE in piece.lstrip(_SPACE) for piece in vocab)
    )


class _CallableEmbedder(Embedder):
    """A deployment's callable (``texts -> array``) as an :class:`Embedder`."""

    def __init__(self, function: Callable[[list[str]], Any], model_id: str) -> None:
        self.function = function
        self.model_id = model_id
        self.dim = int(np.asarray(function(["dimension probe"])).shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self.function(list(texts)), dtype=np.float32).reshape(
            len(texts), self.dim
        )
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-12)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The arrays of a safetensors file, read with numpy (header length, JSON, raw data)."""
    data = path.read_bytes()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    arrays: dict[str, np.ndarray] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(spec["dtype"])
        if dtype is None:
            raise EmbedderUnavailable(f"{path}: tensor dtype {spec['dtype']} is not supported")
        begin, end = spec["data_offsets"]
        arrays[name] = np.frombuffer(data[base + begin : base + end], dtype=dtype).reshape(
            spec["shape"]
        )
    return arrays


def _tokenizer(path: Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderUnavailable("the `tokenizers` package is not installed") from exc
    return Tokenizer.from_file(str(path))


def _wordllama() -> StaticEmbedder:
    try:
        spec = importlib.util.find_spec("wordllama")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(
            "the semantic ranking needs the `semantic` extra: pip install 'memoryapp[semantic]'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    weights, tokenizer = root / _WORDLLAMA_WEIGHTS, root / _WORDLLAMA_TOKENIZER
    if not (weights.is_file() and tokenizer.is_file()):
        raise EmbedderUnavailable(f"the installed wordllama package lacks {weights.name}")
    table = read_safetensors(weights)["embedding.weight"]
    return StaticEmbedder(table, _tokenizer(tokenizer), "wordllama/l2_supercat_256")


def _model_dir(path: Path) -> Embedder:
    if (path / "model.safetensors").is_file() and (path / "tokenizer.json").is_file():
        arrays = read_safetensors(path / "model.safetensors")
        table = arrays.get("embeddings", next(iter(arrays.values())))
        return StaticEmbedder(table, _tokenizer(path / "tokenizer.json"), f"dir:{path.name}")
    if (path / "modules.json").is_file():  # a Sentence-Transformers model directory
        try:
            from sentence_transformers import SentenceTransformer  # type: ignore[import-not-found]
        except ImportError as exc:
            raise EmbedderUnavailable(f"{path} needs sentence-transformers installed") from exc
        model = SentenceTransformer(str(path), device="cpu")
        return _CallableEmbedder(model.encode, f"st:{path.name}")
    raise EmbedderUnavailable(f"{path} is neither a model2vec nor a Sentence-Transformers model")


def _dotted(spec: str) -> Embedder:
    module_name, _, attribute = spec.replace(":", ".").rpartition(".")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as exc:
        raise EmbedderUnavailable(f"MEMORYAPP_EMBEDDER {spec!r} cannot be imported: {exc}") from exc
    if isinstance(target, type) and issubclass(target, Embedder):
        return target()
    if isinstance(target, Embedder):
        return target
    if callable(target):
        return _CallableEmbedder(target, f"callable:{spec}")
    raise EmbedderUnavailable(f"MEMORYAPP_EMBEDDER {spec!r} is not callable")


def load(spec: str) -> Embedder:
    """The embedder ``spec`` names (``MEMORYAPP_EMBEDDER``).

    ``wordllama`` (the default): the model the ``semantic`` extra ships. A directory:
    a model2vec or Sentence-Transformers model. Anything else: a dotted path
    (``package.module.name`` or ``package.module:name``) to an :class:`Embedder`
    class or instance, or to a callable from a list of texts to an ``(n, dim)`` array.

    Raises:
        EmbedderUnavailable: it cannot be loaded; the message says why.
    """
    if spec == DEFAULT:
        return _wordllama()
    path = Path(spec)
    if path.is_dir():
        return _model_dir(path)
    return _dotted(spec)
