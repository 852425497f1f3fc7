"""Deployment hardening (issue #16, Low): a Content-Security-Policy on every page,
settings for secure cookies, HSTS and a TLS proxy, a short session, and no serving with
the built-in secret key unless explicitly local."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMHOUSE_")}
    # Settings only: an unreachable server is never connected to at import.
    base.update(DATABASE_URL="postgresql://nobody@127.0.0.1:1/none",
                DJANGO_SETTINGS_MODULE="memhouse.settings", **env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=base, text=True,
                          capture_output=True, timeout=120)


@pytest.mark.django_db
def test_pages_carry_a_strict_content_security_policy(client):
    r = client.get("/console/login/")
    assert r.status_code == 200
    policy = r["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["script-src"] == "'self'" and directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"
    assert "unsafe" not in policy
    html = r.content.decode()
    # Nothing the policy would block: every script has a src, no inline style.
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    assert "<style" not in html and " style=" not in html
    assert r["X-Frame-Options"] == "DENY" and r["X-Content-Type-Options"] == "nosniff"
    # The API docs page loads its init script from a URL instead of inline.
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", docs.content.decode())
    assert "script-src 'self'" in docs["Content-Security-Policy"]


def test_transport_security_comes_from_the_environment():
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, "
            "s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_SSL_REDIRECT, "
            "getattr(s, 'SECURE_PROXY_SSL_HEADER', None), s.SESSION_COOKIE_AGE)")
    default = _python(code, MEMHOUSE_SECRET_KEY="k" * 50)
    assert default.returncode == 0, default.stderr
    assert default.stdout.split() == ["False", "False", "0", "False", "False", "None",
                                      "28800"]
    hardened = _python(code, MEMHOUSE_SECRET_KEY="k" * 50, MEMHOUSE_SECURE_COOKIES="1",
                       MEMHOUSE_HSTS_SECONDS="31536000", MEMHOUSE_HSTS_INCLUDE_SUBDOMAINS="1",
                       MEMHOUSE_SSL_REDIRECT="1", MEMHOUSE_TRUST_X_FORWARDED_PROTO="1",
                       MEMHOUSE_SESSION_COOKIE_AGE="3600")
    assert hardened.returncode == 0, hardened.stderr
    assert hardened.stdout.strip() == (
        "True True 31536000 True True ('HTTP_X_FORWARDED_PROTO', 'https') 3600")


def test_serving_with_the_built_in_key_is_refused_unless_explicitly_local():
    serve = "import memhouse.wsgi; print('serving')"
    refused = _python(serve)
    assert refused.returncode != 0
    assert "MEMHOUSE_SECRET_KEY is not set" in refused.stderr
    assert "ImproperlyConfigured" in refused.stderr
    for env in ({"MEMHOUSE_SECRET_KEY": "a-long-random-deployment-key-0123456789"},
                {"MEMHOUSE_ALLOW_INSECURE_LOCAL": "1"}):
        ok = _python(serve, **env)
        assert ok.returncode == 0 and "serving" in ok.stdout, ok.stderr
    asgi = _python("import memhouse.asgi")
    assert asgi.returncode != 0 and "MEMHOUSE_SECRET_KEY is not set" in asgi.stderr
    # `manage.py serve` / `runserver` load memhouse.wsgi too: loopback is explicitly local.
    for argv, allowed in ((["serve"], True), (["runserver", "127.0.0.1:8000"], True),
                          (["serve", "8000"], True), (["runserver", "[::1]:8000"], True),
                          (["serve", "0.0.0.0:8000"], False),
                          (["runserver", "192.168.1.5:80"], False)):
        dev = _python(f"import sys; sys.argv = ['manage.py', *{argv!r}]; " + serve)
        assert (dev.returncode == 0) is allowed, (argv, dev.stderr[-500:])


def test_the_bind_address_decides_for_manage_py_serve(settings):
    from memhouse.checks import require_safe_secret_key, secret_key_problem

    settings.MEMHOUSE_ALLOW_INSECURE_LOCAL = False
    settings.DEBUG = False
    settings.SECRET_KEY = "memhouse-insecure-local-key-change-me"
    for local in ("127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"):
        assert secret_key_problem(bind_host=local) is None, local
    for public in ("0.0.0.0", "::", "192.168.1.5", "memhouse.example.com", None):
        assert secret_key_problem(bind_host=public), public
    with pytest.raises(Exception, match="MEMHOUSE_SECRET_KEY is not set"):
        require_safe_secret_key(bind_host="0.0.0.0")
    with pytest.raises(SystemCheckError, match=r"memhouse\.E001"):
        call_command("check", "--deploy", "--fail-level", "ERROR")
    settings.SECRET_KEY = "a-long-random-deployment-key-0123456789"
    assert secret_key_problem(bind_host="0.0.0.0") is None
