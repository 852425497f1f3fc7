from django.urls import path, re_path

from console.views import audit, home, knowledge, me, people, queue

app_name = "console"
urlpatterns = [
    path("login/", home.LoginView.as_view(), name="login"),
    path("logout/", home.LogoutView.as_view(), name="logout"),
    # Invitees (not signed in yet): the link carries the token after '#', which no
    # request line (so no access log) holds; the page posts it to invitation/code/.
    path("invitation/code/", people.invitation_code, name="invitation-code"),
    # Links issued before that form (issue #34) still open: the token in the path.
    path("invitation/<str:token>/", people.invitation_open, name="invitation-open"),
    path("invitation/", people.invitation, name="invitation"),
    path("", home.home, name="home"),
    path("lifecycle/", home.lifecycle_doc, name="lifecycle"),
    # Curators
    path("queue/", queue.queue, name="queue"),
    path("queue/bulk/", queue.queue_bulk, name="queue-bulk"),
    path("queue/<uuid:knowledge_id>/approve/", queue.queue_approve, name="queue-approve"),
    path("queue/<uuid:knowledge_id>/reject/", queue.queue_reject, name="queue-reject"),
    path("queue/<uuid:knowledge_id>/resolve/", queue.queue_resolve, name="queue-resolve"),
    path("queue/<uuid:knowledge_id>/contradiction/", queue.queue_contradiction,
         name="queue-contradiction"),
    path("queue/<uuid:knowledge_id>/revalidation/", queue.queue_revalidation,
         name="queue-revalidation"),
    path("knowledge/<uuid:knowledge_id>/edit/", knowledge.knowledge_edit, name="knowledge-edit"),
    path("knowledge/merge/", knowledge.knowledge_merge, name="knowledge-merge"),
    path("audit/", audit.audit_log, name="audit"),
    path("audit/verify/", audit.audit_verify, name="audit_verify"),
    # Administrators
    path("people/", people.people_page, name="people"),
    path("people/invite/", people.people_invite, name="people-invite"),
    path("people/<uuid:person_id>/", people.person_update, name="person-update"),
    path("people/<uuid:person_id>/active/", people.person_active, name="person-active"),
    path("people/<uuid:person_id>/invite/", people.person_invite, name="person-invite"),
    # Subjects
    path("me/", me.me, name="me"),
    path("me/password/", me.me_password, name="me-password"),
    path("me/knowledge/<uuid:knowledge_id>/confirm/", me.me_confirm, name="me-confirm"),
    path("me/knowledge/<uuid:knowledge_id>/deny/", me.me_deny, name="me-deny"),
    path("me/knowledge/<uuid:knowledge_id>/contest/", me.me_contest, name="me-contest"),
    path("me/knowledge/<uuid:knowledge_id>/redact/", me.me_redact, name="me-redact"),
    path("me/knowledge/<uuid:knowledge_id>/correct/", me.me_correct, name="me-correct"),
    path("me/questions/<uuid:question_id>/answer/", me.question_answer,
         name="question-answer"),
    # Everyone signed in
    path("readiness/", knowledge.readiness_panel, name="readiness"),
    path("scopes/", knowledge.scope_browser, name="scope-root"),
    re_path(r"^scopes/(?P<path>[^?#]+?)/?$", knowledge.scope_browser, name="scope"),
    path("knowledge/<uuid:knowledge_id>/", knowledge.knowledge_detail, name="knowledge"),
    # Anything else under /console/ is a 404 page in words.
    re_path(r"^(?P<rest>.*)$", home.not_found, name="not-found"),
]
