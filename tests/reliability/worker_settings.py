"""Settings for Celery worker subprocesses started by tests/reliability: the project's
settings, pointed at the test run's database and the test's queues."""

from __future__ import annotations

import os

from memhouse.settings import *  # noqa: F403
from memhouse.settings import DATABASES

DATABASES["default"]["NAME"] = os.environ["MEMHOUSE_WORKER_DB_NAME"]
# Follow-up tasks (embedding, entity index) go to a queue no test worker consumes.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("MEMHOUSE_WORKER_DEFAULT_QUEUE", "celery")
CELERY_TASK_ROUTES: dict[str, object] = {}  # not to the named queues: see queue_support
MEMHOUSE_LLM_MAX_RETRIES = 0
