"""Entity cards: what one scope's shareable statements say about one entity.

A card is a projection of governed knowledge, bounded by scope like the seed asks:

* **Selected through the index, filtered like a scope card.** The names in the query
  (retrieval.entities, peer aliases resolved) select, in one scope, the entity and the
  names a model linked to it there (retrieval.entity_resolution); their mentions select
  statements, which then pass exactly the filter of that scope's scope card
  (projections.statements_for): live lifecycle states and expiry, anchored at that scope,
  and shareable only (public or internal, about the scope, or promoted) - or public only
  for a peerless reader. A personal peer-level statement never reaches a card, whoever
  reads.
* **Named from its own statements.** The card's name is a wording found in its own
  source statements (the mention spans of their text, the most frequent name, a role
  description only when no name is there) and its kind is recomputed from the same
  wordings (entities._kind_hint). The entity row's canonical key and kind are never read
  for either, so no name crosses a scope boundary: another scope's statements never name
  this scope's card.
* **Fresh on every read.** Cards are built when a query names an entity and never
  stored, so a lifecycle change (a redaction, an expiry, a retraction) is reflected by the
  very next read; a newly accepted statement joins once the mention index holds it.

No generation model is called; the output holds knowledge entries, a name and a kind.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from memhouse.core.principal import Reader
from retrieval.entities import (
    CONF_DESCRIPTION,
    AliasMap,
    Mention,
    _entity_kind,
    _kind_hint,
    extract_all_mentions,
    mention_key,
    peer_alias_map,
    resolve_mentions,
)
from retrieval.models import Entity, EntityLink, EntityMention, Projection
from retrieval.projections import entry, statements_for

MAX_CARDS = 3
CARD_ENTRIES = 8


@dataclass
class EntityCard:
    scope_id: uuid.UUID
    scope: str
    name: str
    kind: str
    entries: list[dict[str, Any]]


def _groups(account_id: uuid.UUID, scope_id: uuid.UUID, keys: Sequence[str]
            ) -> list[set[uuid.UUID]]:
    """Member entity ids of each group named by `keys` in one scope, in key order."""
    named = dict(Entity.objects.filter(account_id=account_id, scope_id=scope_id,
                                       canonical__in=list(keys))
                 .values_list("canonical", "id"))
    heads: dict[uuid.UUID, None] = {}
    linked = dict(EntityLink.objects.filter(entity_id__in=list(named.values()))
                  .values_list("entity_id", "canonical_id"))
    for key in keys:
        if key in named:
            heads.setdefault(linked.get(named[key], named[key]), None)
    members: dict[uuid.UUID, set[uuid.UUID]] = {h: {h} for h in heads}
    for eid, head in EntityLink.objects.filter(canonical_id__in=list(heads)).values_list(
            "entity_id", "canonical_id"):
        members[head].add(eid)
    return list(members.values())


def _wordings(statements: dict[uuid.UUID, str], member_ids: set[uuid.UUID]
              ) -> list[tuple[uuid.UUID, Mention]]:
    out = []
    for kid, start, end, conf in (EntityMention.objects
                                  .filter(entity_id__in=list(member_ids),
                                          knowledge_id__in=list(statements))
                                  .values_list("knowledge_id", "start", "end", "confidence")):
        wording = statements[kid][start:end]
        if wording.strip():
            out.append((kid, Mention(wording, mention_key(wording), start, end, conf)))
    return out


def _name_and_kind(statements: dict[uuid.UUID, str],
                   wordings: list[tuple[uuid.UUID, Mention]], aliases: AliasMap
                   ) -> tuple[str, str]:
    names = Counter(m.surface for _, m in wordings if m.confidence != CONF_DESCRIPTION)
    pool = names or Counter(m.surface for _, m in wordings)
    name = max(pool, key=lambda w: (pool[w], len(w), w))
    kind = _entity_kind(_kind_hint(statements[kid], m, aliases) for kid, m in wordings)
    return name, str(kind)


def cards_for_query(*, reader: Reader, chain: Sequence[tuple[uuid.UUID, str]], query: str
                    ) -> list[EntityCard]:
    """Cards of the entities the query names, in the scopes of `chain` ((id, path),
    nearest first), at most MAX_CARDS, each with at most CARD_ENTRIES statements."""
    mentions = extract_all_mentions(query) if query.strip() else []
    if not mentions:
        return []
    account_id = reader.account_id
    aliases = peer_alias_map(account_id)
    keys = list(dict.fromkeys(m.key for m in resolve_mentions(mentions, aliases)))
    audience = (Projection.Audience.PUBLIC if reader.posture == "public_only"
                else Projection.Audience.SHARED)
    now = timezone.now()
    cards: list[EntityCard] = []
    for scope_id, path in chain:
        # The scope card's own filter, for this scope and audience.
        shared = statements_for(Projection(account_id=account_id,
                                           kind=Projection.Kind.SCOPE_CARD,
                                           audience=audience, scope_id=scope_id), at=now)
        for members in _groups(account_id, scope_id, keys):
            mentioned = EntityMention.objects.filter(entity_id__in=list(members)).values(
                "knowledge_id")
            rows = list(shared.filter(Q(id__in=mentioned))
                        .select_related("scope", "subject_peer")[:CARD_ENTRIES])
            if not rows:
                continue
            statements = {k.id: k.statement for k in rows}
            wordings = _wordings(statements, members)
            if not wordings:
                continue
            name, kind = _name_and_kind(statements, wordings, aliases)
            cards.append(EntityCard(scope_id, path, name, kind, [entry(k) for k in rows]))
            if len(cards) >= MAX_CARDS:
                return cards
    return cards
