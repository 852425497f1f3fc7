"""Invitation tokens stay out of access logs (issue #34, Low).

The link used to carry the token in its path (/console/invitation/<token>/), so the
server's request log (and a proxy's, gunicorn's --access-logfile) held a live token for
anyone who reads logs. The token now follows '#', which browsers never send: the page
posts it. Tried on the real `manage.py serve`, whose log is what an operator keeps.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from tests.served import Served, cleanup, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_serve(tmp_path_factory.mktemp("invitation-log") / "data")
    try:
        yield server
    finally:
        cleanup(server)


def _csrf(client: httpx.Client, path: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', client.get(path).text)
    assert found is not None
    return found.group(1)


def test_an_invitation_token_is_in_no_request_line(served: Served) -> None:
    base = served.url
    signed_in = httpx.post(f"{base}/api/v1/auth/token", timeout=60, json={
        "username": "demo-curator", "password": served.curator_password()})
    assert signed_in.status_code == 201, signed_in.text
    admin = {"Authorization": f"Bearer {signed_in.json()['token']}"}
    r = httpx.post(f"{base}/api/v1/people",
                   json={"key": "erin", "display_name": "Erin", "scopes": ["/"]},
                   headers=admin, timeout=60)
    assert r.status_code == 201, r.text
    token, url = r.json()["invitation"]["token"], r.json()["invitation"]["url"]
    secret = token.split("_", 2)[2]  # mh_<prefix>_<secret>
    # The link's path and query hold no part of the token: only its fragment does.
    path, _, fragment = url[len(base):].partition("#")
    assert secret not in path and fragment == token

    # What the invitee's browser sends: the page, then the token in a POST body.
    browser = httpx.Client(base_url=base, timeout=60)
    r = browser.post("/console/invitation/code/", headers={"Referer": f"{base}{path}"},
                     data={"token": fragment, "csrfmiddlewaretoken": _csrf(browser, path)})
    assert r.status_code == 303
    page = browser.get("/console/invitation/")
    assert "Welcome, Erin" in page.text and secret not in page.text
    r = browser.post("/console/invitation/", headers={"Referer": f"{base}/console/invitation/"},
                     data={"password": "erin-chosen-pass-1", "password_again":
                           "erin-chosen-pass-1",
                           "csrfmiddlewaretoken": _csrf(browser, "/console/invitation/")})
    assert r.status_code == 303 and r.headers["location"] == "/console/"
    browser.close()

    log = served.text
    assert "/console/invitation/" in log  # the requests are logged...
    assert secret not in log  # ...and the token is not


def test_an_old_form_link_opens_and_its_token_is_redacted_in_the_log(served: Served) -> None:
    """Links sent before the token moved after '#' still open, token in the path: the
    request log keeps the path with the token replaced."""
    base = served.url
    signed_in = httpx.post(f"{base}/api/v1/auth/token", timeout=60, json={
        "username": "demo-curator", "password": served.curator_password()})
    admin = {"Authorization": f"Bearer {signed_in.json()['token']}"}
    r = httpx.post(f"{base}/api/v1/people",
                   json={"key": "fern", "display_name": "Fern", "scopes": ["/"]},
                   headers=admin, timeout=60)
    assert r.status_code == 201, r.text
    token = r.json()["invitation"]["token"]
    secret = token.split("_", 2)[2]

    browser = httpx.Client(base_url=base, timeout=60)
    r = browser.get(f"/console/invitation/{token}/")
    assert r.status_code == 303 and r.headers["location"] == "/console/invitation/"
    assert "Welcome, Fern" in browser.get("/console/invitation/").text
    browser.close()

    log = served.text
    assert "/console/invitation/[redacted]/" in log
    assert secret not in log
