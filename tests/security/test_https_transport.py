"""Issue #34 (low): served over HTTPS on an address other than loopback, cookies are
Secure and responses carry HSTS even when the operator set neither
MEMHOUSE_SECURE_COOKIES nor MEMHOUSE_HSTS_SECONDS; plain HTTP and loopback keep working
as before, and MEMHOUSE_AUTO_TRANSPORT_SECURITY=false switches it off (real HTTP through
a TLS proxy's X-Forwarded-Proto)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def _login_page(live_server: Any, host: str, proto: str | None) -> httpx.Response:
    headers = {"Host": host}
    if proto:
        headers["X-Forwarded-Proto"] = proto
    r = httpx.get(f"{live_server.url}/console/login/", headers=headers, timeout=60)
    assert r.status_code == 200, r.text[:300]
    return r


def _csrf_cookie(r: httpx.Response) -> str:
    cookie = next(v for k, v in r.headers.multi_items()
                  if k.lower() == "set-cookie" and v.startswith("csrftoken="))
    return cookie.lower()


@pytest.fixture
def behind_tls_proxy(settings: Any) -> Any:
    settings.ALLOWED_HOSTS = ["memhouse.example.com", "localhost", "127.0.0.1"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = False
    settings.SECURE_HSTS_SECONDS = 0
    return settings


def test_https_on_a_real_host_gets_secure_cookies_and_hsts(live_server, behind_tls_proxy):
    r = _login_page(live_server, "memhouse.example.com", "https")
    assert "; secure" in _csrf_cookie(r)
    assert r.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    # Plain HTTP on the same host, and HTTPS on loopback, are left as they were.
    for host, proto in (("memhouse.example.com", None), ("localhost", "https"),
                        ("127.0.0.1", "https")):
        r = _login_page(live_server, host, proto)
        assert "; secure" not in _csrf_cookie(r), (host, proto)
        assert "Strict-Transport-Security" not in r.headers, (host, proto)


def test_the_switch_turns_it_off(live_server, behind_tls_proxy):
    behind_tls_proxy.MEMHOUSE_AUTO_TRANSPORT_SECURITY = False
    r = _login_page(live_server, "memhouse.example.com", "https")
    assert "; secure" not in _csrf_cookie(r)
    assert "Strict-Transport-Security" not in r.headers
