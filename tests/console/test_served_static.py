"""The console's stylesheet and scripts under the real `manage.py serve` (DEBUG off, the
production storage: hashed names, gzip, WhiteNoise), which live_server cannot show: it
serves static files itself. Issue 17, item 1."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.console.browser import CHROMIUM, CHROMIUM_ARGS
from tests.served import ROOT, Served, cleanup, free_port, manage_env, start_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = start_serve(tmp_path_factory.mktemp("served") / "data")
    try:
        yield server
    finally:
        cleanup(server)


def _assets(served: Served, base: str | None = None) -> dict[str, str]:
    page = httpx.get(f"{base or served.url}/console/login/", timeout=30)
    assert page.status_code == 200, page.text
    html = page.text
    css = re.findall(r'<link rel="stylesheet" href="([^"]+)"', html)
    js = re.findall(r'<script src="([^"]+)"', html)
    return {"css": css[0], "htmx": next(s for s in js if "htmx" in s),
            "console": next(s for s in js if "console" in s)}


def test_the_login_page_links_hashed_assets_that_are_served(served: Served) -> None:
    assets = _assets(served)
    # Content-hashed names: a changed file gets a new URL, so each can be cached for good.
    assert re.fullmatch(r"/static/css/memhouse\.[0-9a-f]{12}\.css", assets["css"]), assets
    assert re.fullmatch(r"/static/js/htmx\.min\.[0-9a-f]{12}\.js", assets["htmx"]), assets
    sources = {"css": "css/memhouse.css", "htmx": "js/htmx.min.js",
               "console": "js/console.js"}
    for name, url in assets.items():
        r = httpx.get(f"{served.url}{url}", timeout=30, headers={"Accept-Encoding": "identity"})
        assert r.status_code == 200, (url, r.status_code)
        kind = r.headers["Content-Type"]
        assert kind.startswith("text/css" if name == "css" else "text/javascript"), (url, kind)
        assert r.content == (ROOT / "static" / sources[name]).read_bytes()
        assert "immutable" in r.headers["Cache-Control"]
        gz = httpx.get(f"{served.url}{url}", timeout=30, headers={"Accept-Encoding": "gzip"})
        assert gz.headers.get("Content-Encoding") == "gzip" and gz.content == r.content
    # The unhashed name is there too (collectstatic keeps it), but only briefly cached.
    plain = httpx.get(f"{served.url}/static/css/memhouse.css", timeout=30)
    assert plain.status_code == 200 and "immutable" not in plain.headers["Cache-Control"]
    assert httpx.get(f"{served.url}/static/css/missing.css", timeout=30).status_code == 404


def test_serve_prints_one_clean_banner_and_records_its_address(served: Served) -> None:
    """Issue 35: no Celery/kombu lines about the in-process memory broker, the built-in
    key warning at most once, and the served address kept for `people --invite` links."""
    text = served.text
    assert "No hostname was supplied" not in text
    assert "Connected to memory://" not in text
    assert text.count("insecure secret key") <= 1
    assert text.count("MemHouse is ready.") == 1
    assert (served.data_dir / "served-url").read_text().strip() == served.url


@pytest.mark.browser
def test_a_curator_signs_in_and_the_queue_page_has_htmx_and_its_styles(
        served: Served, sync_playwright: Any, tmp_path: Path) -> None:
    password = served.curator_password()
    failed: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.on("response", lambda r: failed.append(f"{r.status} {r.url}")
                    if r.status >= 400 else None)
            page.on("console", lambda m: failed.append(f"console: {m.text}")
                    if m.type == "error" else None)
            page.goto(f"{served.url}/console/queue/")
            page.wait_for_url("**/console/login/?next=/console/queue/")
            page.get_by_label("Username").fill("demo-curator")
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"{served.url}/console/queue/")
            assert page.evaluate("typeof window.htmx") == "object"
            assert page.evaluate("typeof window.htmx.ajax") == "function"
            # The stylesheet loaded and applies: its rules are there and the skip link
            # is moved off-screen by it (an unstyled page shows it at the top).
            rules = page.evaluate("""() => [...document.styleSheets]
                .filter(s => s.href && s.href.includes('/static/css/memhouse.'))
                .map(s => s.cssRules.length)""")
            assert rules and rules[0] > 10, rules
            assert page.evaluate(
                "getComputedStyle(document.querySelector('.skip-link')).position"
            ) == "absolute"
            page.screenshot(path=str(tmp_path / "served-queue.png"), full_page=True)
        finally:
            browser.close()
    assert not failed, failed


def _dockerfile() -> tuple[str, list[str]]:
    """The image's collectstatic step (a shell line) and its CMD (gunicorn)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    collect = re.search(r"^RUN (.*manage\.py collectstatic[^&]*)", text, re.M)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
    assert collect and cmd, "Dockerfile: no collectstatic step or no CMD"
    return collect.group(1).strip(), json.loads(cmd.group(1))


def test_gunicorn_as_the_image_runs_it_serves_the_collected_assets(
        served: Served, tmp_path: Path) -> None:
    collect, cmd = _dockerfile()
    static_root = tmp_path / "static"
    env = manage_env(served.data_dir, MEMHOUSE_STATIC_ROOT=str(static_root))
    words = shlex.split(collect)
    assignments = dict(w.split("=", 1) for w in words if re.match(r"^[A-Z_]+=", w))
    done = subprocess.run([sys.executable, *words[len(assignments) + 1:]], cwd=ROOT,
                          env={**env, **assignments}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert (static_root / "staticfiles.json").exists()

    assert cmd[0] == "gunicorn"
    cmd[cmd.index("--bind") + 1] = f"127.0.0.1:{(port := free_port())}"
    cmd[cmd.index("--workers") + 1] = "1"
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    env["MEMHOUSE_SECRET_KEY"] = "gunicorn-static-test-key"
    with (tmp_path / "gunicorn.log").open("w") as log:
        proc = subprocess.Popen([gunicorn, *cmd[1:]], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            assert proc.poll() is None, (tmp_path / "gunicorn.log").read_text()
            try:
                httpx.get(f"{base}/healthz", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.3)
        for url in _assets(served, base).values():
            r = httpx.get(f"{base}{url}", timeout=30)
            assert r.status_code == 200 and "immutable" in r.headers["Cache-Control"], url
    finally:
        proc.terminate()
        proc.wait(30)
