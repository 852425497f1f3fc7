"""Entity resolution beyond exact aliases: model-confirmed merges within one scope.

The mention index (retrieval.entities) merges exact aliases only: one normalised key in
one scope is one Entity, and a peer's aliases map to its display name. This module links
the other names of one thing - "Dana", "Dana R." and "our copy lead" - in three steps:

1. **Candidates** (no model), within one scope only, never across scopes:
   * name containment: the words of one key are the leading words of the other ("dana" /
     "dana r"), a one-word key is a prefix of at least three letters of the other's first
     word ("mel" / "melanie"), or the keys agree word by word where one has an initial
     ("d rossi" / "dana rossi", "dana r" / "dana rossi");
   * embedding similarity of mention contexts: each entity's context vector is the mean
     of the stored vectors of the statements that mention it (the configured embedder's
     space; nothing is embedded here). Each entity proposes its EMBEDDING_NEIGHBOURS
     nearest other entities at cosine >= EMBEDDING_FLOOR, skipping names mostly mentioned
     in the same statements (named together, so alike for that reason alone). The floor
     and the caps bound the model's work; they decide nothing, because:
2. **A model confirms every pair** (``memhouse.core.llm`` provider, strict JSON schema, metered
   to the Account, each call bounded by CALL_SECONDS). Each verdict is cached in
   EntityJudgement under a digest of (scope, both keys), so a pair is asked about once.
   Without a provider no pair is asked; only verdicts a model already gave are used, so a
   deployment that never had a model merges exact aliases only.
3. **Groups**: confirmed pairs are joined greedily, best candidate first, unless a refused
   pair would end up inside one group (a model said "Dana R." is not "Dana K.", so a
   "Dana" confirmed for both joins only the first). Each group keeps one canonical entity,
   a name before a description, then the most mentioned; the others get an EntityLink to
   it. Retrieval (strategies.entity_match) reads a group as one entity.

Read -> model -> write: one short transaction reads the scope's entities, contexts and
verdicts; the model is called with no transaction open and no connection held; one
transaction (under the index's advisory lock) writes the new verdicts and replaces the
scope's links, re-reading entity ids by key, so a concurrent index rebuild cannot make it
link rows that are gone. A failed model call keeps the cached verdicts and links what they
confirm.

Resolution changes accuracy only, never authorization: a link joins two entities of one
scope, and retrieval still filters every statement by the reader inside the query, so a
merge never shows a reader a statement it could not see before. No name, alias or entity
id leaves this module; the public functions return counts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from memhouse.core.tenancy import account_context
from retrieval.entities import CONF_DESCRIPTION, EXCLUDED_STATES, _lock_index
from retrieval.models import Entity, EntityJudgement, EntityLink, EntityMention

__all__ = [
    "RESOLUTION_SCHEMA",
    "Candidate",
    "name_candidate",
    "resolve_entities",
]

log = logging.getLogger(__name__)

# Bounds on one scope's run (cost, not accuracy: every pair still needs the model).
MAX_ENTITIES = 300  # the most-mentioned entities of a scope take part
EMBEDDING_NEIGHBOURS = 2
EMBEDDING_FLOOR = 0.5
MAX_PAIRS = 60  # new pairs asked about per scope and run
PAIRS_PER_CALL = 12
CONTEXTS_PER_ENTITY = 3
CONTEXT_CHARS = 240
CALL_SECONDS = 60.0  # total time of one model call, retries included
PROMPT_VERSION = "entity_resolution_v1"

RESOLUTION_SYSTEM = (
    "You decide whether two names used inside one team's memory refer to the same real "
    "person, organisation, place or thing. Each pair gives two names and statements "
    "that mention each. Answer same_entity true only when the statements make it clear "
    "they are the same one; when unsure, or when they could be two different ones with "
    "similar names, answer false. Judge every pair independently."
)

RESOLUTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["verdicts"],
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["pair", "same_entity"],
                "properties": {
                    "pair": {"type": "integer", "minimum": 1},
                    "same_entity": {"type": "boolean"},
                },
            },
        },
    },
}


# --- candidates (pure) -------------------------------------------------------------------

def _initial_compatible(a: list[str], b: list[str]) -> bool:
    """Same number of words, each equal or one an initial of the other, and at least one
    full word equal ("dana r" / "dana rossi"; never "d r" / "dana rossi")."""
    if len(a) != len(b) or len(a) < 2:
        return False
    full_match = False
    for x, y in zip(a, b, strict=True):
        if x == y:
            full_match = full_match or len(x) > 1
        elif not ((len(x) == 1 and y.startswith(x)) or (len(y) == 1 and x.startswith(y))):
            return False
    return full_match


def name_candidate(a: str, b: str) -> bool:
    """Whether two keys of one scope look like names of one thing (never a merge on its
    own). Keys are normalised (retrieval.entities.mention_key)."""
    if a == b:
        return False
    wa, wb = a.split(), b.split()
    short, long_ = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    if len(short) < len(long_) and long_[:len(short)] == short:
        return True  # "dana" / "dana r", "bank of" never: keys are whole names
    if (len(short) == 1 and len(short[0]) >= 3 and short[0] != long_[0]
            and long_[0].startswith(short[0])):
        return True  # "mel" / "melanie", "mel" / "melanie rossi"
    return _initial_compatible(wa, wb)


@dataclass(frozen=True)
class _Ent:
    id: uuid.UUID
    key: str
    kind: str
    mentions: int
    description: bool


@dataclass(frozen=True)
class Candidate:
    a: str  # keys, a < b
    b: str
    score: float  # 1.0 for a name candidate, else the context cosine


def _cosines(vectors: Mapping[str, Sequence[float]]) -> tuple[list[str], Any]:
    import numpy as np

    keys = sorted(vectors)
    if not keys:
        return keys, np.zeros((0, 0))
    m = np.asarray([vectors[k] for k in keys], dtype=np.float64)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    m = m / np.where(norms == 0, 1.0, norms)
    return keys, m @ m.T


def candidates(ents: Sequence[_Ent], vectors: Mapping[str, Sequence[float]],
               mentioned: Mapping[str, set[Any]] | None = None) -> list[Candidate]:
    """Candidate pairs of one scope, best first: name candidates (score 1), then context
    neighbours by cosine. Kinds that contradict each other (a person and a place) are
    never paired. Two names mostly mentioned in the same statements ("Charlotte's Web",
    "Lord of the Rings") have equal context vectors for that reason alone: they are no
    context candidates (`mentioned`: key -> ids of the statements mentioning it)."""
    mentioned = mentioned or {}

    def co_mentioned(a: str, b: str) -> bool:
        x, y = mentioned.get(a, set()), mentioned.get(b, set())
        return bool(x and y) and 2 * len(x & y) >= min(len(x), len(y))

    by_key = {e.key: e for e in ents}
    found: dict[tuple[str, str], float] = {}

    def compatible(x: _Ent, y: _Ent) -> bool:
        known = {x.kind, y.kind} - {Entity.Kind.UNKNOWN}
        return len(known) <= 1

    keys = sorted(by_key)
    for i, a in enumerate(keys):
        for b in keys[i + 1:]:
            if name_candidate(a, b) and compatible(by_key[a], by_key[b]):
                found[(a, b)] = 1.0
    vkeys, sims = _cosines({k: v for k, v in vectors.items() if k in by_key})
    for i, a in enumerate(vkeys):
        order = sorted(((float(sims[i, j]), b) for j, b in enumerate(vkeys)
                        if j != i and not co_mentioned(a, b)),
                       reverse=True)[:EMBEDDING_NEIGHBOURS]
        for sim, b in order:
            if sim < EMBEDDING_FLOOR or not compatible(by_key[a], by_key[b]):
                continue
            pair = (a, b) if a < b else (b, a)
            found[pair] = max(found.get(pair, 0.0), sim)
    return [Candidate(a, b, s) for (a, b), s in
            sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))]


def pair_digest(account_id: uuid.UUID, scope_id: uuid.UUID, a: str, b: str) -> str:
    a, b = sorted((a, b))
    raw = f"{account_id}\x00{scope_id}\x00{a}\x00{b}".encode()
    return hashlib.sha256(raw).hexdigest()


def groups(ents: Sequence[_Ent], pairs: Sequence[Candidate],
           verdicts: Mapping[tuple[str, str], bool]) -> dict[str, str]:
    """key -> canonical key for every linked (non-canonical) key of one scope."""
    parent: dict[str, str] = {e.key: e.key for e in ents}
    members: dict[str, set[str]] = {e.key: {e.key} for e in ents}
    refused = {pair for pair, same in verdicts.items() if not same}

    def root(k: str) -> str:
        while parent[k] != k:
            k = parent[k]
        return k

    for c in pairs:
        if not verdicts.get((c.a, c.b)) or c.a not in parent or c.b not in parent:
            continue
        ra, rb = root(c.a), root(c.b)
        if ra == rb:
            continue
        if any(tuple(sorted((x, y))) in refused for x in members[ra] for y in members[rb]):
            continue  # a refused pair would end up inside one group
        parent[rb] = ra
        members[ra] |= members.pop(rb)
    by_key = {e.key: e for e in ents}
    out: dict[str, str] = {}
    for keys in members.values():
        if len(keys) < 2:
            continue
        canonical = min(keys, key=lambda k: (by_key[k].description, -by_key[k].mentions,
                                             len(k), k))
        out.update({k: canonical for k in keys if k != canonical})
    return out


# --- the service ------------------------------------------------------------------------

@dataclass
class _ScopeRead:
    scope_id: uuid.UUID
    ents: list[_Ent]
    vectors: dict[str, list[float]]
    contexts: dict[str, list[str]]
    verdicts: dict[tuple[str, str], bool]  # cached, by key pair
    surfaces: dict[str, str]  # key -> a wording from its strongest mention, for the prompt
    pairs: list[Candidate] = field(default_factory=list)


def _space_id() -> uuid.UUID | None:
    """The configured embedder's space, when it has vectors (never created here)."""
    from retrieval.embedding import get_embedder
    from retrieval.models import EmbeddingSpace

    try:
        ident = get_embedder().identity
    except Exception:  # no embedder: name candidates only
        log.warning("entity resolution: no embedder identity; context candidates skipped")
        return None
    return (EmbeddingSpace.objects.filter(provider=ident.provider, model=ident.model,
                                          version=ident.version, dims=ident.dims)
            .values_list("id", flat=True).first())


def _read_scope(account_id: uuid.UUID, scope_id: uuid.UUID, space_id: uuid.UUID | None,
                *, need_candidates: bool) -> _ScopeRead:
    rows = list(Entity.objects.filter(account_id=account_id, scope_id=scope_id)
                .order_by("-mention_count", "canonical")
                .values_list("id", "canonical", "kind", "mention_count")[:MAX_ENTITIES])
    named = set(EntityMention.objects.filter(entity_id__in=[r[0] for r in rows])
                .exclude(confidence=CONF_DESCRIPTION).values_list("entity_id", flat=True)
                .distinct())
    ents = [_Ent(eid, key, kind, count, eid not in named)
            for eid, key, kind, count in rows]
    read = _ScopeRead(scope_id, ents, {}, {}, {}, {})
    if not need_candidates or len(ents) < 2:
        return read
    ids = {e.id: e.key for e in ents}
    mentioned: dict[str, set[Any]] = defaultdict(set)
    for eid, kid in EntityMention.objects.filter(entity_id__in=list(ids)).values_list(
            "entity_id", "knowledge_id"):
        mentioned[ids[eid]].add(kid)
    if space_id is not None:
        with connection.cursor() as cur:
            cur.execute("""
                SELECT em.entity_id, avg(kv.embedding)::text
                FROM memhouse_entity_mention em
                JOIN memhouse_knowledge_vector kv
                  ON kv.knowledge_id = em.knowledge_id AND kv.space_id = %s
                WHERE em.account_id = %s AND em.entity_id = ANY(%s::uuid[])
                GROUP BY em.entity_id
            """, [str(space_id), str(account_id), [str(i) for i in ids]])
            for eid, text in cur.fetchall():
                read.vectors[ids[eid]] = json.loads(text)
    read.pairs = candidates(ents, read.vectors, mentioned)
    digests = {pair_digest(account_id, scope_id, c.a, c.b): (c.a, c.b) for c in read.pairs}
    for digest, same in EntityJudgement.objects.filter(
            account_id=account_id, scope_id=scope_id,
            pair_digest__in=list(digests)).values_list("pair_digest", "same"):
        read.verdicts[digests[digest]] = same
    wanted = {k for c in read.pairs[:MAX_PAIRS * 2] for k in (c.a, c.b)}
    if wanted:
        # A few of each entity's strongest mentions: its wording and its contexts.
        with connection.cursor() as cur:
            cur.execute("""
                SELECT entity_id, statement, surface FROM (
                    SELECT em.entity_id, k.statement, em.surface,
                           row_number() OVER (PARTITION BY em.entity_id
                                              ORDER BY em.confidence DESC,
                                                       em.knowledge_id) AS rn
                    FROM memhouse_entity_mention em
                    JOIN memhouse_knowledge k ON k.id = em.knowledge_id
                    WHERE em.account_id = %s AND em.entity_id = ANY(%s::uuid[])
                      AND NOT (k.state = ANY(%s))
                ) x WHERE rn <= %s ORDER BY entity_id, rn
            """, [str(account_id), [str(e.id) for e in ents if e.key in wanted],
                  sorted(EXCLUDED_STATES), CONTEXTS_PER_ENTITY * 2])
            for eid, statement, surface in cur.fetchall():
                read.surfaces.setdefault(ids[eid], surface)
                texts = read.contexts.setdefault(ids[eid], [])
                if len(texts) < CONTEXTS_PER_ENTITY and statement[:CONTEXT_CHARS] not in texts:
                    texts.append(statement[:CONTEXT_CHARS])
    return read


def _prompt(pairs: Sequence[Candidate], contexts: Mapping[str, list[str]],
            surfaces: Mapping[str, str]) -> str:
    lines = []
    for n, c in enumerate(pairs, start=1):
        lines.append(f"Pair {n}: A = {surfaces.get(c.a, c.a)!r}; B = {surfaces.get(c.b, c.b)!r}")
        for label, key in (("A", c.a), ("B", c.b)):
            for text in contexts.get(key, []):
                lines.append(f"  {label} mentioned in: {text}")
    return ("Decide for each pair whether A and B are the same one.\n\n" + "\n".join(lines)
            + "\n\nAnswer with one verdict per pair number.")


def _ask(provider: Any, pairs: Sequence[Candidate], contexts: Mapping[str, list[str]],
         surfaces: Mapping[str, str]) -> tuple[dict[tuple[str, str], bool], int]:
    """Verdicts for `pairs` (no connection held); returns (verdicts, failed calls)."""
    from memhouse.core.llm import ProviderError

    verdicts: dict[tuple[str, str], bool] = {}
    failed = 0
    for start in range(0, len(pairs), PAIRS_PER_CALL):
        chunk = list(pairs[start:start + PAIRS_PER_CALL])
        try:
            answer = provider.complete_json(
                system=RESOLUTION_SYSTEM, user=_prompt(chunk, contexts, surfaces),
                schema=RESOLUTION_SCHEMA, schema_name=PROMPT_VERSION,
                total_timeout=CALL_SECONDS)
        except ProviderError as exc:
            log.warning("entity resolution call failed (%s); its pairs wait for the next "
                        "run", exc.kind)
            failed += 1
            continue
        for v in answer["verdicts"]:
            if 1 <= v["pair"] <= len(chunk):
                c = chunk[v["pair"] - 1]
                verdicts.setdefault((c.a, c.b), bool(v["same_entity"]))
    return verdicts, failed


def _write_scope(account_id: uuid.UUID, read: _ScopeRead,
                 new: Mapping[tuple[str, str], bool], provider_name: str) -> int:
    """Inside the write transaction: record new verdicts, replace the scope's links."""
    _lock_index(account_id)
    if new:
        EntityJudgement.objects.bulk_create(
            [EntityJudgement(account_id=account_id, scope_id=read.scope_id,
                             pair_digest=pair_digest(account_id, read.scope_id, a, b),
                             same=same, provider=provider_name[:100])
             for (a, b), same in new.items()], ignore_conflicts=True)
    verdicts = {**read.verdicts, **new}
    linked = groups(read.ents, read.pairs, verdicts)
    EntityLink.objects.filter(account_id=account_id, scope_id=read.scope_id).delete()
    if not linked:
        return 0
    # Ids by key, re-read now: the index may have been rebuilt since the read.
    current = dict(Entity.objects.filter(
        account_id=account_id, scope_id=read.scope_id,
        canonical__in=set(linked) | set(linked.values())).values_list("canonical", "id"))
    links = [EntityLink(account_id=account_id, scope_id=read.scope_id,
                        entity_id=current[k], canonical_id=current[c])
             for k, c in sorted(linked.items()) if k in current and c in current]
    EntityLink.objects.bulk_create(links)
    return len(links)


def resolve_entities(account_id: uuid.UUID | str,
                     scope_ids: Iterable[uuid.UUID | str] | None = None, *,
                     provider: Any = "configured", ask: bool = True) -> dict[str, Any]:
    """Link the other names of one thing in each scope (every scope with entities when
    `scope_ids` is None). `provider` defaults to the configured one (None: no model);
    ``ask=False`` uses cached verdicts only (an operator rebuild). Every model call is
    billed to the Account. Returns counts only."""
    from memhouse.core.llm import get_provider
    from memhouse.core.metering import metering

    account_id = uuid.UUID(str(account_id))
    if provider == "configured":
        provider = get_provider()
    if not ask:
        provider = None
    provider_name = str(getattr(provider, "name", "")) if provider is not None else ""
    out: dict[str, Any] = {"scopes": 0, "candidates": 0, "asked": 0, "confirmed": 0,
                           "refused": 0, "failed_calls": 0, "links": 0,
                           "model": provider is not None}
    with account_context(account_id):
        if scope_ids is None:
            scopes = list(Entity.objects.filter(account_id=account_id)
                          .values_list("scope_id", flat=True).distinct().order_by("scope_id"))
        else:
            scopes = [uuid.UUID(str(s)) for s in scope_ids]
        any_cached = EntityJudgement.objects.filter(account_id=account_id).exists()
        space_id = _space_id() if provider is not None or any_cached else None
    with metering(account_id):
        for scope_id in dict.fromkeys(scopes):
            out["scopes"] += 1
            # 1. read
            need = provider is not None or any_cached
            with account_context(account_id):
                read = _read_scope(account_id, scope_id, space_id, need_candidates=need)
            out["candidates"] += len(read.pairs)
            # 2. model, with no transaction open and no connection held
            new: dict[tuple[str, str], bool] = {}
            if provider is not None:
                unjudged = [c for c in read.pairs if (c.a, c.b) not in read.verdicts]
                unjudged = unjudged[:MAX_PAIRS]
                if unjudged:
                    if not connection.in_atomic_block:
                        connection.close()
                    new, failed = _ask(provider, unjudged, read.contexts, read.surfaces)
                    out["asked"] += len(unjudged)
                    out["failed_calls"] += failed
                    out["confirmed"] += sum(new.values())
                    out["refused"] += sum(not v for v in new.values())
            # 3. write
            with account_context(account_id):
                out["links"] += _write_scope(account_id, read, new, provider_name)
    return out


def linked_keys(account_id: uuid.UUID | str, scope_id: uuid.UUID | str) -> dict[str, str]:
    """key -> canonical key of one scope's links (internal: tests and operators only)."""
    rows = EntityLink.objects.filter(account_id=account_id, scope_id=scope_id).values_list(
        "entity__canonical", "canonical__canonical")
    return dict(rows)

