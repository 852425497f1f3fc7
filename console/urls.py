from django.urls import path, re_path

from console import views

app_name = "console"
urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.LogoutView.as_view(), name="logout"),
    # Invitees (not signed in yet): the link carries the token after '#', which no
    # request line (so no access log) holds; the page posts it to invitation/code/.
    path("invitation/code/", views.invitation_code, name="invitation-code"),
    # Links issued before that form (issue #34) still open: the token in the path.
    path("invitation/<str:token>/", views.invitation_open, name="invitation-open"),
    path("invitation/", views.invitation, name="invitation"),
    path("", views.home, name="home"),
    path("lifecycle/", views.lifecycle_doc, name="lifecycle"),
    # Curators
    path("queue/", views.queue, name="queue"),
    path("queue/bulk/", views.queue_bulk, name="queue-bulk"),
    path("queue/<uuid:knowledge_id>/approve/", views.queue_approve, name="queue-approve"),
    path("queue/<uuid:knowledge_id>/reject/", views.queue_reject, name="queue-reject"),
    path("queue/<uuid:knowledge_id>/resolve/", views.queue_resolve, name="queue-resolve"),
    path("queue/<uuid:knowledge_id>/contradiction/", views.queue_contradiction,
         name="queue-contradiction"),
    path("queue/<uuid:knowledge_id>/revalidation/", views.queue_revalidation,
         name="queue-revalidation"),
    path("knowledge/<uuid:knowledge_id>/edit/", views.knowledge_edit, name="knowledge-edit"),
    path("knowledge/merge/", views.knowledge_merge, name="knowledge-merge"),
    path("audit/", views.audit_log, name="audit"),
    path("audit/verify/", views.audit_verify, name="audit_verify"),
    # Administrators
    path("people/", views.people_page, name="people"),
    path("people/invite/", views.people_invite, name="people-invite"),
    path("people/<uuid:person_id>/", views.person_update, name="person-update"),
    path("people/<uuid:person_id>/active/", views.person_active, name="person-active"),
    path("people/<uuid:person_id>/invite/", views.person_invite, name="person-invite"),
    # Subjects
    path("me/", views.me, name="me"),
    path("me/password/", views.me_password, name="me-password"),
    path("me/knowledge/<uuid:knowledge_id>/confirm/", views.me_confirm, name="me-confirm"),
    path("me/knowledge/<uuid:knowledge_id>/deny/", views.me_deny, name="me-deny"),
    path("me/knowledge/<uuid:knowledge_id>/contest/", views.me_contest, name="me-contest"),
    path("me/knowledge/<uuid:knowledge_id>/redact/", views.me_redact, name="me-redact"),
    path("me/knowledge/<uuid:knowledge_id>/correct/", views.me_correct, name="me-correct"),
    path("me/questions/<uuid:question_id>/answer/", views.question_answer,
         name="question-answer"),
    # Everyone signed in
    path("readiness/", views.readiness_panel, name="readiness"),
    path("scopes/", views.scope_browser, name="scope-root"),
    re_path(r"^scopes/(?P<path>[^?#]+?)/?$", views.scope_browser, name="scope"),
    path("knowledge/<uuid:knowledge_id>/", views.knowledge_detail, name="knowledge"),
    # Anything else under /console/ is a 404 page in words.
    re_path(r"^(?P<rest>.*)$", views.not_found, name="not-found"),
]
