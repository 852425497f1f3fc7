"""The stable identity profile: a live projection, rebuilt from canonical knowledge on
every call, with no model and no stored copy (so expiry, deletion, retraction,
supersession or a scope change cannot leave a second profile behind).

It keeps a small allowlist of stable, direct, source-backed identity facts about the
reader, selected in SQL through the reader's visibility filters:

* about the reader (subject = the reading peer), active, not expired, at a scope the read
  may see;
* kind fact, relation or skill - never preferences or events;
* no transient state: no declared expiry, not past its valid-time end, and not a
  passing condition however it was stored ("Sam is exhausted", "Sam feels sick today",
  "Sam was starving right now": TRANSIENT_RE below);
* public or internal sensitivity - never personal or restricted traits;
* direct: not inferred by dream-time work (deduction, consolidation, summaries), not
  advice given to the reader, not what someone else reports of them;
* backed by at least one live source (a message, or a version not tombstoned).

Contradictory claims (a `contradicts` relation between two entries) are kept side by
side, adjacent in the list and grouped in `conflicts`; while the pair is unsettled the
newer claim comes first and the older carries `possibly_outdated` (retrieval.conflicts).
Each entry links its governed knowledge id and its direct source ids; consumers cite the
knowledge, not the profile.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from knowledge import lifecycle
from knowledge.models import Knowledge, KnowledgeSource, Peer, Relation, Scope
from knowledge.selectors import scope_chain, visible_knowledge
from memhouse.core.principal import Reader, ancestor_paths
from retrieval import conflicts, evidence

STABLE_KINDS = (Knowledge.Kind.FACT, Knowledge.Kind.RELATION, Knowledge.Kind.SKILL)
STABLE_SENSITIVITIES = (Knowledge.Sensitivity.PUBLIC, Knowledge.Sensitivity.INTERNAL)
# Extractors of inferred claims and behavioural summaries (dream-time work).
INFERRED_EXTRACTORS = ("deduction", "consolidation", "summary")
MAX_ENTRIES = 30
# PostgreSQL regular expressions (\m and \M are word boundaries there).
ADVICE_RE = r"^[^:]{1,80} told [^:]{1,80}:|\m(should|ought to|might want to|had better)\M"
REPORTED_RE = r"^[^.:]{1,60}? (said|says|told|thinks|heard)\M"
# Passing conditions of a person - bodily, emotional and situational states that hold for
# hours or days - in the ways people say they are in one ("I'm exhausted", "feeling sick
# today", "was starving right now", "I've been so stressed lately"). A statement that is
# only such a state is no identity fact, with or without an expiry; "tired of his job"
# (an attitude) and "a sick day policy" are not matched.
TRANSIENT_STATES = (
    # body
    "tired", "exhausted", "sleepy", "drowsy", "worn out", "drained", "fatigued", "knackered",
    "wiped out", "beat", "sick", "ill", "unwell", "poorly", "nauseous", "queasy", "feverish",
    "dizzy", "sore", "achy", "congested", "hungover", "jet-?lagged", "under the weather",
    "hungry", "starving", "famished", "thirsty", "full", "stuffed", "cold", "freezing",
    "chilly", "hot", "sweaty", "soaked", "drunk", "tipsy", "sunburnt", "sunburned",
    "burnt out", "burned out", "out of breath", "in pain", "injured",
    # mood
    "bored", "stressed", "stressed out", "anxious", "nervous", "worried", "scared",
    "upset", "angry", "mad", "furious", "annoyed", "irritated", "frustrated", "grumpy",
    "cranky", "sad", "down", "bummed", "bummed out", "blue", "lonely", "homesick", "happy",
    "glad", "excited", "thrilled", "pumped", "stoked", "ecstatic", "relieved", "overwhelmed",
    "distracted", "restless", "hyper", "calm", "relaxed", "chill", "in a good mood",
    "in a bad mood", "on edge", "out of it", "fed up", "heartbroken", "devastated",
    "disappointed", "embarrassed", "confused", "curious", "impatient",
    # situation
    "busy", "swamped", "slammed", "late", "running late", "away", "out sick", "offline",
    "unavailable", "in a meeting", "on a call", "stuck in traffic", "on the way",
    "on (?:my|his|her|their|the) way", "snowed in", "locked out", "stranded",
)
_DEGREE = (r"(so|very|really|a bit|a little|pretty|super|extremely|quite|totally|kind of|"
           r"kinda|completely|absolutely|incredibly|utterly|just|still|already|too|feeling|"
           r"getting|rather|slightly|somewhat|all)")
_NOW = (r"(today|tonight|right now|now|at the moment|atm|this morning|this afternoon|"
        r"this evening|this week|lately|these days|currently|again|at work|after work)")
_STATE = "(" + "|".join(TRANSIENT_STATES) + ")"
TRANSIENT_RE = (
    r"^[^.:;,]{1,60}? (is|are|am|was|were|feels|felt|seems|seemed|looks|looked|got|gets|"
    r"has been|had been|have been|has felt|is feeling|was feeling|'s|'re|'m)"
    rf"( {_DEGREE})* {_STATE}( (and|but|,) ({_DEGREE} )*{_STATE})*"
    rf"( (from|after|with|because of|about) [^.;]{{1,60}})?( {_NOW})*[.!]*$")


def readable_scope_ids(reader: Reader) -> list[uuid.UUID]:
    """Scopes a read with no explicit scope may see: every scope within the reader's
    roots, and their ancestors (context flows downward)."""
    qs = Scope.objects.filter(account_id=reader.account_id)
    if reader.scope_roots is not None:
        q = Q(pk__in=[])
        for root in reader.scope_roots:
            q |= (Q(path=root) | Q(path__startswith=root.rstrip("/") + "/")
                  | Q(path__in=ancestor_paths(root)))
        qs = qs.filter(q)
    return list(qs.values_list("id", flat=True))


def live_source_q(prefix: str = "") -> Q:
    return (Q(**{f"{prefix}message__isnull": False})
            | Q(**{f"{prefix}document_version__isnull": False,
                   f"{prefix}document_version__tombstoned_at__isnull": True}))


def stable_statements(*, reader: Reader, scope: Scope | None = None) -> QuerySet[Knowledge]:
    """The allowlisted statements about the reader, in profile order."""
    now = timezone.now()
    subject_name = (Peer.objects.filter(pk=reader.peer_id)
                    .values_list("display_name", flat=True).first() or ""
                    ) if reader.peer_id is not None else ""
    scope_ids = (list(scope_chain(scope).ids)
                 if scope is not None else readable_scope_ids(reader))
    sourced = KnowledgeSource.objects.filter(knowledge_id=OuterRef("pk")).filter(live_source_q())
    return (visible_knowledge(reader=reader, scope_ids=scope_ids, at=now)
            .filter(subject_peer_id=reader.peer_id,
                    state=lifecycle.ACTIVE, kind__in=STABLE_KINDS,
                    sensitivity__in=STABLE_SENSITIVITIES, expires_at__isnull=True)
            .filter(Q(relevant_until__isnull=True) | Q(relevant_until__gt=now))
            .exclude(extractor__in=INFERRED_EXTRACTORS)
            # Advice ("Mel told Caroline: Caroline should bring her over") is no identity
            # fact, and neither is what someone else reports ("Mel said Caroline is...").
            .exclude(statement__iregex=ADVICE_RE)
            .exclude(statement__iregex=TRANSIENT_RE)
            .exclude(Q(statement__iregex=REPORTED_RE)
                     & ~Q(statement__istartswith=f"{subject_name} "))
            .filter(Exists(sourced))
            .order_by("kind", "-confidence", "inserted_at", "id"))


def stable_profile(*, reader: Reader, scope: Scope | None = None) -> dict[str, Any] | None:
    """The reader's stable profile, or None for a reader that is nobody (peerless)."""
    if reader.peer_id is None:
        return None
    rows = list(stable_statements(reader=reader, scope=scope)
                .select_related("scope")[:MAX_ENTRIES])
    ids = [k.id for k in rows]
    sources: dict[uuid.UUID, dict[str, list[str]]] = {
        i: {"messages": [], "document_versions": []} for i in ids}
    for kid, mid, dvid in (KnowledgeSource.objects.filter(knowledge_id__in=ids)
                           .filter(live_source_q()).order_by("created_at", "id")
                           .values_list("knowledge_id", "message_id", "document_version_id")):
        if mid is not None:
            sources[kid]["messages"].append(str(mid))
        else:
            sources[kid]["document_versions"].append(str(dvid))
    # Contradictions among the entries: union-find into side-by-side groups.
    parent = {i: i for i in ids}

    def find(i: uuid.UUID) -> uuid.UUID:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    contradicts: dict[uuid.UUID, set[uuid.UUID]] = {i: set() for i in ids}
    for a, b in (Relation.objects.filter(type=Relation.Type.CONTRADICTS, source_id__in=ids,
                                         target_id__in=ids)
                 .values_list("source_id", "target_id")):
        contradicts[a].add(b)
        contradicts[b].add(a)
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb, key=ids.index)] = min(ra, rb, key=ids.index)
    groups: dict[uuid.UUID, list[Knowledge]] = {}
    for k in rows:
        groups.setdefault(find(k.id), []).append(k)
    said = evidence.said_at_of(str(k.id) for k in rows)
    # An unsettled pair: the newer claim first, the older marked (retrieval.conflicts).
    marks = conflicts.outdated_by(reader=reader, ids=ids)
    entries: list[dict[str, Any]] = []
    groups_out: list[list[str]] = []
    for group in groups.values():
        members = conflicts.newer_first(group, marks, id_of=lambda k: str(k.id))
        if len(members) > 1:
            groups_out.append([str(k.id) for k in members])
        for k in members:
            entries.append({
                "knowledge_id": str(k.id), "statement": k.statement, "kind": k.kind,
                "scope": k.scope.path, "confidence": k.confidence,
                "relevant_from": k.relevant_from, "relevant_until": k.relevant_until,
                "when": evidence.when_of(k, said),
                "source_ids": sources[k.id],
                "contradicts": sorted(str(o) for o in contradicts[k.id]),
                conflicts.FIELD: marks.get(str(k.id)),
            })
    peer_key = Peer.objects.filter(pk=reader.peer_id).values_list("key", flat=True).first()
    return {
        "peer_key": peer_key,
        "scope": scope.path if scope is not None else None,
        "entries": entries,
        "conflicts": groups_out,
        "rebuilt_at": timezone.now(),
        "allowlist": {"kinds": list(STABLE_KINDS), "sensitivities": list(STABLE_SENSITIVITIES),
                      "direct_only": True, "source_backed": True},
    }
