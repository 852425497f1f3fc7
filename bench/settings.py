"""Benchmark settings: the project's settings, pointed at a throw-away database.

`MEMHOUSE_BENCH_DB` names the database on the same (embedded or DATABASE_URL) server;
bench/common.py creates it, migrates it and drops it afterwards (unless --keep-db), so a
benchmark never touches the developer's default database.
"""

import os

from memhouse.settings import *  # noqa: F403
from memhouse.settings import DATABASES

_bench_db = os.environ.get("MEMHOUSE_BENCH_DB", "")
if not _bench_db:
    raise RuntimeError("bench.settings needs MEMHOUSE_BENCH_DB (bench/common.py sets it)")
DATABASES["default"]["NAME"] = _bench_db
# Benchmarks run outside requests; the engine's strategy threads open their own connections.
DATABASES["default"]["ATOMIC_REQUESTS"] = False
# The workers of `bench/ingest.py --processes` load the embedding model before they
# report ready (bench/worker_probe.py); on a loaded machine that takes longer than
# Celery's default 4 s, after which the pool would kill and restart the process.
CELERY_WORKER_PROC_ALIVE_TIMEOUT = 120.0
