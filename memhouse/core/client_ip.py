"""The client address sign-in throttling counts failures against.

Behind a reverse proxy every request arrives from the proxy's address, so throttling by
REMOTE_ADDR would let one person's failures lock everyone out. The proxies append the
address they saw to X-Forwarded-For; with N trusted proxies the Nth entry from the right
is the client as the outermost proxy saw it. Entries further left come from the client and
can be forged, so they are never read, and without a configured proxy count the header is
ignored entirely.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_ip(request: HttpRequest) -> str | None:
    remote = request.META.get("REMOTE_ADDR")
    count = int(getattr(settings, "MEMHOUSE_TRUSTED_PROXY_COUNT", 0))
    if count <= 0:
        return remote
    header = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [part.strip() for part in header.split(",") if part.strip()]
    if len(hops) < count:
        return remote  # the request did not come through all the proxies
    candidate = hops[-count]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return remote  # a proxy that writes something other than an address is misconfigured
