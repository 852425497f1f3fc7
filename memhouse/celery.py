"""The Celery application. Tasks take ids, enter their Account and call services."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memhouse.settings")

app = Celery("memhouse")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from memhouse.celery_schedule import BEAT_SCHEDULE  # noqa: E402

app.conf.beat_schedule = BEAT_SCHEDULE
