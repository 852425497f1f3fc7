"""Intake: a stored message or document version becomes governed knowledge.

extract (knowledge.ingest extractors) -> propose (knowledge.services) -> Gate A (junk,
duplicates) -> supersession (an update retires the row it replaces) -> Gate B (placement),
with the belief-time policy stamped at proposal. The Celery entry points are in
governance.tasks; knowledge.ingest.services enqueues them through the hook that
governance.apps registers, so knowledge never imports governance.
"""
