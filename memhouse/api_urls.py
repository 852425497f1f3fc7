from django.urls import path

from knowledge import api as knowledge_api

urlpatterns = [
    path("auth/token", knowledge_api.AuthTokenApi.as_view(), name="auth-token"),
    path("me", knowledge_api.WhoAmIApi.as_view(), name="me"),
]
