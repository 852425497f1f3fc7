"""`manage.py db status|start|stop`: the embedded PostgreSQL under MEMHOUSE_DATA_DIR.

Loading the settings normally starts that server; for this command it does not
(memhouse.core.embedded_db.database_settings), so `status` and `stop` find it as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from memhouse.core import embedded_db


class Command(BaseCommand):
    help = "Show, start or stop the embedded PostgreSQL kept under MEMHOUSE_DATA_DIR."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("action", choices=["status", "start", "stop"])
        parser.add_argument("--force", action="store_true",
                            help="stop even while other processes (serve, workers) use it")

    def handle(self, *args: Any, **options: Any) -> None:
        data_dir: Path = settings.DATA_DIR or embedded_db.default_data_dir()
        if _uses_database_url():
            self.stdout.write("DATABASE_URL is set: this configuration does not use the "
                              "embedded server (shown below for its data directory).")
        action = options["action"]
        if action == "start":
            self._print(embedded_db.start(data_dir))
        elif action == "stop":
            try:
                before = embedded_db.stop(data_dir, force=options["force"])
            except RuntimeError as exc:
                raise CommandError(f"{exc}; stop them first, or use --force") from exc
            if before.running:
                self.stdout.write(f"stopped (pid {before.pid})")
            else:
                self.stdout.write("not running")
            self._print(embedded_db.status(data_dir))
        else:
            self._print(embedded_db.status(data_dir))

    def _print(self, st: embedded_db.ServerStatus) -> None:
        out = self.stdout.write
        out(f"data dir:  {st.data_dir}")
        out(f"server:    running (pid {st.pid})" if st.running else "server:    stopped")
        if st.running:
            out(f"socket:    {st.socket_dir}/.s.PGSQL.{st.port}")
            out(f"url:       {st.url}")
            users = ", ".join(str(p) for p in st.users) or "none"
            out(f"used by:   {users} (other processes holding a handle)")


def _uses_database_url() -> bool:
    from memhouse.core.env import env_str

    return bool(env_str("DATABASE_URL"))
