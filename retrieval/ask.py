"""ask: an answer over retrieved governed knowledge, with a confidence.

Fixed ask (no effort) retrieves one base page with the scope's profile (default
`thorough`) and answers over it. A named effort (low, medium, high) first runs a bounded,
read-only planner over a closed tool set - knowledge search, the reader's stable profile
and typed lineage; the exact and semantic source-message tools join only with
`include_source_recall: true` (retrieval.source_recall: every message the reader may see,
full text and message vectors in SQL) - and answers over the resulting evidence.

The answer states:

* no candidates                -> empty citations, abstained, confidence 0, no model call;
  none about the question       -> the same empty abstention (`no_relevant_evidence`): a
                                   candidate survives only with semantic similarity to the
                                   question >= MEMHOUSE_ASK_MIN_SIMILARITY or a lexical or
                                   entity match, and only when at least one clears the
                                   similarity floor (without vectors: a lexical or entity
                                   match); the nearest statements of an unrelated memory
                                   are not an answer. The gate is applied before the
                                   search's rerank, so this abstention calls no model;
* no provider configured       -> grounded lines (`_grounded`): the best item, dated
                                   ("[7 May 2023] ..."), with its source turn when the
                                   turn holds detail the statement lost and the
                                   speaker's follow-up turn (evidence.follow_up), and at
                                   most two more only as much about the question; each
                                   cited.
                                   Confidence 40, `answer_degraded` null, not abstained:
                                   a chosen configuration answering, not a weak model
                                   inference;
* provider failure             -> `answer_degraded` names the failure kind, abstained,
                                   confidence 0; the statements are still returned in
                                   `citations` and `supporting_statements`;
* a model answer               -> the model sees the same dated items, source turns and
                                   follow-ups (`when`, `source_turn`, `follow_up_turn`
                                   in each evidence item); its
                                   citations intersected with the retrieved ids (none
                                   surviving = empty abstention), `abstained` when its
                                   confidence is below 50.

Planner budgets (per preset): provider-backed planner calls and retrieval tool calls are
reserved before they run; the rewritten query is capped in tokens and the serialized
admitted evidence in total tokens (tokens estimated as characters / 4). Medium keeps two
thirds and high one half of the 12-item base head (8 and 6 items), low keeps all but one;
each reserves at least one slot for genuinely new tool evidence before refilling from the
base tail. The whole base page counts as already seen while tools run, so a rewritten
query cannot pass a base candidate off as a discovery, and every knowledge-tool pass uses
the same named profile as the base pass. `recall_evidence` records the exact order of
the answer context; `candidates` stays the base search payload.

Without a provider the planner is deterministic and may only rewrite the query
deterministically: the lexical analyzer's kept terms alone (interrogative boilerplate
removed). Its plan is that rewrite, then the stable profile, lineage of the retained head
and, with source recall, the source tools, cut to the preset's tool-call budget.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils import timezone

from knowledge.models import Scope
from knowledge.selectors import scope_ancestors, visible_knowledge
from memhouse.core.llm import ChatProvider, ProviderError, get_provider
from memhouse.core.principal import Reader
from retrieval import conflicts, engine, source_recall
from retrieval import evidence as evidence_mod
from retrieval.lexical import analyze
from retrieval.lineage import related_ids
from retrieval.profiles import Profile
from retrieval.stable_profile import stable_statements

log = logging.getLogger(__name__)

ANSWER_CAP = 12
ABSTAIN_BELOW = 50
NO_PROVIDER_CONFIDENCE = 40
NO_PROVIDER_TOP = 3
SOURCE_TOOL_LIMIT = 6
EXCERPT_CHARS = 500
KNOWLEDGE_TOOLS = ("knowledge_search", "stable_profile", "lineage")
SOURCE_TOOLS = ("source_exact", "source_semantic")
EFFORTS = ("low", "medium", "high")


@dataclass(frozen=True)
class Preset:
    name: str
    planner_calls: int  # provider-backed planning calls
    tool_calls: int  # read-only retrieval tool calls
    query_tokens: int  # cap on a rewritten tool query
    evidence_tokens: int  # total ceiling on serialized admitted evidence
    retain: int  # items of the base head kept before tool evidence


PRESETS: dict[str, Preset] = {
    "low": Preset("low", 1, 2, 32, 1500, ANSWER_CAP - 1),
    "medium": Preset("medium", 2, 4, 48, 2500, ANSWER_CAP * 2 // 3),
    "high": Preset("high", 3, 6, 64, 3500, ANSWER_CAP // 2),
}


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


@dataclass
class Evidence:
    id: str
    type: str  # "knowledge" | "source_message"
    text: str
    origin: str  # "base" or the tool that found it
    data: dict[str, Any]
    base_rank: int | None = None
    when: str | None = None  # a knowledge item's retrieval.evidence.when_label
    source: str | None = None  # the dated source turn, when it holds lost detail (_ground)
    source_message: Any = None  # the quoted turn's message id
    next_turn: evidence_mod.Turn | None = None  # the speaker's follow-up (_ground, top items)
    follow_up: str | None = None  # next_turn as shown, where no other line shows it

    def prompt_item(self) -> dict[str, str]:
        item = {"id": self.id, "type": self.type, "text": self.text}
        if self.when:
            item["when"] = self.when
        if self.source:
            item["source_turn"] = self.source
        if self.follow_up:
            item["follow_up_turn"] = self.follow_up
        if self.data.get(conflicts.FIELD):
            item[conflicts.FIELD] = self.data[conflicts.FIELD]
        return item

    def answer_line(self) -> str:
        text = self.text + conflicts.suffix(self.data.get(conflicts.FIELD))
        line = f"[{self.when}] {text}" if self.when else text
        shown = ([f"source: {self.source}"] if self.source else []) + (
            [f"then {self.follow_up}"] if self.follow_up else [])
        return f"{line} ({'; '.join(shown)})" if shown else line

    @property
    def tokens(self) -> int:
        return tokens(json.dumps(self.prompt_item(), ensure_ascii=False))

    def citation(self) -> dict[str, Any]:
        extra = {"when": self.when} if self.when else {}
        if self.source:
            extra["source_turn"] = self.source
        if self.follow_up:
            extra["follow_up_turn"] = self.follow_up
        return {"id": self.id, "type": self.type, **self.data, **extra}


def _knowledge_evidence(c: dict[str, Any], origin: str, base_rank: int | None = None
                        ) -> Evidence:
    data = {"statement": c["statement"], "kind": c["kind"], "scope": c["scope"],
            "subject_peer_key": c["subject_peer_key"], "confidence": c["confidence"],
            "state": c["state"], conflicts.FIELD: c.get(conflicts.FIELD)}
    return Evidence(c["id"], "knowledge", c["statement"], origin, data, base_rank,
                    when=c.get("when"))


def _ground(reader: Reader, scope_ids: list[Any], query: str, evidence: list[Evidence]
            ) -> None:
    """Attach to each knowledge item its source turn where the turn holds detail the
    statement lost, once per message (retrieval.evidence, as get_context's lines), and
    find for the first NO_PROVIDER_TOP items the speaker's follow-up turn
    (evidence.follow_up: the answer to the other side's "who?"/"which one?" is often the
    next thing said); `_show_follow_ups` shows those no shown line already quotes."""
    knowledge = [e for e in evidence if e.type == "knowledge"]
    turns = evidence_mod.source_turns(reader, scope_ids, [e.id for e in knowledge])
    shown: set[Any] = set()
    for e in knowledge:
        turn = turns.get(e.id)
        if turn is None or turn.message_id in shown:
            continue
        cut = evidence_mod.quote_for(e.text, turn, query=query)
        if cut is not None:
            e.source = evidence_mod.turn_line(turn, cut)
            e.source_message = turn.message_id
            shown.add(turn.message_id)
    for e in knowledge[:NO_PROVIDER_TOP]:
        turn = turns.get(e.id)
        if turn is not None:
            e.next_turn = evidence_mod.follow_up(reader, scope_ids, turn)


def _show_follow_ups(lines: list[Evidence], query: str) -> None:
    """Render the follow-up turns of the lines an answer shows, each message once: not
    beside a line when another shown line quotes it already."""
    shown = {e.source_message for e in lines if e.source_message is not None}
    for e in lines:
        nxt = e.next_turn
        if nxt is None or nxt.message_id in shown:
            continue
        e.follow_up = evidence_mod.turn_line(
            nxt, evidence_mod.excerpt(nxt.text, anchor=e.text, query=query))
        shown.add(nxt.message_id)


def _hydrate(reader: Reader, scope_ids: list[Any], ids: list[str], origin: str
             ) -> list[Evidence]:
    """Governed statements by id, read again through the reader's filters, in id order."""
    if not ids:
        return []
    rows = {str(k.id): k for k in visible_knowledge(reader=reader, scope_ids=scope_ids)
            .filter(pk__in=ids).select_related("scope", "subject_peer")}
    said = evidence_mod.said_at_of(rows)
    out = []
    for i in ids:
        k = rows.get(i)
        if k is not None:
            out.append(_knowledge_evidence(
                {"id": i, "statement": k.statement, "kind": k.kind, "scope": k.scope.path,
                 "subject_peer_key": k.subject_peer.key if k.subject_peer else None,
                 "confidence": k.confidence, "state": k.state,
                 "when": evidence_mod.when_of(k, said)}, origin))
    return out


# --- the answerer ----------------------------------------------------------------------------

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["answer", "citations", "answer_confidence"],
    "properties": {
        "answer": {"type": "string", "maxLength": 4000},
        "citations": {"type": "array", "maxItems": 24,
                      "items": {"type": "string", "maxLength": 100}},
        "answer_confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    },
}
ANSWER_SYSTEM = (
    "You answer a question using only the retrieved evidence items you are given. State "
    "what those items make most probable; never add outside knowledge. Cite the ids of the "
    "items you relied on in `citations`. Report `answer_confidence`, an integer from 0 to "
    "100, for your own certainty: below 50 means the evidence only weakly supports the "
    "answer. An item with `possibly_outdated` is an older claim that the item it names "
    "says otherwise about: prefer the newer one."
)


@dataclass(frozen=True)
class Relevance:
    """Which base candidates carry evidence about the question (see the module doc)."""

    floor: float
    basis: str  # semantic | lexical_entity (no vectors) | disabled
    top_similarity: float | None
    survivors: frozenset[str]

    def as_dict(self, candidates: int) -> dict[str, Any]:
        top = None if self.top_similarity is None else round(self.top_similarity, 4)
        return {"min_similarity": self.floor, "basis": self.basis, "top_similarity": top,
                "surviving": len(self.survivors),
                "dropped": candidates - len(self.survivors)}


def worth_reranking(lists: dict[str, list[tuple[str, float]]], floor: float) -> bool:
    """relevance()'s gate on the strategies' lists alone, before any rerank: False means
    ask will abstain whatever the order, so the search skips its (model) rerank."""
    if floor <= 0:
        return True
    similarity = [s for _, s in lists.get("semantic", [])]
    if similarity:
        return max(similarity) >= floor
    return any(lists.get(name) for name in ("lexical", "entity_match"))


def relevance(result: engine.SearchResult, floor: float) -> Relevance:
    """Keep the candidates that are about the question.

    Nearest-neighbour search always returns something, so a question the memory knows
    nothing about ("What is the capital of France?") would be answered with the scope's
    closest statements. Semantic similarity is the gate: some candidate must clear
    `floor`. Past the gate a lexical or entity match also keeps a candidate (a name or
    rare word the question shares), since similarity alone misses some true evidence.
    Without any vectors (semantic returned nothing) the lexical and entity matches decide.
    """
    ids = [str(c["id"]) for c in result.candidates]
    similarity = dict(result.lists.get("semantic", []))
    matched = {kid for name in ("lexical", "entity_match")
               for kid, _ in result.lists.get(name, [])}
    top = max(similarity.values(), default=None)
    if floor <= 0:
        return Relevance(floor, "disabled", top, frozenset(ids))
    if top is None:
        return Relevance(floor, "lexical_entity", None,
                         frozenset(i for i in ids if i in matched))
    if top < floor:
        return Relevance(floor, "semantic", top, frozenset())
    return Relevance(floor, "semantic", top, frozenset(
        i for i in ids if similarity.get(i, 0.0) >= floor or i in matched))


def _grounded(query: str, evidence: list[Evidence]) -> dict[str, Any]:
    """The model-free answer: the best-ranked item that cleared the relevance gate, dated,
    with its source turn when the turn holds detail the statement lost; then, up to
    NO_PROVIDER_TOP lines, only items that hold at least as many of the question's words
    as the best one (a second equally on-topic line, not whatever ranked next).
    Confidence 40 (NO_PROVIDER_CONFIDENCE): a chosen configuration answering, unweighed."""
    want = evidence_mod.stems(query)

    def cover(e: Evidence) -> int:
        return len(want & evidence_mod.stems(f"{e.text} {e.source or ''}"))

    best = cover(evidence[0])
    chosen = [evidence[0]] + [e for e in evidence[1:NO_PROVIDER_TOP] if cover(e) >= best]
    _show_follow_ups(chosen, query)
    return {"answer": "\n".join(e.answer_line() for e in chosen),
            "answer_confidence": NO_PROVIDER_CONFIDENCE,
            # The below-50 abstention rule reads a model's own certainty; with no
            # model the fixed 40 marks the answer as unweighed, not withdrawn.
            "abstained": False, "abstention_reason": None, "answer_degraded": None,
            "citations": [e.citation() for e in chosen],
            "supporting_statements": [e.text for e in chosen], "model_called": False}


def _answer(provider: ChatProvider | None, query: str, evidence: list[Evidence],
            *, empty_reason: str = "no_candidates") -> dict[str, Any]:
    if not evidence:
        return {"answer": None, "answer_confidence": 0, "abstained": True,
                "abstention_reason": empty_reason, "answer_degraded": None,
                "citations": [], "supporting_statements": [], "model_called": False}
    if provider is None:
        return _grounded(query, evidence)
    _show_follow_ups(evidence, query)
    user = json.dumps({"question": query, "evidence": [e.prompt_item() for e in evidence]},
                      ensure_ascii=False)
    try:
        reply = provider.complete_json(system=ANSWER_SYSTEM, user=user, schema=ANSWER_SCHEMA,
                                       schema_name="ask_answer_v1")
    except ProviderError as exc:
        log.warning("ask: answer model call failed (%s)", exc.kind)
        return {"answer": f"The answer model call failed ({exc.kind}); the retrieved "
                          "statements are returned without a conclusion.",
                "answer_confidence": 0, "abstained": True,
                "abstention_reason": "answer_degraded", "answer_degraded": exc.kind,
                "citations": [e.citation() for e in evidence],
                "supporting_statements": [e.text for e in evidence], "model_called": True}
    by_id = {e.id: e for e in evidence}
    cited = [by_id[i] for i in dict.fromkeys(reply["citations"]) if i in by_id]
    if not cited:  # nothing the model cited was retrieved: empty abstention wins
        return {"answer": None, "answer_confidence": 0, "abstained": True,
                "abstention_reason": "no_supported_citation", "answer_degraded": None,
                "citations": [], "supporting_statements": [], "model_called": True}
    confidence = int(reply["answer_confidence"])
    return {"answer": reply["answer"], "answer_confidence": confidence,
            "abstained": confidence < ABSTAIN_BELOW,
            "abstention_reason": "low_confidence" if confidence < ABSTAIN_BELOW else None,
            "answer_degraded": None, "citations": [e.citation() for e in cited],
            "supporting_statements": [e.text for e in cited], "model_called": True}


# --- the planner -----------------------------------------------------------------------------

PLAN_SYSTEM = (
    "You plan read-only retrieval for a memory system before a question is answered. You "
    "see the question and the statements already retrieved. Choose up to {max_steps} tool "
    "calls that could find missing evidence: knowledge_search (a rewritten search query), "
    "stable_profile (stable identity facts about the reader), lineage (statements related "
    "to those retrieved){source_tools}. Keep each query short. Set done to true when the "
    "retrieved statements suffice."
)


def _plan_schema(tools: tuple[str, ...], max_steps: int) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["steps", "done"],
        "properties": {
            "steps": {"type": "array", "maxItems": max_steps, "items": {
                "type": "object", "additionalProperties": False, "required": ["tool", "query"],
                "properties": {"tool": {"type": "string", "enum": list(tools)},
                               "query": {"type": "string", "maxLength": 500}}}},
            "done": {"type": "boolean"},
        },
    }


@dataclass
class _Step:
    tool: str
    query: str


@dataclass
class _Planner:
    reader: Reader
    scope: Scope
    scope_ids: list[Any]
    query: str
    profile: Profile
    preset: Preset
    tools: tuple[str, ...]
    seen: set[str]
    head: list[Evidence]
    provider: ChatProvider | None
    found: list[Evidence] = field(default_factory=list)
    planner_calls: int = 0
    tool_calls: int = 0
    exhausted: list[str] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    planner_degraded: str | None = None

    def _exhaust(self, bound: str) -> None:
        if bound not in self.exhausted:
            self.exhausted.append(bound)

    def _cap_query(self, text: str) -> tuple[str, int]:
        words = text.split()
        kept: list[str] = []
        for w in words:
            if tokens(" ".join([*kept, w])) > self.preset.query_tokens:
                self._exhaust("query_tokens")
                break
            kept.append(w)
        out = " ".join(kept)
        return out, tokens(out)

    # tools: each returns evidence in its own rank order
    def _knowledge_search(self, q: str) -> list[Evidence]:
        result = engine.search(reader=self.reader, scope=self.scope, query=q,
                               profile=self.profile, limit=ANSWER_CAP)
        return [_knowledge_evidence(c, "knowledge_search") for c in result.candidates]

    def _stable_profile(self, q: str) -> list[Evidence]:
        rows = stable_statements(reader=self.reader, scope=self.scope)
        ids = [str(i) for i in rows.values_list("id", flat=True)[:ANSWER_CAP]]
        return _hydrate(self.reader, self.scope_ids, ids, "stable_profile")

    def _lineage(self, q: str) -> list[Evidence]:
        seeds = [e.id for e in [*self.head, *self.found] if e.type == "knowledge"]
        ids = related_ids(reader=self.reader, scope_ids=self.scope_ids, seeds=seeds[:6],
                          fan_out=4)
        return _hydrate(self.reader, self.scope_ids, ids, "lineage")

    def _source_rows(self, q: str, semantic: bool) -> list[Evidence]:
        lane = source_recall.semantic if semantic else source_recall.exact
        rows = lane(self.reader, self.scope_ids, q, SOURCE_TOOL_LIMIT)
        origin = "source_semantic" if semantic else "source_exact"
        return [Evidence(str(m.id), "source_message", m.text[:EXCERPT_CHARS], origin,
                         {"excerpt": m.text[:EXCERPT_CHARS], "scope": m.scope.path,
                          "occurred_at": m.occurred_at})
                for m in rows]

    def _run(self, step: _Step) -> None:
        if step.tool not in self.tools:
            return  # outside the closed set for this request
        if self.tool_calls >= self.preset.tool_calls:
            self._exhaust("tool_calls")
            return
        self.tool_calls += 1  # reserved before the call runs
        q, q_tokens = self._cap_query(step.query or self.query)
        runners: dict[str, Callable[[str], list[Evidence]]] = {
            "knowledge_search": self._knowledge_search,
            "stable_profile": self._stable_profile,
            "lineage": self._lineage,
            "source_exact": lambda text: self._source_rows(text, semantic=False),
            "source_semantic": lambda text: self._source_rows(text, semantic=True),
        }
        if step.tool == "knowledge_search" and not q.strip():
            results: list[Evidence] = []
        else:
            results = runners[step.tool](q)
        new = 0
        for e in results:
            if e.id in self.seen:
                continue
            self.seen.add(e.id)
            self.found.append(e)
            new += 1
        self.log.append({"tool": step.tool, "query_tokens": q_tokens,
                         "returned": len(results), "new": new,
                         "profile": self.profile.name if step.tool == "knowledge_search"
                         else None})

    def deterministic_steps(self) -> list[_Step]:
        steps: list[_Step] = []
        rewrite = " ".join(analyze(self.query).terms)
        if rewrite and rewrite != " ".join(self.query.lower().split()):
            steps.append(_Step("knowledge_search", rewrite))
        steps += [_Step("stable_profile", ""), _Step("lineage", "")]
        if "source_exact" in self.tools:
            steps.append(_Step("source_exact", rewrite or self.query))
        if "source_semantic" in self.tools:
            steps.append(_Step("source_semantic", self.query))
        return steps

    def _model_steps(self, provider: ChatProvider) -> tuple[list[_Step], bool] | None:
        remaining = self.preset.tool_calls - self.tool_calls
        source_note = (", source_exact / source_semantic (raw source messages)"
                       if "source_exact" in self.tools else "")
        user = json.dumps({
            "question": self.query,
            "retrieved": [e.prompt_item() for e in [*self.head, *self.found]],
        }, ensure_ascii=False)
        try:
            plan = provider.complete_json(
                system=PLAN_SYSTEM.format(max_steps=remaining, source_tools=source_note),
                user=user, schema=_plan_schema(self.tools, remaining),
                schema_name="ask_plan_v1")
        except ProviderError as exc:
            log.warning("ask: planner call failed (%s)", exc.kind)
            self.planner_degraded = exc.kind
            return None
        steps = [_Step(s["tool"], s["query"]) for s in plan["steps"]]
        return steps, bool(plan["done"])

    def run(self) -> None:
        if self.provider is None:
            for step in self.deterministic_steps():
                self._run(step)
            return
        while True:
            if self.tool_calls >= self.preset.tool_calls:
                self._exhaust("tool_calls")
                return
            if self.planner_calls >= self.preset.planner_calls:
                self._exhaust("planner_calls")
                return
            self.planner_calls += 1  # reserved before the call runs
            planned = self._model_steps(self.provider)
            if planned is None:  # the planner failed: fall back to the fixed plan once
                for step in self.deterministic_steps():
                    self._run(step)
                return
            steps, done = planned
            before = len(self.found)
            for step in steps:
                self._run(step)
            if done or not steps or len(self.found) == before:
                return


def _assemble(base: list[Evidence], found: list[Evidence], retain: int, ceiling: int | None,
              exhausted: list[str]) -> list[Evidence]:
    """Retained head, then new tool evidence (at least one slot reserved for it), then the
    base tail; evidence that would cross the token ceiling is not admitted."""
    retain = min(retain, ANSWER_CAP - 1)
    head = base[:retain]
    order = head + found[: ANSWER_CAP - len(head)]
    for e in base[retain:]:
        if len(order) >= ANSWER_CAP:
            break
        order.append(e)
    if ceiling is None:
        return order
    admitted: list[Evidence] = []
    used = 0
    for e in order:
        if used + e.tokens > ceiling:
            if "evidence_tokens" not in exhausted:
                exhausted.append("evidence_tokens")
            continue
        admitted.append(e)
        used += e.tokens
    return admitted


def ask(*, reader: Reader, scope: Scope, query: str, profile: Profile,
        effort: str | None = None, include_source_recall: bool = False) -> dict[str, Any]:
    from memhouse.core.metering import metering

    # The provider bills each planner and answer call (to the API credential if any).
    with metering(reader.account_id, prefer_request=True):
        return _ask(reader=reader, scope=scope, query=query, profile=profile, effort=effort,
                    include_source_recall=include_source_recall)


def _ask(*, reader: Reader, scope: Scope, query: str, profile: Profile,
         effort: str | None, include_source_recall: bool) -> dict[str, Any]:
    started = timezone.now()
    provider = get_provider()
    floor = float(settings.MEMHOUSE_ASK_MIN_SIMILARITY)
    # The relevance gate runs before the rerank: an abstention makes no model call at all.
    result = engine.search(reader=reader, scope=scope, query=query, profile=profile,
                           limit=ANSWER_CAP,
                           rerank_gate=lambda lists: worth_reranking(lists, floor))
    about = relevance(result, floor)
    base = [_knowledge_evidence(c, "base", c["rank"]) for c in result.candidates
            if str(c["id"]) in about.survivors]
    recall: dict[str, Any] = {"effort": effort, "profile": profile.name,
                              "include_source_recall": include_source_recall,
                              "answer_cap": ANSWER_CAP,
                              "relevance": about.as_dict(len(result.candidates))}
    scope_ids = list(scope_ancestors(scope).values_list("id", flat=True))
    if effort is None or not base:
        # Nothing about the question: no planning either (a rewritten query or the
        # reader's profile would only dress up unrelated statements as evidence).
        _ground(reader, scope_ids, query, base)
        evidence = base
        recall["planner"] = None
    else:
        preset = PRESETS[effort]
        tools = KNOWLEDGE_TOOLS + (SOURCE_TOOLS if include_source_recall else ())
        planner = _Planner(reader=reader, scope=scope, scope_ids=scope_ids, query=query,
                           profile=profile, preset=preset, tools=tools,
                           seen={str(c["id"]) for c in result.candidates},
                           head=base[:preset.retain],
                           provider=provider)
        planner.run()
        exhausted = list(planner.exhausted)
        # Dated before the token ceiling counts them: the answerer gets what is counted.
        _ground(reader, scope_ids, query, base + planner.found)
        evidence = _assemble(base, planner.found, preset.retain, preset.evidence_tokens,
                             exhausted)
        recall.update({
            "planner": "model" if provider is not None else "deterministic",
            "planner_degraded": planner.planner_degraded,
            "tools": list(tools),
            "tool_profile": profile.name,
            "retained_head": min(preset.retain, len(base)),
            "budgets": {"planner_calls": preset.planner_calls if provider else 0,
                        "tool_calls": preset.tool_calls, "query_tokens": preset.query_tokens,
                        "evidence_tokens": preset.evidence_tokens},
            "used": {"planner_calls": planner.planner_calls, "tool_calls": planner.tool_calls,
                     "evidence_tokens": sum(e.tokens for e in evidence)},
            "exhausted": exhausted,
            "tool_calls": planner.log,
            "new_evidence": sum(1 for e in evidence if e.origin != "base"),
        })
    # What the tools found beyond search carries its possibly_outdated mark too (conflicts).
    found = [e for e in evidence if e.type == "knowledge" and e.origin != "base"]
    marks = conflicts.outdated_by(reader=reader, scope_ids=scope_ids, ids=[e.id for e in found])
    for e in found:
        e.data[conflicts.FIELD] = marks.get(e.id)
    empty_reason = "no_relevant_evidence" if result.candidates else "no_candidates"
    answer = _answer(provider, query, evidence, empty_reason=empty_reason)
    retrieval = {k: v for k, v in result.as_dict().items() if k != "candidates"}
    return {
        **answer,
        "profile": profile.name,
        "profile_version": profile.version,
        "reader_posture": reader.posture,
        "effort": effort,
        "candidates": result.candidates,
        "recall_evidence": [{"rank": i + 1, "id": e.id, "type": e.type, "origin": e.origin,
                             "base_rank": e.base_rank, "tokens": e.tokens}
                            for i, e in enumerate(evidence)],
        "recall": recall,
        "retrieval": retrieval,
        "elapsed_ms": round((timezone.now() - started).total_seconds() * 1000, 2),
    }
