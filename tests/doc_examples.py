"""The fenced code blocks of the documentation, as a reader copies them
(tests/integrations/test_doc_examples.py runs them).

A block may be preceded (directly, one comment per line) by directives for the test:

    <!-- example: skip REASON -->      not run; the reason is required and is reported
    <!-- example: continues -->        a python block that continues the previous python
                                       block of the same page: the two run as one script
                                       (the page says so in its text)
    <!-- example: expect "TEXT" -->    the output of the run contains TEXT (repeatable)
    <!-- example: xfail REASON -->     runs, and a failure is reported as expected with
                                       REASON (a known gap the page states; a pass is
                                       reported too): never a way to leave a block unrun

Without `skip`, a block runs by its language: `python` as a script, `sh`/`bash` with
bash, `json` checked as an MCP host configuration (`mcpServers`) or as an error body the
API answers (`{"error": {...}}`). Any other block must say `skip` with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/integrations.md")
DIRECTIVE = re.compile(r"^<!--\s*example:\s*(\w+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)\s*$")  # also indented, in a list
RUNNABLE = {"python", "sh", "bash", "json"}


@dataclass
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None = None  # the stated reason
    xfail: str | None = None  # the stated known gap
    continues: bool = False
    expect: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}:{self.lang or 'plain'}"


def parse(page: str, text: str | None = None) -> list[Block]:
    """Every fenced block of `page` with its directives; malformed directives are
    recorded as problems of the block they precede."""
    lines = (text if text is not None else (ROOT / page).read_text()).splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, lang = opening.group(1), opening.group(2), opening.group(3).lower()
        end = i + 1
        while end < len(lines) and not lines[end].lstrip().startswith(fence):
            end += 1
        code = "\n".join(line.removeprefix(indent) for line in lines[i + 1:end]) + "\n"
        block = Block(page=page, line=i + 1, lang=lang, code=code)
        j = i - 1
        while j >= 0 and lines[j].lstrip().startswith("<!--"):
            match = DIRECTIVE.match(lines[j].strip())
            if not match:
                block.problems.append(f"line {j + 1}: not an example directive: {lines[j]!r}")
            else:
                word, rest = match.group(1), match.group(2)
                if word == "skip":
                    if not rest:
                        block.problems.append(f"line {j + 1}: `skip` needs a reason")
                    block.skip = rest
                elif word == "xfail":
                    if not rest:
                        block.problems.append(f"line {j + 1}: `xfail` needs a reason")
                    block.xfail = rest
                elif word == "continues":
                    block.continues = True
                elif word == "expect":
                    block.expect.insert(0, rest[1:-1] if rest[:1] == rest[-1:] == '"'
                                        else rest)
                else:
                    block.problems.append(f"line {j + 1}: unknown directive {word!r}")
            j -= 1
        blocks.append(block)
        i = end + 1
    return blocks


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in parse(page)]


def unaccounted(blocks: list[Block]) -> list[str]:
    """Why each block that is neither run nor skipped with a reason is neither."""
    out = []
    for n, b in enumerate(blocks):
        out += [f"{b.id}: {p}" for p in b.problems]
        if b.skip is not None:
            continue
        if b.lang not in RUNNABLE:
            out.append(f"{b.id}: a `{b.lang or 'plain'}` block is not run; mark it "
                       "`<!-- example: skip REASON -->`")
        if b.continues:
            before = [p for p in blocks[:n] if p.page == b.page and p.lang == "python"
                      and p.skip is None]
            if b.lang != "python" or not before:
                out.append(f"{b.id}: `continues` follows no python block on its page")
    return out


def scripts(blocks: list[Block]) -> list[list[Block]]:
    """The python blocks joined where one continues another: each list runs as one
    script, identified by its first block."""
    out: list[list[Block]] = []
    for b in blocks:
        if b.lang != "python" or b.skip is not None:
            continue
        if b.continues and out and out[-1][0].page == b.page:
            out[-1].append(b)
        else:
            out.append([b])
    return out
