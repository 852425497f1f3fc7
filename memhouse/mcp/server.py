"""MemHouse as an MCP server on stdio, for hosts that start a local process.

    MEMHOUSE_URL=http://127.0.0.1:8000 MEMHOUSE_API_KEY=mh_... python -m memhouse.mcp.server

The tools are memhouse.mcp.tools (shared with the Streamable HTTP endpoint at /mcp/);
here each one calls a MemHouseClient for MEMHOUSE_URL, authenticated with
MEMHOUSE_API_KEY: the Account and the reader's rights come from that key alone. An error
becomes an MCP tool error result in the API's shape (`{"error": {"code", "message",
"details", "status"}}`); the server itself never stops on one.
"""

import argparse
import os
import sys

from memhouse.client import MemHouseClient, MemHouseError
from memhouse.mcp.tools import (  # noqa: F401 - re-exported for existing imports
    EFFORTS,
    PROFILES,
    SERVER_NAME,
    TOOL_NAMES,
    _json_text,
    build_server,
    error_result,
    lifecycle_text,
    ok_result,
    run_tool,
)

DEFAULT_TIMEOUT = 60.0  # ask with a model can take a while


def client_from_env(environ: dict[str, str] | None = None) -> MemHouseClient:
    env = os.environ if environ is None else environ
    url = env.get("MEMHOUSE_URL", "").strip()
    key = env.get("MEMHOUSE_API_KEY", "").strip()
    if not url or not key:
        raise SystemExit("memhouse-mcp: set MEMHOUSE_URL (e.g. http://127.0.0.1:8000) and "
                         "MEMHOUSE_API_KEY (an mh_... API key)")
    timeout = float(env.get("MEMHOUSE_TIMEOUT") or DEFAULT_TIMEOUT)
    return MemHouseClient(url, key, timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="memhouse-mcp", description="MemHouse MCP server (stdio). Configure with "
        "MEMHOUSE_URL, MEMHOUSE_API_KEY and optionally MEMHOUSE_TIMEOUT (seconds).")
    parser.add_argument("--check", action="store_true",
                        help="call /api/v1/me with the key, print the result and exit")
    args = parser.parse_args(argv)
    with client_from_env() as client:
        if args.check:
            try:
                print(_json_text(client.me()))
            except MemHouseError as exc:
                print(f"memhouse-mcp: {exc}", file=sys.stderr)
                return 1
            return 0
        build_server(client).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
