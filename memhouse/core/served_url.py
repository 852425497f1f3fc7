"""The console's base URL for links made outside a request (`manage.py people ...
--invite`): MEMHOUSE_PUBLIC_URL when set; else the address the last `manage.py serve` on
this data directory served, which serve records in a file there; else the default
address serve listens on."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

DEFAULT = "http://127.0.0.1:8000"
FILE_NAME = "served-url"
# A wildcard bind is no address to send anyone to; locally it is reached on loopback.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "[::]": "[::1]"}


def _file() -> Path:
    from memhouse.core.embedded_db import default_data_dir

    return (settings.DATA_DIR or default_data_dir()) / FILE_NAME


def base_for(addrport: str) -> str:
    """'127.0.0.1:8000' -> 'http://127.0.0.1:8000'; a wildcard host reads as loopback."""
    host, _, port = addrport.rpartition(":") if ":" in addrport else ("127.0.0.1", "", addrport)
    if not port.isdigit():  # a bare host (or IPv6 without a port)
        host, port = addrport, "8000"
    return f"http://{_WILDCARDS.get(host, host or '127.0.0.1')}:{port}"


def record(base: str) -> None:
    """Called by `serve` before it serves; a read-only data directory only loses the hint."""
    path = _file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(base.rstrip("/") + "\n")
    except OSError:
        pass


def public_base_url() -> str:
    if settings.MEMHOUSE_PUBLIC_URL:
        return str(settings.MEMHOUSE_PUBLIC_URL)
    try:
        served = _file().read_text().strip()
    except OSError:
        served = ""
    return served.rstrip("/") or DEFAULT
