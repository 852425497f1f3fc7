"""Evidence lineage: a bounded graph of provenance and typed knowledge relations.

From a root statement the traversal follows, for every visible knowledge node, its
provenance (source messages and document versions) and its typed relations in both
directions (`knowledge.models.Relation`, plus the `supersedes` link of an edited row).

* Visibility first: a knowledge node is returned only when the reader's visibility filters
  (Account, scope, lifecycle, expiry, sensitivity) pass in SQL; a source message only when
  the reader spoke it or every statement derived from it is visible to the reader; a
  document version only when its scope is within the reader's grants and it is neither
  tombstoned nor deleted. A visible derived statement never grants access to a hidden
  source.
* Anything else is an opaque reference: `{"ref": "hidden"}` for a row that exists but the
  reader may not see (lifecycle-hidden, sensitive, out of scope), `{"ref": "missing"}` for
  one that is gone (deleted, tombstoned). Neither carries an id or content, and neither is
  expanded.
* An unavailable root - nonexistent, another Account's, expired, hidden - is one 404.
* Budgets: `depth` (edges from the root), `fan_out` (neighbours per node) and `max_nodes`;
  each one that cut the graph short is reported in `truncated`.
* Stable order (sources by creation, then outgoing and incoming relations by type,
  creation, id), breadth first; a node seen twice gets an edge, not a second visit, so
  cycles terminate.
* A node reports its typed `operation` (a deduction is `reasoning_synthesis`, read from
  its durable prompt identity, knowledge.prompts), never the extractor string, the prompt
  identity, its version or any rationale.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge import lifecycle
from knowledge.models import DocumentVersion, Knowledge, KnowledgeSource, Message, Relation
from knowledge.prompts import operation_of
from knowledge.selectors import sensitivity_q, visible_knowledge
from knowledge.selectors import visible_messages as _visible_messages
from memhouse.core.errors import NotFound
from memhouse.core.principal import Reader
from retrieval.stable_profile import readable_scope_ids

MAX_DEPTH = 4
MAX_FAN_OUT = 32
MAX_NODES = 200
EXCERPT_CHARS = 500


def operation(k: Knowledge) -> str:
    """The typed operation that produced a statement (never the extractor id itself).
    A model-derived statement's durable prompt identity names it; rows from before
    identities were recorded fall back to their extractor."""
    typed = operation_of(k.prompt_identity)
    if typed is not None:
        return typed
    if k.extractor == "deduction":
        return "reasoning_synthesis"
    if k.extractor == "consolidation":
        return "consolidation"
    if k.extractor.startswith("document/"):
        return "document_extraction"
    return "extraction"


def messages_in_scope(reader: Reader, scope_ids: Any) -> QuerySet[Message]:
    """Every message of the reader's Account in `scope_ids`, visible or not: only for
    reading candidates whose visibility `visible_messages` then decides."""
    return Message.objects.filter(account_id=reader.account_id, scope_id__in=scope_ids)


def visible_messages(reader: Reader, scope_ids: Any, *, at: Any = None) -> QuerySet[Message]:
    """Source messages the reader may see: in `scope_ids`, and spoken by the reader or
    with every statement derived from them visible to the reader. The rule lives in
    knowledge.selectors.visible_messages (GET /api/v1/messages/<id> applies it too)."""
    return _visible_messages(reader=reader, scope_ids=scope_ids, at=at)


def related_ids(*, reader: Reader, scope_ids: Any, seeds: list[str], fan_out: int
                ) -> list[str]:
    """Visible statements one typed relation away from `seeds` (either direction), in
    seed order, then relation type, creation and id; at most `fan_out` per seed."""
    if not seeds:
        return []
    vis = visible_knowledge(reader=reader, scope_ids=scope_ids).values("id")
    out: list[str] = []
    rels = (Relation.objects.filter(Q(source_id__in=seeds, target_id__in=vis)
                                    | Q(target_id__in=seeds, source_id__in=vis))
            .order_by("type", "created_at", "id").values_list("source_id", "target_id"))
    per_seed: dict[str, list[str]] = {s: [] for s in seeds}
    for src, dst in rels:
        for seed, other in ((str(src), str(dst)), (str(dst), str(src))):
            if seed in per_seed and other not in per_seed[seed] and other not in per_seed:
                per_seed[seed].append(other)
    for seed in seeds:
        for other in per_seed[seed][:fan_out]:
            if other not in out:
                out.append(other)
    return out


@dataclass
class _Neighbour:
    edge: str  # "source" or a relation type
    outgoing: bool  # edge direction: current -> neighbour
    ref: str  # "knowledge" | "message" | "document_version"
    target: uuid.UUID
    excerpt: str = ""


class _Graph:
    def __init__(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.nodes: list[dict[str, Any]] = []
        self.keys: dict[tuple[str, Any], str] = {}
        self.edges: list[dict[str, str]] = []
        self.edge_keys: set[tuple[str, str, str]] = set()
        self.full = False

    def node(self, identity: tuple[str, Any], body: dict[str, Any]) -> tuple[str | None, bool]:
        """The node key for `identity` (adding it if new) and whether it is new."""
        if identity in self.keys:
            return self.keys[identity], False
        if len(self.nodes) >= self.max_nodes:
            self.full = True
            return None, False
        key = f"n{len(self.nodes)}"
        self.keys[identity] = key
        self.nodes.append({"node": key, **body})
        return key, True

    def edge(self, a: str, b: str, kind: str) -> None:
        if (a, b, kind) not in self.edge_keys:
            self.edge_keys.add((a, b, kind))
            self.edges.append({"from": a, "to": b, "type": kind})


def _knowledge_body(k: Knowledge, depth: int) -> dict[str, Any]:
    return {"ref": "knowledge", "id": str(k.id), "statement": k.statement, "kind": k.kind,
            "state": k.state, "level": k.level, "scope": k.scope.path,
            "subject_peer_key": k.subject_peer.key if k.subject_peer else None,
            "operation": operation(k), "depth": depth}


class _Traversal:
    def __init__(self, reader: Reader, depth: int, fan_out: int, max_nodes: int) -> None:
        self.reader = reader
        self.depth = depth
        self.fan_out = fan_out
        self.graph = _Graph(max_nodes)
        self.now = timezone.now()
        self.scope_ids = readable_scope_ids(reader)
        self.truncated = {"depth": False, "fan_out": False, "max_nodes": False}

    def visible(self) -> QuerySet[Knowledge]:
        return visible_knowledge(reader=self.reader, scope_ids=self.scope_ids, at=self.now)

    def history(self) -> QuerySet[Knowledge]:
        return Knowledge.objects.filter(
            account_id=self.reader.account_id, scope_id__in=list(self.scope_ids),
            state=lifecycle.SUPERSEDED).filter(sensitivity_q(self.reader))

    def neighbours(self, k: Knowledge) -> list[_Neighbour]:
        out: list[_Neighbour] = []
        for mid, dvid, excerpt in (KnowledgeSource.objects.filter(knowledge_id=k.pk)
                                   .order_by("created_at", "id")
                                   .values_list("message_id", "document_version_id", "excerpt")):
            if mid is not None:
                out.append(_Neighbour("source", True, "message", mid, excerpt))
            elif dvid is not None:
                out.append(_Neighbour("source", True, "document_version", dvid, excerpt))
        rel_out = list(Relation.objects.filter(source_id=k.pk).order_by("type", "created_at", "id")
                       .values_list("type", "target_id"))
        for kind, target in rel_out:
            out.append(_Neighbour(kind, True, "knowledge", target))
        if k.supersedes_id is not None and (Relation.Type.SUPERSEDES, k.supersedes_id) \
                not in set(rel_out):
            out.append(_Neighbour(Relation.Type.SUPERSEDES, True, "knowledge", k.supersedes_id))
        for kind, source in (Relation.objects.filter(target_id=k.pk)
                             .order_by("type", "created_at", "id")
                             .values_list("type", "source_id")):
            out.append(_Neighbour(kind, False, "knowledge", source))
        return out

    def _resolve(self, items: list[_Neighbour]) -> dict[tuple[str, Any], dict[str, Any]]:
        """Bodies of the neighbours: full for visible rows, opaque otherwise (in SQL)."""
        bodies: dict[tuple[str, Any], dict[str, Any]] = {}
        k_ids = [n.target for n in items if n.ref == "knowledge"]
        m_ids = [n.target for n in items if n.ref == "message"]
        d_ids = [n.target for n in items if n.ref == "document_version"]
        if k_ids:
            visible = {k.id: k for k in self.visible().filter(pk__in=k_ids)
                       .select_related("scope", "subject_peer")}
            # History: a superseded row is member-visible (not searchable), so the chain
            # of an update stays inspectable under the same scope and sensitivity filters.
            visible.update({k.id: k for k in self.history().filter(pk__in=k_ids)
                            .select_related("scope", "subject_peer")})
            existing = set(Knowledge.objects.filter(pk__in=k_ids).values_list("id", flat=True))
            for kid in k_ids:
                if kid in visible:
                    bodies[("knowledge", kid)] = {"_row": visible[kid]}
                else:
                    bodies[("knowledge", kid)] = {"ref": "hidden" if kid in existing
                                                  else "missing"}
        if m_ids:
            visible_m = {m.id: m for m in visible_messages(self.reader, self.scope_ids,
                                                           at=self.now)
                         .filter(pk__in=m_ids).select_related("scope", "peer")}
            existing = set(Message.objects.filter(pk__in=m_ids).values_list("id", flat=True))
            for mid in m_ids:
                m = visible_m.get(mid)
                if m is None:
                    bodies[("message", mid)] = {"ref": "hidden" if mid in existing
                                                else "missing"}
                else:
                    bodies[("message", mid)] = {
                        "ref": "message", "id": str(m.id), "scope": m.scope.path,
                        "speaker_peer_key": m.peer.key, "occurred_at": m.occurred_at,
                        "_text": m.text}
        if d_ids:
            rows = {v.id: v for v in DocumentVersion.objects.filter(pk__in=d_ids)
                    .select_related("document", "document__scope")}
            for dvid in d_ids:
                v = rows.get(dvid)
                if v is None or v.tombstoned_at is not None or v.document.deleted_at is not None:
                    bodies[("document_version", dvid)] = {"ref": "missing"}
                elif not self.reader.may_read_scope(v.document.scope.path):
                    bodies[("document_version", dvid)] = {"ref": "hidden"}
                else:
                    bodies[("document_version", dvid)] = {
                        "ref": "document_version", "id": str(v.id),
                        "document_id": str(v.document_id), "number": v.number,
                        "title": v.document.title, "scope": v.document.scope.path}
        return bodies

    def run(self, root: Knowledge) -> None:
        key, _ = self.graph.node(("knowledge", root.id), _knowledge_body(root, 0))
        assert key is not None
        queue: deque[tuple[Knowledge, str, int]] = deque([(root, key, 0)])
        while queue:
            k, k_key, depth = queue.popleft()
            neighbours = self.neighbours(k)
            if not neighbours:
                continue
            if depth >= self.depth:
                if any((n.ref, n.target) not in self.graph.keys for n in neighbours):
                    self.truncated["depth"] = True
                continue
            if len(neighbours) > self.fan_out:
                self.truncated["fan_out"] = True
                neighbours = neighbours[: self.fan_out]
            bodies = self._resolve(neighbours)
            for n in neighbours:
                identity = (n.ref, n.target)
                body = dict(bodies[identity])
                row = body.pop("_row", None)
                if row is not None:
                    body = _knowledge_body(row, depth + 1)
                elif n.ref != "knowledge" and body.get("ref") == n.ref:
                    text = body.pop("_text", "")
                    body["excerpt"] = (n.excerpt or text)[:EXCERPT_CHARS]
                if body["ref"] in ("hidden", "missing"):
                    # Opaque references are keyed by their row so the graph stays stable,
                    # but carry nothing but the reference class.
                    body = {"ref": body["ref"]}
                n_key, new = self.graph.node(identity, body)
                if n_key is None:
                    self.truncated["max_nodes"] = True
                    return
                a, b = (k_key, n_key) if n.outgoing else (n_key, k_key)
                self.graph.edge(a, b, n.edge)
                if new and row is not None:
                    queue.append((row, n_key, depth + 1))


def lineage(*, reader: Reader, knowledge_id: uuid.UUID | str, depth: int = 2,
            fan_out: int = 8, max_nodes: int = 50) -> dict[str, Any]:
    depth = max(1, min(MAX_DEPTH, depth))
    fan_out = max(1, min(MAX_FAN_OUT, fan_out))
    max_nodes = max(1, min(MAX_NODES, max_nodes))
    t = _Traversal(reader, depth, fan_out, max_nodes)
    root = (t.visible().filter(pk=knowledge_id).select_related("scope", "subject_peer")
            .first())
    if root is None:
        raise NotFound("knowledge")
    t.run(root)
    return {
        "root": "n0",
        "nodes": t.graph.nodes,
        "edges": t.graph.edges,
        "truncated": t.truncated,
        "limits": {"depth": depth, "fan_out": fan_out, "max_nodes": max_nodes},
        "reader_posture": reader.posture,
    }
