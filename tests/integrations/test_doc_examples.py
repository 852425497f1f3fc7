"""Every fenced code block of README.md and docs/integrations.md, run as a reader would
copy it, against a fresh `manage.py serve` per page (tests/served.py): issue 36, item 6.

Python blocks run as scripts and sh blocks with bash, with the environment the pages
tell the reader to set (MEMHOUSE_URL and MEMHOUSE_API_KEY, the key `serve` printed).
JSON blocks are checked: an MCP host configuration is started as the host would start it
(with `--check`), an error body is compared with the answer the served instance gives.
A block that cannot run here says so in the page (`<!-- example: skip REASON -->`, see
tests/doc_examples.py); any other block fails the listing test, so a new example cannot
go untested. Examples of a page run in page order: one that needs an earlier one (its
peers, its messages) runs it first when selected alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.doc_examples import PAGES, Block, all_blocks, scripts, unaccounted
from tests.served import ROOT, Served, cleanup, manage_env, start_serve

BLOCKS = all_blocks()
TIMEOUT = 180  # seconds per example (an extraction on 2 shared cores is well under that)
# The optional extras' top-level modules (pyproject: langgraph, agents; both in dev).
EXTRAS = {"langgraph": "langgraph", "langchain_core": "langgraph", "agents": "agents"}


@dataclass
class Example:
    blocks: list[Block]

    @property
    def first(self) -> Block:
        return self.blocks[0]

    @property
    def id(self) -> str:
        return self.first.id


def _examples() -> list[Example]:
    joined = {s[0].id: s for s in scripts(BLOCKS)}
    out = []
    for b in BLOCKS:
        if b.id in joined:
            out.append(Example(joined[b.id]))
        elif not (b.lang == "python" and b.continues and b.skip is None):
            out.append(Example([b]))
    return out


EXAMPLES = _examples()


def test_every_block_is_run_or_skipped_with_a_reason() -> None:
    listing = "\n".join(f"{b.id}: " + (f"skipped: {b.skip}" if b.skip is not None else
                                       "continues the python block before it" if b.continues
                                       else f"runs, known gap: {b.xfail}" if b.xfail
                                       else "runs") for b in BLOCKS)
    print(listing)
    assert BLOCKS and {b.page for b in BLOCKS} == {"README.md", "docs/integrations.md"}
    problems = unaccounted(BLOCKS)
    assert not problems, "\n".join(problems)


@dataclass
class Instance:
    served: Served
    key: str
    workdir: Path
    done: dict[str, str | None] = field(default_factory=dict)  # example id -> failure

    @property
    def env(self) -> dict[str, str]:
        env = manage_env(self.served.data_dir, MEMHOUSE_URL=self.served.url,
                         MEMHOUSE_API_KEY=self.key)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        return env


def _serve(base: Path) -> Instance:
    served = start_serve(base / "data")
    key = re.search(r"API key:\s+(mh_\S+)", served.text)
    if not key:
        cleanup(served)
        raise AssertionError(f"serve printed no API key:\n{served.text}")
    return Instance(served=served, key=key.group(1), workdir=base)


@pytest.fixture(scope="module")
def instance(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Callable[[str], Instance]]:
    """A fresh served instance per page (a fresh install each). The pages whose examples
    were selected start together, when the first example runs."""
    chosen = [getattr(item, "callspec", None) for item in request.session.items]
    selected = {c.params["ex"].first.page for c in chosen
                if c is not None and isinstance(c.params.get("ex"), Example)
                and c.params["ex"].first.skip is None}
    pool = ThreadPoolExecutor(max_workers=len(PAGES))
    starting: dict[str, Future[Instance]] = {}

    def get(page: str) -> Instance:
        if not starting:
            for name in sorted(selected | {page}):
                base = tmp_path_factory.mktemp(re.sub(r"\W", "-", name))
                starting[name] = pool.submit(_serve, base)
        return starting[page].result()

    def stop(future: Future[Instance]) -> None:
        if future.exception() is None:
            served = future.result().served
            try:  # as Ctrl-C: serve stops the PostgreSQL it started
                served.stop(signal.SIGINT)
            finally:
                cleanup(served)

    try:
        yield get
    finally:
        list(pool.map(stop, starting.values()))  # both at once
        pool.shutdown(wait=True)


def _output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def _missing_extras(ex: Example) -> list[str]:
    """The optional extras an example imports that are not installed here."""
    code = "\n".join(b.code for b in ex.blocks)
    imported = set(re.findall(r"^\s*(?:from|import)\s+(\w+)", code, re.MULTILINE))
    return sorted({EXTRAS[m] for m in imported & set(EXTRAS) if not importlib.util.find_spec(m)})


def _run_python(inst: Instance, ex: Example) -> str:
    script = inst.workdir / (re.sub(r"\W", "_", ex.id) + ".py")
    script.write_text("\n".join(b.code for b in ex.blocks))
    proc = subprocess.run([sys.executable, str(script)], cwd=inst.workdir, env=inst.env,
                          text=True, capture_output=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, _output(proc)
    return proc.stdout + proc.stderr


def _run_sh(inst: Instance, ex: Example) -> str:
    # As pasted into a terminal at the checkout's root, except that a failing command
    # stops the block. No controlling terminal: a password prompt reads standard input.
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", ex.first.code], cwd=ROOT,
                          env=inst.env, text=True, capture_output=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL, start_new_session=True)
    assert proc.returncode == 0, _output(proc)
    assert '{"error"' not in proc.stdout.replace(" ", ""), _output(proc)
    return proc.stdout


def _mcp_config(inst: Instance, config: dict) -> str:
    """Start each server the host would start, with `--check` (GET /me, then exit)."""
    outputs = []
    for name, server in config["mcpServers"].items():
        command = server["command"]
        assert command.startswith("/path/to/memhouse/"), (name, command)
        local = ROOT / command.removeprefix("/path/to/memhouse/")
        assert local.exists(), f"{name}: {command} names {local}, which does not exist"
        env = {**inst.env, **server.get("env", {})}
        assert set(server.get("env", {})) == {"MEMHOUSE_URL", "MEMHOUSE_API_KEY"}, server
        # The placeholders the reader replaces: this instance's address and key.
        env.update(MEMHOUSE_URL=inst.served.url, MEMHOUSE_API_KEY=inst.key)
        proc = subprocess.run([str(local), *server.get("args", []), "--check"], cwd=ROOT,
                              env=env, text=True, capture_output=True, timeout=TIMEOUT,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode == 0, _output(proc)
        assert json.loads(proc.stdout)["peer_key"] == "demo-agent", proc.stdout
        outputs.append(proc.stdout)
    return "\n".join(outputs)


def _error_body(inst: Instance, body: dict) -> str:
    """An error the page shows: the served instance answers the same for the same
    mistake. With `status` it is an MCP tool's error result (asked of /mcp/), without it
    the REST API's body; every field the page shows must match."""
    error = body["error"]
    headers = {"Authorization": f"Bearer {inst.key}"}
    if error["code"] == "unknown_peer_key":
        peer = re.search(r"'(\w+)'", error["message"])
        assert peer, error
        tool, arguments = "search", {"query": "x", "peer_key": peer.group(1)}
    elif error["code"] == "invalid_input" and "invalid arguments for" in error["message"]:
        named = re.search(r"invalid arguments for (\w+)", error["message"])
        assert named, error
        tool, arguments = named.group(1), {}
    else:
        raise AssertionError(f"no check for the error body {error}: add one here")
    if "status" in error:
        r = httpx.post(f"{inst.served.url}/mcp/", headers={
            **headers, "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18"}, timeout=60, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}})
        assert r.status_code == 200, r.text
        result = r.json()["result"]
        assert result["isError"], result
        real = result["structuredContent"]["error"]
    else:
        r = httpx.post(f"{inst.served.url}/api/v1/{tool}", headers=headers, timeout=60,
                       json=arguments)
        assert r.status_code == 400, r.text
        real = r.json()["error"]
    for name, value in error.items():
        assert real.get(name) == value, (name, real, error)
    return json.dumps(real)


def _check_json(inst: Instance, ex: Example) -> str:
    body = json.loads(ex.first.code)
    if "mcpServers" in body:
        return _mcp_config(inst, body)
    if set(body) == {"error"}:
        return _error_body(inst, body)
    raise AssertionError(f"{ex.id}: a JSON block that is neither an MCP configuration nor "
                         "an error body; check it here or skip it with a reason")


def _run(inst: Instance, ex: Example) -> None:
    lang = ex.first.lang
    if lang == "python":
        out = _run_python(inst, ex)
    elif lang in ("sh", "bash"):
        out = _run_sh(inst, ex)
    elif lang == "json":
        out = _check_json(inst, ex)
    else:  # pragma: no cover - the listing test fails first
        raise AssertionError(f"{ex.id}: nothing runs a {lang!r} block")
    for text in (t for b in ex.blocks for t in b.expect):
        assert text in out, f"{ex.id}: expected {text!r} in the output:\n{out}"


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example_runs(ex: Example, instance: Callable[[str], Instance]) -> None:
    if ex.first.skip is not None:
        pytest.skip(ex.first.skip)
    if ex.first.problems:
        pytest.fail("; ".join(ex.first.problems))
    missing = _missing_extras(ex) if ex.first.lang == "python" else []
    if missing:
        # CI installs the dev extra, which holds both adapters' extras: there it fails.
        why = f"needs memhouse[{','.join(missing)}], which is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; CI must run every example: install the dev extra")
        pytest.skip(why)
    inst = instance(ex.first.page)
    # A reader follows the page from its top: the earlier examples run first, once.
    for earlier in EXAMPLES[:EXAMPLES.index(ex)]:
        if earlier.first.page == ex.first.page and earlier.first.skip is None \
                and earlier.id not in inst.done:
            try:
                _run(inst, earlier)
                inst.done[earlier.id] = None
            except AssertionError as exc:
                inst.done[earlier.id] = str(exc)
    failed = [i for i, why in inst.done.items() if why is not None]
    try:
        _run(inst, ex)
    except AssertionError as exc:
        inst.done[ex.id] = str(exc)
        known = next((b.xfail for b in ex.blocks if b.xfail), None)
        if known:
            pytest.xfail(f"{known}: {exc}")
        if failed:
            raise AssertionError(f"{exc}\n(earlier examples of the page failed: "
                                 f"{', '.join(failed)})") from exc
        raise
    inst.done[ex.id] = None


PAGE = """Intro.

<!-- example: skip starts a server -->
```sh
serve
```

```python
x = 1
```

The next block continues this one:

<!-- example: continues -->
<!-- example: expect "2" -->
```python
print(x + 1)
```

```text
plain output
```

<!-- example: skip -->
```python
pass
```

<!-- example: later -->
```json
{}
```

* In a list:

  ```python
  print("indented")
  ```
"""


def test_the_directives_and_what_the_listing_refuses() -> None:
    """A block without a way to run and without a stated reason is refused, as is a
    directive the test does not know or a skip without its reason."""
    from tests.doc_examples import parse

    blocks = parse("page.md", PAGE)
    assert [(b.line, b.lang, b.skip, b.continues, b.expect) for b in blocks] == [
        (4, "sh", "starts a server", False, []), (8, "python", None, False, []),
        (16, "python", None, True, ["2"]), (20, "text", None, False, []),
        (25, "python", "", False, []), (30, "json", None, False, []),
        (36, "python", None, False, [])]
    assert blocks[-1].code == 'print("indented")\n'
    assert [[b.line for b in s] for s in scripts(blocks)] == [[8, 16], [36]]
    problems = unaccounted(blocks)
    assert problems == [
        "page.md:20:text: a `text` block is not run; mark it `<!-- example: skip REASON -->`",
        "page.md:25:python: line 24: `skip` needs a reason",
        "page.md:30:json: line 29: unknown directive 'later'"], problems
