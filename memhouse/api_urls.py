from django.urls import include, path

from governance.intake import junk
from knowledge import api as knowledge_api
from retrieval import api as retrieval_api


def message_refusal(text: str) -> str | None:
    """Gate A's reason for refusing a message's whole text (machine output, an
    acknowledgement or a ping), or None: what a message outcome reports when nothing was
    proposed from it. Passed to the views from here, the floor that may import both."""
    if junk.machine_output(text):
        return junk.MACHINE_OUTPUT
    if junk.phatic(text):
        return junk.PHATIC
    if junk.learned_reason(statement="", excerpt=text, message_text=text):
        return junk.CLASSIFIER
    return None


urlpatterns = [
    path("auth/token", knowledge_api.AuthTokenApi.as_view(), name="auth-token"),
    path("auth/token/revoke", knowledge_api.AuthTokenRevokeApi.as_view(),
         name="auth-token-revoke"),
    path("me", knowledge_api.WhoAmIApi.as_view(), name="me"),
    path("me/password", knowledge_api.MyPasswordApi.as_view(), name="me-password"),
    path("people", knowledge_api.PeopleApi.as_view(), name="people"),
    path("people/<uuid:person_id>", knowledge_api.PersonApi.as_view(), name="person"),
    path("people/<uuid:person_id>/invitation", knowledge_api.PersonInvitationApi.as_view(),
         name="person-invitation"),
    path("usage", knowledge_api.UsageApi.as_view(), name="usage"),
    path("scopes", knowledge_api.ScopesApi.as_view(), name="scopes"),
    path("scopes/relations", knowledge_api.ScopeRelationsApi.as_view(),
         name="scope-relations"),
    path("scopes/relations/<uuid:relation_id>", knowledge_api.ScopeRelationApi.as_view(),
         name="scope-relation"),
    path("peers", knowledge_api.PeersApi.as_view(), name="peers"),
    path("messages", knowledge_api.MessagesIngestApi.as_view(message_refusal=message_refusal),
         name="messages"),
    path("messages/<uuid:message_id>",
         knowledge_api.MessageDetailApi.as_view(message_refusal=message_refusal),
         name="message"),
    path("documents", knowledge_api.DocumentsApi.as_view(), name="documents"),
    path("documents/<uuid:document_id>", knowledge_api.DocumentDetailApi.as_view(),
         name="document"),
    path("documents/<uuid:document_id>/versions", knowledge_api.DocumentVersionsApi.as_view(),
         name="document-versions"),
    path("search", retrieval_api.SearchApi.as_view(), name="search"),
    path("", include("governance.urls")),
]

from retrieval import read_api  # noqa: E402

urlpatterns += [
    path("context", read_api.ContextApi.as_view(), name="context"),
    path("ask", read_api.AskApi.as_view(), name="ask"),
    path("lineage", read_api.LineageApi.as_view(), name="lineage"),
    path("stable-profile", read_api.StableProfileApi.as_view(), name="stable-profile"),
]

from retrieval import listing_api, readiness_api  # noqa: E402

urlpatterns += [
    path("knowledge", listing_api.KnowledgeListApi.as_view(), name="knowledge"),
    path("knowledge/<uuid:knowledge_id>", listing_api.KnowledgeDetailApi.as_view(),
         name="knowledge-detail"),
    path("readiness", readiness_api.ReadinessApi.as_view(), name="readiness"),
]
