"""Governance REST endpoints (curator decisions, self-governance, questions, erasure)."""

from django.urls import path

from governance import api

urlpatterns = [
    path("curator/queue", api.CuratorQueueApi.as_view(), name="curator-queue"),
    path("curator/knowledge/<uuid:knowledge_id>/approve", api.CuratorApproveApi.as_view(),
         name="curator-approve"),
    path("curator/knowledge/<uuid:knowledge_id>/reject", api.CuratorRejectApi.as_view(),
         name="curator-reject"),
    path("curator/knowledge/<uuid:knowledge_id>/resolve", api.CuratorResolveApi.as_view(),
         name="curator-resolve"),
    path("curator/knowledge/<uuid:knowledge_id>/promote", api.CuratorPromoteApi.as_view(),
         name="curator-promote"),
    path("curator/knowledge/<uuid:knowledge_id>/edit", api.CuratorEditApi.as_view(),
         name="curator-edit"),
    path("curator/knowledge/merge", api.CuratorMergeApi.as_view(), name="curator-merge"),
    path("curator/knowledge/<uuid:knowledge_id>/contradiction",
         api.CuratorContradictionApi.as_view(), name="curator-contradiction"),
    path("curator/knowledge/<uuid:knowledge_id>/revalidation",
         api.CuratorRevalidationApi.as_view(), name="curator-revalidation"),
    path("scopes/settings/belief-time", api.ScopeBeliefTimeApi.as_view(),
         name="scope-belief-time"),
    path("me/knowledge", api.MyKnowledgeApi.as_view(), name="me-knowledge"),
    path("me/knowledge/<uuid:knowledge_id>/correct", api.MyKnowledgeCorrectApi.as_view(),
         name="me-knowledge-correct"),
    path("me/knowledge/<uuid:knowledge_id>/confirm", api.MyKnowledgeConfirmApi.as_view(),
         name="me-knowledge-confirm"),
    path("me/knowledge/<uuid:knowledge_id>/contest", api.MyKnowledgeContestApi.as_view(),
         name="me-knowledge-contest"),
    path("me/knowledge/<uuid:knowledge_id>/redact", api.MyKnowledgeRedactApi.as_view(),
         name="me-knowledge-redact"),
    path("me/questions", api.MyQuestionsApi.as_view(), name="me-questions"),
    path("questions/<uuid:question_id>/answer", api.QuestionAnswerApi.as_view(),
         name="question-answer"),
    path("erasure", api.ErasureApi.as_view(), name="erasure"),
    path("admin/dead-letters", api.DeadLettersApi.as_view(), name="admin-dead-letters"),
    path("admin/dead-letters/<uuid:message_id>/retry", api.DeadLetterRetryApi.as_view(),
         name="admin-dead-letter-retry"),
    path("admin/dead-letters/document-versions/<uuid:version_id>/retry",
         api.DeadVersionRetryApi.as_view(), name="admin-dead-version-retry"),
]
