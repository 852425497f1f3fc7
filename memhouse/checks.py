"""Refuse to serve with the built-in secret key (issue #16).

The settings fall back to a fixed, published key so that `manage.py` works out of the
box; sessions, CSRF tokens and the archive signing key derive from it, so a server others
can reach must never run with it. :func:`require_safe_secret_key` is called by every way
of serving (memhouse.wsgi and memhouse.asgi, which runserver and serve load too, with
the address they bind; `manage.py serve` should call it first with its address), and
`manage.py check --deploy` reports the same problem as memhouse.E001.
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)

INSECURE_DEFAULT_KEY = "memhouse-insecure-local-key-change-me"  # = settings' built-in


def uses_default_key() -> bool:
    return bool(settings.SECRET_KEY == INSECURE_DEFAULT_KEY)


def is_loopback(host: str) -> bool:
    host = host.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def secret_key_problem(*, bind_host: str | None = None) -> str | None:
    """Why serving now would be unsafe, or None. Allowed with the built-in key: DEBUG,
    MEMHOUSE_ALLOW_INSECURE_LOCAL=1, or a server bound to a loopback address only."""
    if not uses_default_key() or settings.DEBUG:
        return None
    if getattr(settings, "MEMHOUSE_ALLOW_INSECURE_LOCAL", False):
        return None
    if bind_host is not None and is_loopback(bind_host):
        return None
    return ("MEMHOUSE_SECRET_KEY is not set, and the built-in key is public: sessions, CSRF "
            "tokens and archive signatures made with it can be forged. Set "
            "MEMHOUSE_SECRET_KEY (or MEMHOUSE_SECRET_KEY_FILE) to a long random value, e.g. "
            "`openssl rand -hex 32`; for a server only this machine reaches, bind to "
            "127.0.0.1 or set MEMHOUSE_ALLOW_INSECURE_LOCAL=1.")


def dev_server_bind_host(argv: list[str] | None = None) -> str | None:
    """The host `manage.py runserver|serve [ADDR:]PORT` binds (Django's dev server offers
    no hook to ask it), or None in any other process (gunicorn, uvicorn: unknown)."""
    argv = sys.argv if argv is None else argv
    if len(argv) < 2 or Path(argv[0]).name != "manage.py" or argv[1] not in (
            "runserver", "serve"):
        return None
    positional = [a for a in argv[2:] if not a.startswith("-")]
    if not positional or positional[0].isdigit():
        return "127.0.0.1"  # runserver's and serve's default address
    addr = positional[0]
    if addr.startswith("["):
        return addr[1:addr.find("]")]
    return addr.rpartition(":")[0] or addr


_warned_default_key = False


def require_safe_secret_key(*, bind_host: str | None = None) -> None:
    """Raise ImproperlyConfigured instead of serving with the built-in key (see
    :func:`secret_key_problem`); when it is allowed, say so in the log."""
    global _warned_default_key
    problem = secret_key_problem(bind_host=bind_host)
    if problem:
        raise ImproperlyConfigured(problem)
    # Once per process: `serve` checks before its setup, and the WSGI module it then
    # loads checks again.
    if uses_default_key() and not _warned_default_key:
        _warned_default_key = True
        log.warning("serving with the built-in insecure secret key: local use only")


@register(Tags.security, deploy=True)
def check_secret_key(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    problem = secret_key_problem()
    return [Error(problem, id="memhouse.E001")] if problem else []
