"""Transport security that follows how the server is reached (docs/deploy.md).

A deployment served over HTTPS on a real address should send its cookies only over HTTPS
and tell browsers to stay on HTTPS, even when its operator forgot MEMHOUSE_SECURE_COOKIES
and MEMHOUSE_HSTS_SECONDS. With MEMHOUSE_AUTO_TRANSPORT_SECURITY (on by default) every
response to a request that arrived over HTTPS (directly, or through a proxy whose
X-Forwarded-Proto is trusted) for a host that is not loopback gets Secure cookies and a
Strict-Transport-Security header. Plain HTTP and loopback (local development, the
embedded default) are left alone, so cookies keep working there.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http.request import split_domain_port

from memhouse.checks import is_loopback

# HSTS max-age sent when the operator set none (one year, the common production value).
AUTO_HSTS_SECONDS = 31_536_000


def wants_secure_transport(request: Any) -> bool:
    """Whether this request came over HTTPS to an address other than loopback."""
    if not getattr(settings, "MEMHOUSE_AUTO_TRANSPORT_SECURITY", False):
        return False
    if not request.is_secure():
        return False
    host, _ = split_domain_port(request.get_host())
    return bool(host) and not is_loopback(host)


class AutoTransportSecurityMiddleware:
    """Secure cookies and HSTS on HTTPS requests to a non-loopback host. Listed right after
    SecurityMiddleware, so it sees the cookies the session and CSRF middleware set."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        if not wants_secure_transport(request):
            return response
        for morsel in response.cookies.values():
            morsel["secure"] = True
        if "Strict-Transport-Security" not in response:
            seconds = int(settings.SECURE_HSTS_SECONDS) or AUTO_HSTS_SECONDS
            value = f"max-age={seconds}"
            if settings.SECURE_HSTS_INCLUDE_SUBDOMAINS:
                value += "; includeSubDomains"
            if settings.SECURE_HSTS_PRELOAD:
                value += "; preload"
            response["Strict-Transport-Security"] = value
        return response
