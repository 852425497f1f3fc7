"""Console sign-in: humans only, CSRF everywhere, errors as pages in words."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.console.builders import HX, client_for

pytestmark = pytest.mark.django_db


def test_login_page_renders_a_labelled_form(client, world):
    r = client.get("/console/login/")
    html = r.content.decode()
    assert r.status_code == 200
    assert '<label for="id_username">' in html and '<label for="id_password">' in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_a_human_signs_in_and_out(world):
    client = Client(enforce_csrf_checks=True)
    client.get("/console/login/")
    token = client.cookies["csrftoken"].value
    r = client.post("/console/login/", {"username": "carol", "password": "carol-pass-123",
                                        "csrfmiddlewaretoken": token})
    assert r.status_code == 302 and r["Location"] == "/console/"
    home = client.get("/console/")
    assert home.status_code == 200 and "Welcome, Carol" in home.content.decode()
    token = client.cookies["csrftoken"].value
    out = client.post("/console/logout/", {"csrfmiddlewaretoken": token})
    assert out.status_code == 302 and out["Location"] == "/console/login/"
    assert client.get("/console/").status_code == 302


def test_wrong_password_is_said_in_words(client, world):
    r = client.post("/console/login/", {"username": "alice", "password": "nope"})
    assert r.status_code == 200
    assert "Your username and password did not match" in r.content.decode()


def test_an_agent_cannot_sign_in_and_its_api_key_is_useless_here(client, world):
    assert world.agent.user is None  # agents have no Django user at all
    r = client.post("/console/login/", {"username": "scribe", "password": ""})
    assert "did not match" in r.content.decode()
    for path in ("/console/", "/console/queue/", "/console/me/", "/console/audit/"):
        r = client.get(path, HTTP_AUTHORIZATION=f"Bearer {world.agent_key}")
        assert r.status_code == 302 and r["Location"].startswith("/console/login/?next=")
    r = client.post("/console/me/knowledge/00000000-0000-0000-0000-000000000000/redact/",
                    HTTP_X_API_KEY=world.agent_key)
    assert r.status_code == 302 and r["Location"].startswith("/console/login/")


def test_anonymous_htmx_requests_are_sent_to_the_login_page(client, world):
    r = client.get("/console/queue/", **HX)
    assert r.status_code == 200 and r["HX-Redirect"].startswith("/console/login/?next=")


def test_a_sign_in_without_a_peer_gets_a_403_page_in_words(world):
    user = get_user_model().objects.create_user(username="stray", password="stray-pass-123")
    client = Client()
    client.force_login(user)
    r = client.get("/console/")
    assert r.status_code == 403
    assert "not linked to a person in any MemHouse Account" in r.content.decode()


def test_posts_without_a_csrf_token_are_refused(world):
    client = client_for(world.curator, enforce_csrf_checks=True)
    r = client.post("/console/queue/bulk/", {"action": "approve"})
    assert r.status_code == 403
    r = client_for(world.subject, enforce_csrf_checks=True).post(
        "/console/me/knowledge/00000000-0000-0000-0000-000000000000/redact/")
    assert r.status_code == 403


def test_pages_carry_landmarks_a_skip_link_and_a_live_region(carol):
    html = carol.get("/console/").content.decode()
    assert 'href="#main"' in html and '<main id="main"' in html
    assert '<nav class="site-nav" aria-label="Main">' in html
    assert 'id="flash"' in html and 'aria-live="polite"' in html
    assert "js/htmx.min.js" in html and '"X-CSRFToken"' in html


def test_unknown_console_urls_are_404_pages_in_words(carol):
    r = carol.get("/console/nothing-here/")
    assert r.status_code == 404 and "page not found" in r.content.decode().lower()
    r = carol.get("/console/queue")  # a missing slash still redirects
    assert r.status_code == 302 and r["Location"] == "/console/queue/"


def test_the_lifecycle_contract_is_served_as_html_with_state_anchors(bob):
    r = bob.get("/console/lifecycle/")
    html = r.content.decode()
    assert r.status_code == 200
    for state in ("proposed", "active", "provisional", "held", "contested", "redacted"):
        assert f'<tr id="{state}">' in html
    assert "<table" in html and "<code>f4_scope_hold</code>" in html
    assert "&lt;a id=" not in html  # the anchors became row ids, not escaped text
