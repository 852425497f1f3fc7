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
    path("me/knowledge", api.MyKnowledgeApi.as_view(), name="me-knowledge"),
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
]
