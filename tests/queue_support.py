"""A real Redis broker for queuing tests: its own Redis database and queue, emptied before
and after, with Celery pointed at it (not eager) for the test's duration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from kombu import pools as kombu_pools

from memhouse.celery import app


def reset_pool() -> None:
    """Forget broker connections so the next publish uses the current broker_url."""
    if app._pool is not None:
        app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None
    kombu_pools.reset()  # kombu keeps producer pools per connection, globally


def set_routes(routes: dict[str, object] | None) -> None:
    """Route tasks by `routes` from now on (Celery caches the router it built)."""
    app.conf.task_routes = routes
    app.amqp.flush_routes()
    app.amqp.__dict__.pop("router", None)


def real_broker(url: str, queue: str, *, routed: bool = False) -> Iterator[redis.Redis]:
    """Body of a `broker` fixture: yields a client of that Redis database. Unless
    `routed`, every task goes to `queue` (not to the named queues of
    settings.MEMHOUSE_QUEUE_TASKS), so one test worker on `queue` sees all of them."""
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.fail("these tests need Redis on 127.0.0.1:6379 (.ci/run starts it)")
    client.flushdb()
    saved = (app.conf.task_always_eager, app.conf.broker_url, app.conf.task_default_queue)
    routes = app.conf.task_routes
    app.conf.update(task_always_eager=False, broker_url=url, task_default_queue=queue)
    if not routed:
        set_routes({})
    reset_pool()
    try:
        yield client
    finally:
        app.conf.update(task_always_eager=saved[0], broker_url=saved[1],
                        task_default_queue=saved[2])
        set_routes(routes)
        reset_pool()
        client.flushdb()
