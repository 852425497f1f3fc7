"""Governance REST endpoints (curator decisions, self-governance, questions, erasure)."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
