from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = ("Regenerate docs/api.md from the OpenAPI schema and its examples "
            "(use --check in CI).")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--check", action="store_true",
                            help="exit 1 when the file is stale instead of writing it")

    def handle(self, *args: Any, **options: Any) -> None:
        # The wiring layer renders it: the schema spans every app's views.
        from memhouse.api_doc import render

        path = Path(settings.BASE_DIR) / "docs" / "api.md"
        text = render()
        if options["check"]:
            if not path.exists() or path.read_text() != text:
                self.stderr.write("docs/api.md is stale; run manage.py api_doc")
                raise SystemExit(1)
            self.stdout.write("docs/api.md is current")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self.stdout.write(f"wrote {path}")
