"""Architecture floors, checked on the import graph itself (grimp, as import-linter
builds it): no import cycle between modules, and the layer contract holds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

PACKAGES = ("memhouse", "knowledge", "retrieval", "governance", "console")
ROOT = Path(__file__).resolve().parents[2]


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    modules = sorted(m for m in graph.modules if m.split(".")[0] in PACKAGES)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child.split(".")[0] not in PACKAGES:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(
                        graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycle_between_modules():
    graph = grimp.build_graph(*PACKAGES)
    # A package's __init__ importing its own submodule is not a cycle between modules.
    for package in PACKAGES:
        for child in graph.find_children(package):
            if graph.direct_import_exists(importer=package, imported=child):
                graph.remove_import(importer=package, imported=child)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for name in ("memhouse.a", "memhouse.b", "memhouse.c"):
        graph.add_module(name)
    graph.add_import(importer="memhouse.a", imported="memhouse.b")
    graph.add_import(importer="memhouse.b", imported="memhouse.c")
    graph.add_import(importer="memhouse.c", imported="memhouse.a")
    assert _cycles(graph) == [["memhouse.a", "memhouse.b", "memhouse.c"]]


def test_the_layer_contract_holds():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]


def test_the_contracts_ignore_no_import_and_place_every_memhouse_module():
    """Issue 20 item 1: the floors hold without exceptions, and every module of the
    memhouse package is named in the ground or the wiring (a new one must choose)."""
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    contracts = [s for s in config.sections() if s.startswith("importlinter:contract:")]
    assert contracts
    for section in contracts:
        assert not config[section].get("ignore_imports", "").strip(), section
    layers = config["importlinter:contract:layers"]["layers"]
    named = {m.strip() for line in layers.splitlines() for m in line.split(":")}
    outside = {"memhouse", "memhouse.client"}  # package __init__ and the HTTP client
    graph = grimp.build_graph("memhouse")
    top = {".".join(m.split(".")[:2]) for m in graph.modules} - outside
    assert sorted(top - named) == []
