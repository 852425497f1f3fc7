"""Console fixtures: signed-in clients for every persona (alice subject, bob member, carol
curator, mallory outsider) and a queue of governed statements. The agent (scribe) has no
Django user at all, so it has no console client."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from knowledge import services
from memhouse.core.tenancy import rebind_account_for_tests
from tests.console.browser import require_browser
from tests.console.builders import Queue, client_for, contested, held, provisional


@pytest.fixture
def sync_playwright() -> Any:
    """Every browser test starts Playwright through this fixture (see require_browser)."""
    return require_browser()


@pytest.fixture
def queue_items(world: Any) -> Queue:
    return Queue(
        held=held(world, excerpt="scribe: the social team posts every Tuesday at nine"),
        contested=contested(world),
        alice_provisional=provisional(world, "Alice is moving to Lisbon.", subject=world.subject),
        bob_provisional=provisional(world, "Bob might move to Oslo next year.",
                                    subject=world.member),
    )


@pytest.fixture
def alice(world: Any) -> Client:
    return client_for(world.subject)


@pytest.fixture
def bob(world: Any) -> Client:
    return client_for(world.member)


@pytest.fixture
def carol(world: Any) -> Client:
    return client_for(world.curator)


@pytest.fixture
def mallory(world: Any) -> Client:
    """The outsider. The test transaction is bound to Account A after building the world;
    unbind it so her request binds to her own Account, as a real request would."""
    client = client_for(world.outsider)
    rebind_account_for_tests(None)
    return client


@pytest.fixture
def outsider_curator(world: Any) -> Client:
    """A curator of the other Account: a curator role must not reach across Accounts."""
    rebind_account_for_tests(world.other_account.id)
    peer = services.peer_create(account_id=world.other_account.id, key="olga", kind="human",
                                display_name="Olga", password="olga-pass-1234",
                                is_curator=True)
    rebind_account_for_tests(None)
    return client_for(peer)


