"""Personas: in Account A a subject (alice), another member (bob), a curator (carol) and an
agent (scribe, with an API key); in Account B an outsider (mallory)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from knowledge import services
from memhouse.core.tenancy import rebind_account_for_tests


def pytest_configure(config: Any) -> None:
    from django.conf import settings

    # Password hashing strength is not under test; PBKDF2 would dominate the suite's time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Sign-in throttling counts failures across a whole run; its own tests turn it on.
    settings.AXES_ENABLED = False
    # Tests change the corpus between searches; cached corpus statistics would go stale.
    settings.MEMHOUSE_ENTITY_STATS_TTL = 0
    # Tests serve only this machine with the built-in key (memhouse.checks).
    settings.MEMHOUSE_ALLOW_INSECURE_LOCAL = True
    # In-process tests render templates without running collectstatic: plain names, and
    # WhiteNoise finds the sources as in development. The production storage (hashed,
    # compressed, manifest) is tested on the real `manage.py serve` process
    # (tests/console/test_served_static.py).
    settings.STORAGES = {**settings.STORAGES, "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True

    # Property tests assert outcomes, not speed: on 2 shared cores an example can take
    # longer than Hypothesis' 200 ms default and fail a run that is otherwise green.
    from hypothesis import HealthCheck
    from hypothesis import settings as hypothesis_settings

    hypothesis_settings.register_profile(
        "memhouse", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    hypothesis_settings.load_profile("memhouse")


def pytest_unconfigure(config: Any) -> None:
    """A test run leaves no server behind: the embedded PostgreSQL this run started (the
    settings start it on load) is stopped, after the test database is dropped. One that
    was running before the run, or that another live process still uses, is left."""
    from memhouse.core import embedded_db

    done = embedded_db.release()
    if done is not None and done != "stopped":
        import sys

        print(f"embedded PostgreSQL {done}", file=sys.stderr)


@dataclass
class World:
    account: Any
    other_account: Any
    root: Any
    scope: Any
    subject: Any
    member: Any
    curator: Any
    agent: Any
    agent_key: str
    outsider: Any
    outsider_key: str

    def enter(self, account: Any) -> None:
        rebind_account_for_tests(account.id)


def build_world() -> World:
    other = services.account_create(name="Other Co", slug="other")
    mallory = services.peer_create(account_id=other.id, key="mallory", kind="human",
                                   display_name="Mallory", password="mallory-pass-123")
    services.scope_ensure(account_id=other.id, path="/marketing")
    _, outsider_key = services.credential_create(account_id=other.id, peer=mallory)
    rebind_account_for_tests(None)
    account = services.account_create(name="Acme", slug="acme")
    scope = services.scope_ensure(account_id=account.id, path="/marketing/social")
    from knowledge.models import Scope

    root = Scope.objects.get(account=account, path="/")
    alice = services.peer_create(account_id=account.id, key="alice", kind="human",
                                 display_name="Alice", password="alice-pass-123")
    bob = services.peer_create(account_id=account.id, key="bob", kind="human",
                               display_name="Bob", password="bob-pass-1234")
    carol = services.peer_create(account_id=account.id, key="carol", kind="human",
                                 display_name="Carol", password="carol-pass-123",
                                 is_curator=True)
    scribe = services.peer_create(account_id=account.id, key="scribe", kind="agent",
                                  display_name="Scribe")
    _, agent_key = services.credential_create(account_id=account.id, peer=scribe,
                                                act_for_all=True)
    return World(account=account, other_account=other, root=root, scope=scope, subject=alice,
                 member=bob, curator=carol, agent=scribe, agent_key=agent_key,
                 outsider=mallory, outsider_key=outsider_key)


@pytest.fixture
def world(db: Any) -> World:
    """The personas inside the test's transaction, bound to Account A."""
    return build_world()


@pytest.fixture
def committed_world(transactional_db: Any) -> World:
    """The personas committed, for real-HTTP and concurrency tests."""
    from django.db import transaction

    with transaction.atomic():
        w = build_world()
    return w


@pytest.fixture(scope="session", autouse=True)
def _close_strategy_connections(django_db_setup: Any, django_db_blocker: Any) -> Any:
    """Retrieval strategy threads keep their connections; close them before the test
    database is dropped."""
    yield
    from retrieval.engine import close_strategy_connections

    close_strategy_connections()


@pytest.fixture
def fake_openai(settings: Any) -> Any:
    """The fake OpenAI-compatible server (tests.fake_llm) on loopback, configured as the
    generation provider; it records every request and answers from its script."""
    from tests.fake_llm import FakeOpenAI

    with FakeOpenAI() as server:
        settings.MEMHOUSE_LLM_BASE_URL = server.base_url
        settings.MEMHOUSE_LLM_MODEL = "test-model"
        settings.MEMHOUSE_LLM_TIMEOUT = 5
        yield server
