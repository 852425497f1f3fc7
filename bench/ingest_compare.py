"""Two kept ingests of the same conversations, row by row: the same decisions?

    .venv/bin/python bench/ingest.py --dataset ... --out /tmp/a.json --keep-db --db-name a
    (the other code)
    .venv/bin/python bench/ingest.py --dataset ... --out /tmp/b.json --keep-db --db-name b
    .venv/bin/python bench/ingest_compare.py --db-names a,b

Row ids differ between two ingests, so rows are compared by what they say: statements
(scope, subject, text, state, reason, verification, kind, level, sources' messages,
what they supersede), lifecycle events (statement, from, to, reason, verification,
evidence with ids replaced by the statements they name), audit entries (event type,
actor, target type and payload, ids left out), relations, validations, and the vectors
of statements and messages, bit for bit, keyed by their text. Prints one JSON object:
the row counts and, per table, how many rows only one side has (0 everywhere when the
two ingests decided the same).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import fix_sys_path

fix_sys_path()

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

# (table, query): every row as a tuple of what it says; {uuid} placeholders are
# rewritten to the statement (or message) they name.
QUERIES = {
    "knowledge": """
        SELECT s.path, p.key, k.statement, k.state, k.state_reason, k.verification, k.kind,
               k.level, k.named_entity, k.source_count, sup.statement,
               (SELECT string_agg(m.text, ' | ' ORDER BY m.text) FROM memhouse_knowledge_source ks
                  JOIN memhouse_message m ON m.id = ks.message_id WHERE ks.knowledge_id = k.id)
          FROM memhouse_knowledge k JOIN memhouse_scope s ON s.id = k.scope_id
          LEFT JOIN memhouse_peer p ON p.id = k.subject_peer_id
          LEFT JOIN memhouse_knowledge sup ON sup.id = k.supersedes_id""",
    "lifecycle_events": """
        SELECT k.statement, e.from_state, e.to_state, e.reason, e.verification, e.actor,
               e.evidence::text
          FROM memhouse_lifecycle_event e JOIN memhouse_knowledge k ON k.id = e.knowledge_id""",
    "audit_entries": """
        SELECT a.event_type, a.actor, a.target_type, a.payload::text
          FROM memhouse_audit_entry a""",
    "relations": """
        SELECT r.type, a.statement, b.statement, r.confidence
          FROM memhouse_relation r JOIN memhouse_knowledge a ON a.id = r.source_id
          JOIN memhouse_knowledge b ON b.id = r.target_id""",
    "validations": """
        SELECT v.kind, v.status, v.reason, k.statement
          FROM memhouse_validation v JOIN memhouse_knowledge k ON k.id = v.knowledge_id""",
    "knowledge_vectors": """
        SELECT k.statement, k.state, v.embedding::text
          FROM memhouse_knowledge_vector v JOIN memhouse_knowledge k ON k.id = v.knowledge_id""",
    "message_vectors": """
        SELECT m.text, v.embedding::text
          FROM memhouse_message_vector v JOIN memhouse_message m ON m.id = v.message_id""",
}


def _rows(db: str) -> dict[str, Counter[tuple[Any, ...]]]:
    from django.db import connections

    from knowledge.accounts import list_account_ids
    from memhouse.core.tenancy import account_context

    connection = connections["default"]
    connection.close()
    connection.settings_dict["NAME"] = f"bench_{db}"
    out: dict[str, Counter[tuple[Any, ...]]] = {name: Counter() for name in QUERIES}
    for account_id in list_account_ids():
        with account_context(account_id), connection.cursor() as cur:
            names: dict[str, str] = {}
            cur.execute("SELECT id::text, statement FROM memhouse_knowledge")
            names.update(cur.fetchall())
            cur.execute("SELECT id::text, text FROM memhouse_message")
            names.update(cur.fetchall())

            def named(match: re.Match[str], names: dict[str, str] = names) -> str:
                return names.get(match.group(0), "<id>")

            for name, sql in QUERIES.items():
                cur.execute(sql)
                for row in cur.fetchall():
                    out[name][tuple(_UUID.sub(named, v) if isinstance(v, str) else v
                                    for v in row)] += 1
    connection.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db-names", required=True, help="two --db-name values of kept ingests")
    args = ap.parse_args(argv)
    first, second = args.db_names.split(",")
    os.environ["MEMHOUSE_BENCH_DB"] = f"bench_{first}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    import django

    django.setup()
    a, b = _rows(first), _rows(second)
    report: dict[str, Any] = {}
    for name in QUERIES:
        only_a, only_b = a[name] - b[name], b[name] - a[name]
        report[name] = {"rows": [sum(a[name].values()), sum(b[name].values())],
                        f"only_{first}": sum(only_a.values()),
                        f"only_{second}": sum(only_b.values())}
        if only_a or only_b:
            report[name]["examples"] = [list(map(str, r))[:4] for r in
                                        [*list(only_a)[:3], *list(only_b)[:3]]]
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
