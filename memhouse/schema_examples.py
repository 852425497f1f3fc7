"""Request and response examples for every API operation, keyed by operationId.

:func:`memhouse.schema.postprocess_examples` injects them into the OpenAPI schema (views
stay untouched) and sets each operation's real success status; docs/api.md is generated
from them (`manage.py api_doc`). They follow docs/api-guide.md: Caroline's support-group
message, the /demo scope, the scribe agent. A test validates every example against its
schema and checks that every operation has one.
"""

from __future__ import annotations

from typing import Any

K1 = "3f0b6c1e-8a7d-4e2b-9c51-2d8e7f6a1b01"  # a statement
K2 = "7a4e2d90-1c3b-4f5e-8d6a-9b0c1e2f3a02"
MSG = "5c9d1e2f-3a4b-4c6d-8e7f-0a1b2c3d4e03"
MSG2 = "6d0e2f3a-4b5c-4d7e-9f80-1b2c3d4e5f10"
DOC = "9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b504"
VER = "1a2b3c4d-5e6f-4a8b-9c0d-e1f2a3b4c505"
QUESTION = "2b3c4d5e-6f7a-4b9c-8d1e-f2a3b4c5d606"
VALIDATION = "4d5e6f7a-8b9c-4d1e-9f2a-b3c4d5e6f707"
SCOPE_ID = "6f7a8b9c-0d1e-4f3a-8b4c-d5e6f7a8b908"
NOW = "2026-12-01T10:00:00+00:00"
SCOPE_RELATION_ID = "8b9c0d1e-2f3a-4b5c-9d6e-f7a8b9c0d109"
SCOPE_RELATION = {"id": SCOPE_RELATION_ID, "source": "/demo", "target": "/support",
                  "created_by": "dana", "created_at": NOW}

STATEMENT = "Caroline went to a support group."
EFFECTIVE_BELIEF_TIME = {
    "revalidate_days": {"fact": 180, "preference": 30, "relation": 180, "skill": 365,
                        "event": None},
    "sensitivity_factor": {"public": 1.0, "internal": 1.0, "personal": 0.5, "restricted": 0.25},
    "expiry_grace_days": 7,
    "expire": "scheduled",
}


def knowledge(state: str = "active", reason: str = "f4_gate_a_b_accepted",
              **changes: Any) -> dict[str, Any]:
    """A statement as the governance endpoints return it (knowledge.presenters.knowledge_out)."""
    item = {
        "id": K1, "statement": STATEMENT, "subject": "caroline", "scope": "/demo",
        "held_scope": None, "kind": "event", "level": "peer", "confidence": 0.9,
        "sensitivity": "internal", "state": state, "state_reason": reason,
        "verification": "pending", "source_count": 1, "inserted_at": NOW,
        "updated_at": NOW, "revalidate_after": None, "expires_at": None,
        "relevant_from": "2023-05-07T00:00:00+00:00",
        "relevant_until": "2023-05-08T00:00:00+00:00",
        "supersedes": None, "named_entity": None,
        "lifecycle_doc": f"/docs/lifecycle.md#{state}",
    }
    item.update(changes)
    return item


# A message's outcome (POST /api/v1/messages with wait, GET /api/v1/messages/<id>).
MESSAGE_OUTCOME: dict[str, Any] = {
    "processing": "processed",
    "statements": [knowledge(verification="gate_keep")],
    "refused": [],
    "not_visible": {"count": 0, "states": {}},
}

# A document version's outcome (POST /api/v1/documents with wait), uploaded with
# Caroline's key: her own claim is hers to read (provisional until confirmed, as a
# document's claims are); the claim about the scope is held for a curator, so she gets
# its count and state only.
DOCUMENT_OUTCOME: dict[str, Any] = {
    "processing": "processed",
    "statements": [knowledge(state="provisional", reason="f4_gate_a_b_deferred",
                             statement="Caroline moved to Lisbon in 2022.", kind="fact",
                             confidence=0.7, relevant_from=None, relevant_until=None,
                             revalidate_after="2027-03-01T10:00:00+00:00")],
    "refused": [],
    "not_visible": {"count": 1, "states": {"held": 1}},
    # a set-aside version's reason: too_many_statements, processing_failed,
    # crashed_repeatedly
    "error": None,
}

CANDIDATE: dict[str, Any] = {
    "id": K1, "rank": 1, "statement": STATEMENT, "subject_peer_key": "caroline",
    "scope": "/demo", "kind": "event", "level": "peer", "state": "active",
    "confidence": 0.9, "sensitivity": "internal",
    "relevant_from": "2023-05-07T00:00:00+00:00", "relevant_until": "2023-05-08T00:00:00+00:00",
    "inserted_at": NOW, "when": "7 May 2023", "possibly_outdated": None, "deferred_after": None,
    "fusion_score": 0.97,
    "scores": {"semantic": {"raw": 0.71, "normalized": 1.0, "rank": 1, "contribution": 1.0},
               "lexical": {"raw": 1.1, "normalized": 1.0, "rank": 1, "contribution": 1.0}},
}

# ask reads with the thorough profile, which also scores the statements' source turns.
ASK_CANDIDATE: dict[str, Any] = {
    **CANDIDATE, "fusion_score": 0.47,
    "scores": {**CANDIDATE["scores"],
               "entity_match": {"raw": 1.61, "normalized": 1.0, "rank": 1, "contribution": 1.0},
               "semantic.source_turns": {"raw": 0.008, "normalized": 0.07, "rank": 3,
                                         "contribution": 0.11}},
}

RETRIEVAL: dict[str, Any] = {
    "strategies": {"contributed": ["lexical", "semantic"], "empty": ["entity_match"],
                   "not_applicable": ["temporal"], "dropped": []},
    "retrieval_outcomes": [{"strategy": "temporal", "outcome": "not_applicable",
                            "reason_class": "applicability"}],
    "disagreement": {"pairwise_top_k_overlap": {"lexical|semantic": 0.4},
                     "mean_overlap": 0.4, "query_dependent_empty": False},
    "reader_posture": "peer", "profile": "balanced", "profile_version": "balanced-v5",
    "analyzer_version": "lexical-question-v2", "deadline_ms": 300, "reserved_rerank_ms": 0,
    "rerank": {"status": "not_requested"}, "elapsed_ms": 41.2,
    "page": {"limit": 10, "offset": 0, "next_offset": None},
}

TURN = "I went to a LGBTQ support group yesterday and it was so powerful."
NEXT_TURN = "It was so powerful, I'm going again next week with my friend Jo."
CITATION: dict[str, Any] = {"id": K1, "type": "knowledge", "statement": STATEMENT, "kind": "event",
            "scope": "/demo", "subject_peer_key": "caroline", "confidence": 0.9,
            "state": "active", "possibly_outdated": None, "when": "7 May 2023",
            "source_turn": f'[8 May 2023] Caroline: "{TURN}"',
            "follow_up_turn": f'[8 May 2023] Caroline: "{NEXT_TURN}"'}

VERSION: dict[str, Any] = {"document_id": DOC, "version": 1, "version_id": VER,
           "sha256": "bbc9820ac308b75a1dc04328dfdbe0c70260de2f2023acd9ec79d20359b2c126",
           "media_type": "text/plain"}

QUESTION_OUT: dict[str, Any] = {
    "id": QUESTION, "kind": "confirmation",
    "text": "Is this right about you? \"Caroline went to a support group.\"",
    "status": "open", "answers": ["yes", "no"], "deadline": "2026-12-15T10:00:00+00:00",
    "created_at": NOW, "answer": None, "answered_at": None,
    "knowledge": {"id": K1, "statement": STATEMENT, "state": "provisional", "scope": "/demo"},
}

PERSON_2 = "5b0c7d1e-8f2a-4c3b-9d4e-6f7a8b9c0d1e"
PERSON_ID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
PERSON = {"id": PERSON_ID, "key": "caroline",
          "display_name": "Caroline", "username": "caroline", "role": "curator",
          "scopes": ["/"], "active": True, "has_password": True,
          "invitation_expires_at": None, "created_at": NOW}
INVITATION = {"token": "mh_5e6f7a8b9c0d_Qw3...", "expires_at": "2026-12-04T10:00:00Z",
              "url": "https://memhouse.example/console/invitation/#mh_5e6f7a8b9c0d_Qw3..."}
# The ids docs/api.md's curl lines put into path parameters.
PATH_PARAMETERS: dict[str, str] = {"knowledge_id": K1, "document_id": DOC,
                                   "question_id": QUESTION, "message_id": MSG,
                                   "person_id": PERSON_ID,
                                   "relation_id": SCOPE_RELATION_ID, "version_id": VER}

# operationId -> {"status": success code, "request": body (when there is one),
#                 "query": query parameters of the example request (docs/api.md only),
#                 "response": body}
EXAMPLES: dict[str, dict[str, Any]] = {
    "v1_auth_token_create": {
        "status": 201,
        "request": {"username": "caroline", "password": "correct horse battery"},
        "response": {"token": "mh_t1a2b3c4_9sQe...", "prefix": "t1a2b3c4",
                     "expires_at": "2026-12-01T11:00:00Z", "peer_key": "caroline"},
    },
    "v1_me_retrieve": {
        "status": 200,
        "response": {"peer_key": "scribe", "peer_kind": "agent", "via": "api_key",
                     "scopes": ["/"], "curator": False, "admin": False, "act_for": "all"},
    },
    "v1_me_password_create": {
        "status": 200,
        "request": {"current_password": "correct horse battery",
                    "new_password": "staple battery horse correct"},
        "response": {"changed": True},
    },
    "v1_people_retrieve": {
        "status": 200,
        "response": {"people": [PERSON, {**PERSON, "id": PERSON_2, "key": "erin",
                                         "display_name": "Erin", "username": "erin",
                                         "role": "member", "scopes": ["/demo"],
                                         "has_password": False,
                                         "invitation_expires_at": "2026-12-04T10:00:00Z"}]},
    },
    "v1_people_create": {
        "status": 201,
        "request": {"key": "erin", "display_name": "Erin", "role": "member",
                    "scopes": ["/demo"]},
        "response": {"person": {**PERSON, "id": PERSON_2, "key": "erin",
                                "display_name": "Erin", "username": "erin", "role": "member",
                                "scopes": ["/demo"], "has_password": False,
                                "invitation_expires_at": "2026-12-04T10:00:00Z"},
                     "invitation": INVITATION},
    },
    "v1_person_retrieve": {"status": 200, "response": PERSON},
    "v1_person_partial_update": {
        "status": 200,
        "request": {"role": "admin", "scopes": ["/"], "active": True},
        "response": {**PERSON, "role": "admin"},
    },
    "v1_person_invitation_create": {"status": 201, "request": {"reset": True},
                                    "response": INVITATION},
    "v1_scopes_retrieve": {
        "status": 200,
        "response": {"scopes": [{"id": SCOPE_ID, "path": "/demo", "name": "demo"}]},
    },
    "v1_scopes_create": {
        "status": 201,
        "request": {"path": "/marketing/social"},
        "response": {"id": SCOPE_ID, "path": "/marketing/social"},
    },
    "v1_readiness_retrieve": {
        "status": 200,
        "query": {"scope": "/demo", "subject": "caroline"},
        "response": {
            "scope": "/demo", "subject": "caroline", "reader_posture": "peer",
            "status": "gap",
            "projections": [
                {"kind": "scope_card", "audience": "shared", "scope": "/demo",
                 "status": "fresh", "built_at": NOW},
                {"kind": "scope_card", "audience": "shared", "scope": "/",
                 "status": "missing", "built_at": None},
                {"kind": "peer_profile", "audience": "subject", "scope": "/demo",
                 "status": "dirty", "built_at": NOW},
                {"kind": "peer_profile", "audience": "subject", "scope": "/",
                 "status": "missing", "built_at": None}],
            "kinds": {k: {"status": st, "fresh": f,
                          "gaps": {"expired": e, "needs_revalidation": r}}
                      for k, st, f, e, r in (("fact", "ready", 3, 0, 1),
                                             ("preference", "gap", 0, 0, 1),
                                             ("relation", "missing", 0, 0, 0),
                                             ("skill", "missing", 0, 0, 0),
                                             ("event", "gap", 0, 1, 0))},
            "gaps": {"expired": 1, "needs_revalidation": 2},
            "gap_statements": None,
        },
    },
    "v1_scopes_relations_retrieve": {
        "status": 200,
        "response": {"relations": [SCOPE_RELATION]},
    },
    "v1_scopes_relations_create": {
        "status": 201,
        "request": {"source": "/demo", "target": "/support"},
        "response": SCOPE_RELATION,
    },
    "v1_scope_relation_destroy": {
        "status": 200,
        "response": {"id": SCOPE_RELATION_ID, "deleted": True},
    },
    "v1_peers_retrieve": {
        "status": 200,
        "response": {"peers": [{"key": "caroline", "kind": "human",
                                "display_name": "Caroline", "aliases": ["Caro"]},
                               {"key": "scribe", "kind": "agent", "display_name": "Scribe",
                                "aliases": []}]},
    },
    "v1_peers_create": {
        "status": 201,
        "request": {"key": "caroline", "kind": "human", "display_name": "Caroline",
                    "aliases": ["Caro"]},
        "response": {"key": "caroline", "kind": "human", "display_name": "Caroline",
                     "aliases": ["Caro"]},
    },
    "v1_usage_retrieve": {
        "status": 200,
        "query": {"since": "2026-12-01T00:00:00Z"},
        "response": {"scope": "credential", "since": "2026-12-01T00:00:00Z",
                     "totals": {"ingest": 2, "search": 12, "ask": 1, "model_call": 2,
                                "model_tokens": 1840}},
    },
    "v1_messages_create": {
        "status": 202,
        "request": {"scope": "/demo", "session": "chat-42", "wait": 5, "messages": [
            {"id": "chat-42:1", "peer_key": "caroline", "occurred_at": "2023-05-08T13:56:00Z",
             "text": "I went to a support group yesterday and it was so powerful."},
            {"id": "chat-42:2", "peer_key": "caroline", "occurred_at": "2023-05-08T13:57:00Z",
             "text": "ok thanks"}]},
        "response": {"messages": [
            {"id": MSG, "client_message_id": "chat-42:1", "status": "created",
             "outcome": MESSAGE_OUTCOME},
            {"id": MSG2, "client_message_id": "chat-42:2", "status": "created",
             "outcome": {"processing": "processed", "statements": [],
                         "refused": [{"reason": "f4_gate_a_phatic", "count": 0,
                                      "message": "Refused as an acknowledgement or a ping."}],
                         "not_visible": {"count": 0, "states": {}}}}],
            "timed_out": False},
    },
    "v1_messages_retrieve": {
        "status": 200,
        "query": {"peer_key": "caroline"},
        "response": {"message": {
            "id": MSG, "client_message_id": "chat-42:1", "scope": "/demo",
            "session": "chat-42", "peer_key": "caroline",
            "text": "I went to a support group yesterday and it was so powerful.",
            "occurred_at": "2023-05-08T13:56:00+00:00", "inserted_at": NOW,
            "outcome": MESSAGE_OUTCOME}, "reader_posture": "peer"},
    },
    "v1_documents_create": {
        "status": 201,
        "request": {"scope": "/demo", "title": "Handbook", "media_type": "text/plain",
                    "text": "Caroline moved to Lisbon in 2022.\nOur office is in Lisbon.\n",
                    "external_id": "handbook", "wait": 5},
        "response": {**VERSION, "outcome": DOCUMENT_OUTCOME, "timed_out": False},
    },
    "v1_documents_versions_create": {
        "status": 201,
        "request": {"text": "Our office is in Porto."},
        "response": {**VERSION, "version": 2,
                     "sha256": "0d5b1c7e3f9a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c"},
    },
    "v1_documents_list": {
        "status": 200,
        "query": {"scope": "/demo", "external_id": "handbook", "include_text": "true"},
        "response": {"items": [{"id": DOC, "title": "Handbook", "scope": "/demo",
                                "external_id": "handbook", "created_at": NOW,
                                "latest_version": {**VERSION, "created_at": NOW,
                                                   "text": "Our office is in Lisbon.",
                                                   "text_withheld": False}}],
                     "next_cursor": None},
    },
    "v1_documents_retrieve": {
        "status": 200,
        "response": {"id": DOC, "title": "Handbook", "scope": "/demo",
                     "processing": "processed",
                     "versions": [{**VERSION, "processing": "processed", "error": None}]},
    },
    "v1_documents_destroy": {
        "status": 200,
        "response": {"id": DOC, "deleted": True, "retracted_knowledge": 1},
    },
    "v1_search_create": {
        "status": 200,
        "request": {"query": "Where did Caroline go?", "scope": "/demo",
                    "peer_key": "caroline", "profile": "balanced", "limit": 10},
        "response": {"candidates": [CANDIDATE], **RETRIEVAL},
    },
    "v1_ask_create": {
        "status": 200,
        "request": {"query": "Where did Caroline go?", "scope": "/demo",
                    "peer_key": "caroline", "effort": "low"},
        "response": {
            "answer": "Caroline went to a support group on 7 May 2023.",
            "answer_confidence": 82,
            "abstained": False, "abstention_reason": None, "answer_degraded": None,
            "citations": [CITATION], "supporting_statements": [STATEMENT],
            "model_called": True, "profile": "thorough", "profile_version": "thorough-v6",
            "reader_posture": "peer", "effort": "low", "candidates": [ASK_CANDIDATE],
            "recall_evidence": [{"rank": 1, "id": K1, "type": "knowledge", "origin": "base",
                                 "base_rank": 1, "tokens": 9}],
            "recall": {"effort": "low", "profile": "thorough", "include_source_recall": False,
                       "answer_cap": 12, "planner": "model", "planner_degraded": None,
                       "tools": ["knowledge_search", "stable_profile", "lineage"],
                       "tool_profile": "thorough", "retained_head": 1,
                       "budgets": {"planner_calls": 1, "tool_calls": 2, "query_tokens": 32,
                                   "evidence_tokens": 1500},
                       "used": {"planner_calls": 1, "tool_calls": 1, "evidence_tokens": 9},
                       "exhausted": [], "tool_calls": [
                           {"tool": "knowledge_search", "query_tokens": 4, "returned": 1,
                            "new": 0, "profile": "thorough"}],
                       "new_evidence": 0,
                       "relevance": {"min_similarity": 0.38, "basis": "semantic",
                                     "top_similarity": 0.75, "surviving": 1, "dropped": 3}},
            "retrieval": {**RETRIEVAL, "profile": "thorough", "profile_version": "thorough-v6",
                          "rerank": {"status": "done", "reranker": "maxsim", "head": 4,
                                     "moved": 0, "elapsed_ms": 50.0}},
            "elapsed_ms": 912.4,
        },
    },
    "v1_context_create": {
        "status": 200,
        "request": {"scope": "/demo", "peer_key": "caroline", "session": "chat-42",
                    "query": "Caroline support group", "budget_chars": 4000},
        "response": {
            "scope": "/demo", "reader_posture": "peer", "budget_chars": 4000,
            "used_chars": 249, "truncated": False, "omitted_statements": 0,
            "left_out": {"over_budget": 0, "duplicates": 0, "excerpts_over_budget": 0,
                         "sections_empty": []},
            "excerpts": 1,
            "context": ("## Knowledge\n- [7 May 2023] Caroline went to a support group.\n"
                        f'  > [8 May 2023] Caroline: "{TURN}"\n'
                        "## Caroline (person) in /demo\n"
                        "- [said 9 May 2023] Caroline paints landscapes with her kids.\n"),
            "knowledge": [{"id": K1, "statement": STATEMENT, "kind": "event",
                           "level": "peer", "sensitivity": "internal", "state": "active",
                           "confidence": 0.9, "subject_peer_key": "caroline",
                           "scope": "/demo", "relevant_from": "2023-05-07T00:00:00+00:00",
                           "relevant_until": "2023-05-08T00:00:00+00:00",
                           "inserted_at": NOW, "when": "7 May 2023",
                           "possibly_outdated": None,
                           "source": {"message_id": MSG, "speaker": "Caroline",
                                      "said_at": "2023-05-08T13:56:00+00:00",
                                      "excerpt": TURN}}],
            "session_summary": None,
            "peer_profile": {"peer_key": "caroline", "available": False, "entries": []},
            "scope_cards": [{"scope": "/demo", "available": False, "entries": []},
                            {"scope": "/", "available": False, "entries": []}],
            "entity_cards": [{"scope": "/demo", "name": "Caroline", "kind": "person",
                              "entries": [{"id": K2,
                                           "statement": "Caroline paints landscapes with "
                                                        "her kids.",
                                           "kind": "fact", "level": "peer",
                                           "sensitivity": "internal", "state": "active",
                                           "confidence": 0.8,
                                           "subject_peer_key": "caroline",
                                           "scope": "/demo", "relevant_from": None,
                                           "relevant_until": None, "inserted_at": NOW,
                                           "when": "said 9 May 2023",
                                           "possibly_outdated": None}]}],
            "projection_cache_hit": False, "fast_fallback": True,
            "projections": {"required": 3, "reused": 0, "missing": 3, "dirty": 0,
                            "stale": 0, "local_cache_hits": 0, "loaded_from_database": 0},
            "retrieval": RETRIEVAL,
        },
    },
    "v1_lineage_create": {
        "status": 200,
        "request": {"knowledge_id": K1, "peer_key": "caroline", "depth": 2, "fan_out": 8,
                    "max_nodes": 50},
        "response": {
            "root": "n0",
            "nodes": [{"node": "n0", "ref": "knowledge", "id": K1, "statement": STATEMENT,
                       "kind": "event", "state": "active", "level": "peer", "scope": "/demo",
                       "subject_peer_key": "caroline", "operation": "extraction",
                       "depth": 0}],
            "edges": [],
            "truncated": {"depth": False, "fan_out": False, "max_nodes": False},
            "limits": {"depth": 2, "fan_out": 8, "max_nodes": 50}, "reader_posture": "peer",
        },
    },
    "v1_stable_profile_create": {
        "status": 200,
        "request": {"peer_key": "caroline", "scope": "/demo"},
        "response": {
            "peer_key": "caroline", "scope": "/demo",
            "entries": [{"knowledge_id": K2, "statement": "Caroline is a counsellor.",
                         "kind": "fact", "scope": "/demo", "confidence": 0.9,
                         "relevant_from": None, "relevant_until": None,
                         "when": "said 8 May 2023",
                         "source_ids": [MSG], "contradicts": [],
                         "possibly_outdated": None}],
            "conflicts": [], "rebuilt_at": "2026-12-01T10:00:00Z",
            "allowlist": {"kinds": ["fact", "relation", "skill"],
                          "sensitivities": ["public", "internal"], "direct_only": True,
                          "source_backed": True},
        },
    },
    "v1_curator_queue_retrieve": {
        "status": 200,
        "query": {"state": "held", "limit": 25},
        "response": {"items": [{
            **knowledge("held", "f4_scope_hold", subject=None, level="scope",
                        statement="The demo team meets on Mondays.", kind="fact",
                        relevant_from=None, relevant_until=None, held_scope="/demo"),
            "validations": [{"id": VALIDATION, "kind": "review", "status": "open",
                             "reason": "f4_scope_hold", "target_level": None,
                             "target_scope": None, "due_at": "2026-12-08T10:00:00+00:00",
                             "created_at": NOW, "note": ""}]}],
            "next_cursor": None},
    },
    "v1_curator_knowledge_approve_create": {
        "status": 200,
        "request": {"note": "checked with the team calendar"},
        "response": {"knowledge": knowledge("active", "f4_curator_approved", subject=None,
                                            level="scope", relevant_from=None,
                                            relevant_until=None,
                                            statement="The demo team meets on Mondays.")},
    },
    "v1_curator_knowledge_reject_create": {
        "status": 200,
        "request": {"note": "not a team decision"},
        "response": {"knowledge": knowledge("rejected", "f4_curator_rejected", subject=None,
                                            level="scope", relevant_from=None,
                                            relevant_until=None,
                                            statement="The demo team meets on Mondays.")},
    },
    "v1_curator_knowledge_resolve_create": {
        "status": 200,
        "request": {"outcome": "for", "note": "the subject is right"},
        "response": {"knowledge": knowledge("active", "f4_contest_resolved_for",
                                            verification="curator_approved")},
    },
    "v1_curator_knowledge_promote_create": {
        "status": 202,
        "request": {"level": "scope", "scope": "/demo"},
        "response": {"knowledge": knowledge()},
    },
    "v1_auth_token_revoke_create": {
        "status": 200,
        "request": {"all": True},
        "response": {"revoked": 2},
    },
    "v1_curator_knowledge_edit_create": {
        "status": 201,
        "request": {"statement": "Caroline went to an LGBTQ support group.",
                    "note": "the group is named in the source"},
        "response": {"knowledge": knowledge("active", "f4_curator_edited", id=K2,
                                            statement="Caroline went to an LGBTQ support "
                                            "group.", supersedes=K1,
                                            verification="curator_approved"),
                     "superseded": [K1]},
    },
    "v1_curator_knowledge_merge_create": {
        "status": 201,
        "request": {"ids": [K1, K2], "statement": "Caroline goes to a support group weekly.",
                    "note": "two reports of one habit"},
        "response": {"knowledge": knowledge("active", "f4_curator_edited",
                                            statement="Caroline goes to a support group "
                                            "weekly.", supersedes=K1, source_count=2,
                                            verification="curator_approved"),
                     "superseded": [K1, K2]},
    },
    "v1_curator_knowledge_contradiction_create": {
        "status": 200,
        "request": {"outcome": "retire", "note": "Caroline confirmed the move"},
        "response": {"knowledge": knowledge("superseded", "f4_contradiction_resolved",
                                            verification="curator_rejected")},
    },
    "v1_curator_knowledge_revalidation_create": {
        "status": 200,
        "request": {"outcome": "reconfirm", "note": "still the office hours"},
        "response": {"knowledge": knowledge("active", "f4_revalidation_confirmed",
                                            subject=None, level="scope", kind="fact",
                                            statement="The demo office closes at 6pm on "
                                            "Fridays.", relevant_from=None,
                                            relevant_until=None,
                                            revalidate_after="2027-06-03T09:00:00+00:00",
                                            verification="curator_approved")},
    },
    "v1_me_knowledge_correct_create": {
        "status": 201,
        "request": {"statement": "Caroline went to a book club.",
                    "reason": "it was a book club, not a support group"},
        "response": {"knowledge": knowledge("active", "f4_subject_corrected", id=K2,
                                            statement="Caroline went to a book club.",
                                            supersedes=K1, verification="subject_confirmed"),
                     "superseded": [K1]},
    },
    "v1_scopes_settings_belief_time_retrieve": {
        "status": 200,
        "query": {"scope": "/demo"},
        "response": {"scope": "/demo", "belief_time": {"revalidate_days": {"preference": 30}},
                     "effective": EFFECTIVE_BELIEF_TIME},
    },
    "v1_scopes_settings_belief_time_update": {
        "status": 200,
        "request": {"scope": "/demo", "belief_time": {"revalidate_days": {"preference": 30}}},
        "response": {"scope": "/demo", "belief_time": {"revalidate_days": {"preference": 30}},
                     "effective": EFFECTIVE_BELIEF_TIME},
    },
    "v1_knowledge_list": {
        "status": 200,
        "query": {"peer_key": "caroline", "scope": "/demo", "state": "active", "limit": 2},
        "response": {"items": [knowledge(verification="gate_keep", possibly_outdated=None)],
                     "next_cursor": "MjAyNi0xMi0wMVQxMDowMDowMCswMDowMHwzZjBiNmMxZQ",
                     "reader_posture": "peer"},
    },
    "v1_knowledge_retrieve": {
        "status": 200,
        "query": {"peer_key": "caroline"},
        "response": {"knowledge": knowledge(verification="gate_keep", possibly_outdated=None),
                     "reader_posture": "peer"},
    },
    "v1_me_knowledge_retrieve": {
        "status": 200,
        "query": {"limit": 50},
        "response": {"items": [knowledge()],
                     "next_cursor": "MjAyNi0xMi0wMVQxMDowMDowMCswMDowMHwzZjBiNmMxZQ"},
    },
    "v1_me_knowledge_confirm_create": {
        "status": 200,
        "response": {"knowledge": knowledge("active", "f4_subject_confirmed",
                                            verification="subject_confirmed")},
    },
    "v1_me_knowledge_contest_create": {
        "status": 200,
        "request": {"reason": "it was a book club, not a support group"},
        "response": {"knowledge": knowledge("contested", "f4_subject_contested",
                                            verification="subject_disputed")},
    },
    "v1_me_knowledge_redact_create": {
        "status": 200,
        "request": {"reason": "private"},
        "response": {"knowledge": knowledge("redacted", "f4_subject_redacted")},
    },
    "v1_me_questions_retrieve": {
        "status": 200,
        "query": {"status": "open"},
        "response": {"items": [QUESTION_OUT], "next_cursor": None},
    },
    "v1_questions_answer_create": {
        "status": 200,
        "request": {"answer": "yes"},
        "response": {"question": {**QUESTION_OUT, "status": "answered", "answer": "yes",
                                  "answered_at": NOW,
                                  "knowledge": {**QUESTION_OUT["knowledge"],
                                                "state": "active"}}},
    },
    "v1_erasure_create": {
        "status": 200,
        "request": {"message_id": MSG},
        "response": {"erasure": {
            "id": "8b9c0d1e-2f3a-4b5c-9d6e-7f8a9b0c1d09", "kind": "message",
            "target_id": MSG,
            "sha256": "5f2b7c9d1e3a4b6c8d0e2f4a6b8c0d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b3c",
            "erased_at": NOW, "knowledge_retracted": 1, "knowledge_deleted": 0,
            "messages_deleted": 1, "versions_deleted": 0}},
    },
    "v1_admin_dead_letters_retrieve": {
        "status": 200,
        "query": {"limit": 50},
        "response": {"items": [
            {"kind": "document_version", "id": VER, "scope": "/demo", "peer_key": "scribe",
             "client_message_id": None, "document_id": DOC, "version": 2,
             "occurred_at": None, "inserted_at": NOW, "failed_at": NOW,
             "error": "crashed_repeatedly",
             "error_message": "its processing started 3 times and never finished (a worker "
                              "killed or restarted mid-task), the most "
                              "MEMHOUSE_MAX_INGEST_ATTEMPTS allows; find the cause (often "
                              "memory or time on this input), then retry it",
             "attempts": 3},
            {"kind": "message", "id": MSG, "scope": "/demo", "peer_key": "caroline",
             "client_message_id": "chat-42:7", "document_id": None, "version": None,
             "occurred_at": NOW, "inserted_at": NOW, "failed_at": NOW,
             "error": "extraction_failed",
             "error_message": "OverflowError: date value out of range", "attempts": 1}],
            "next_cursor": None},
    },
    "v1_admin_dead_letters_retry_create": {
        "status": 202,
        "response": {"kind": "message", "id": MSG, "status": "queued"},
    },
    "v1_admin_dead_letters_document_versions_retry_create": {
        "status": 202,
        "response": {"kind": "document_version", "id": VER, "document_id": DOC,
                     "version": 2, "status": "queued"},
    },
}

# One example per documented error status, in the one error shape.
ERRORS: dict[str, dict[str, Any]] = {
    "400": {"error": {"code": "unknown_peer_key",
                      "message": "no peer with key 'ghost'; create it first with POST "
                                 "/api/v1/peers (key, kind human or agent)",
                      "details": {}}},
    "401": {"error": {"code": "not_authenticated",
                      "message": "Authentication credentials were not provided."}},
    "403": {"error": {"code": "permission_denied",
                      "message": "You do not have permission to perform this action."}},
    "404": {"error": {"code": "not_found", "message": "not found"}},
    "409": {"error": {"code": "client_id_conflict",
                      "message": "message id 'chat-42:1' was already used for other text"}},
    "429": {"error": {"code": "rate_limited",
                      "message": "rate limit exceeded; retry in 12 seconds"}},
}

# One line per operation: the OpenAPI summary (Swagger UI's list, docs/api.md's index).
SUMMARIES: dict[str, str] = {
    "v1_auth_token_create": "Sign in: exchange a human's username and password for a "
                            "short-lived token",
    "v1_auth_token_revoke_create": "Revoke this login token, or every login token of the "
                                   "signed-in human",
    "v1_me_retrieve": "Who the credential is: peer, kind, scopes, curator flag, act-for grant",
    "v1_me_knowledge_retrieve": "Everything about the signed-in human, in any scope and state",
    "v1_me_knowledge_confirm_create": "Confirm a statement about yourself",
    "v1_me_knowledge_contest_create": "Dispute a statement about yourself (a curator decides)",
    "v1_me_knowledge_correct_create": "Replace an outdated statement about yourself with "
                                      "what is true now",
    "v1_me_knowledge_redact_create": "Withdraw a statement about yourself from use",
    "v1_me_questions_retrieve": "Questions put to the signed-in human (confirmation, "
                                "revalidation, consent)",
    "v1_questions_answer_create": "Answer a question put to you",
    "v1_scopes_retrieve": "List the scopes this credential may see",
    "v1_scopes_create": "Create a scope (and its missing ancestors)",
    "v1_scopes_settings_belief_time_retrieve": "Read a scope's belief-time override and the "
                                               "effective policy",
    "v1_scopes_settings_belief_time_update": "Set or clear a scope's belief-time override "
                                             "(administrators)",
    "v1_readiness_retrieve": "Which projections of a read are fresh and which readiness "
                             "gaps a scope or a subject has",
    "v1_scopes_relations_retrieve": "List the scope relations (administrators)",
    "v1_scopes_relations_create": "Link two scopes so relation expansion may cross them for "
                                  "readers authorised for both (administrators)",
    "v1_scope_relation_destroy": "Remove a scope relation (administrators)",
    "v1_peers_retrieve": "List the Account's peers",
    "v1_peers_create": "Register a participant (human or agent) without a password",
    "v1_messages_create": "Ingest a batch of messages; extraction runs in the pipeline "
                          "(with wait, answer with each message's outcome)",
    "v1_messages_retrieve": "One message's processing state and outcome, for a reader who "
                            "may read it",
    "v1_documents_create": "Upload a document (its first version); with wait, answer with "
                           "its outcome",
    "v1_documents_versions_create": "Add a version to a document; statements it no longer "
                                    "supports are superseded (with wait, answer with its "
                                    "outcome)",
    "v1_documents_list": "The live documents this credential may access, with their "
                         "latest versions",
    "v1_documents_retrieve": "A document and its versions, with their processing state",
    "v1_documents_destroy": "Tombstone a document; statements left without a source are "
                            "retracted",
    "v1_search_create": "Search governed knowledge for a reader (fused strategies under a "
                        "deadline)",
    "v1_ask_create": "Answer a question from governed knowledge, with citations",
    "v1_context_create": "Context for an agent's prompt: dated lines ranked by the "
                         "question, with source turns (no model call)",
    "v1_lineage_create": "A statement's provenance, relations and supersession graph",
    "v1_stable_profile_create": "A peer's stable profile: direct, source-backed, "
                                "non-sensitive statements",
    "v1_knowledge_list": "Page through the statements a reader may see",
    "v1_knowledge_retrieve": "One statement a reader may see",
    "v1_curator_queue_retrieve": "Statements waiting for a curator: held, contested, "
                                 "contradicted, due for revalidation",
    "v1_curator_knowledge_approve_create": "Approve a held statement",
    "v1_curator_knowledge_reject_create": "Reject a held statement",
    "v1_curator_knowledge_resolve_create": "Decide a subject's dispute, for or against the "
                                           "statement",
    "v1_curator_knowledge_promote_create": "Request a wider placement (scope or Account level)",
    "v1_curator_knowledge_edit_create": "Correct a statement: a new row supersedes it",
    "v1_curator_knowledge_merge_create": "Merge statements about one subject in one scope",
    "v1_curator_knowledge_contradiction_create": "Settle a contradiction review: keep or "
                                                 "retire the current statement",
    "v1_curator_knowledge_revalidation_create": "Reconfirm or retire a statement nobody else "
                                                "can confirm, past its revalidation date",
    "v1_erasure_create": "Hard-delete a message, a document or a peer's messages (erasure)",
    "v1_admin_dead_letters_retrieve": "Messages and document versions set aside "
                                      "(dead-lettered), with why (administrators)",
    "v1_admin_dead_letters_retry_create": "Extract a dead-lettered message again",
    "v1_admin_dead_letters_document_versions_retry_create": "Process a dead-lettered "
                                                            "document version again",
    "v1_usage_retrieve": "Metered usage by kind since a time",
}
