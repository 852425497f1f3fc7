from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from knowledge.lifecycle import operator_table_markdown


class Command(BaseCommand):
    help = "Regenerate docs/lifecycle.md from knowledge/lifecycle.py (use --check in CI)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--check", action="store_true",
                            help="exit 1 when the file is stale instead of writing it")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(settings.BASE_DIR) / "docs" / "lifecycle.md"
        text = operator_table_markdown()
        if options["check"]:
            if not path.exists() or path.read_text() != text:
                self.stderr.write("docs/lifecycle.md is stale; run manage.py lifecycle_doc")
                raise SystemExit(1)
            self.stdout.write("docs/lifecycle.md is current")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.stdout.write(f"wrote {path}")
