"""A tiny renderer for docs/lifecycle.md: headings, paragraphs, pipe tables, `code`.

The file is generated from knowledge/lifecycle.py, so the renderer only needs what that
generator writes. Everything is HTML-escaped; the one piece of markup kept is the row
anchor `<a id="state"></a>` (or a reason code's), which becomes the `id` of its table
row so `/console/lifecycle/#held` lands on (and highlights) the `held` row.
"""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

_ANCHOR = re.compile(r'^<a id="([a-z0-9_]+)"></a>\s*')
_CODE = re.compile(r"`([^`]+)`")
_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def lifecycle_markdown() -> str:
    """docs/lifecycle.md, or the same text from its generator when the file is absent."""
    path = Path(settings.BASE_DIR) / "docs" / "lifecycle.md"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        from knowledge.lifecycle import operator_table_markdown

        return operator_table_markdown()


def _inline(text: str) -> str:
    return _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    head = _cells(lines[0])
    label = "Reason codes" if head and head[0] == "Code" else "Lifecycle states"
    out = [f'<div class="table-wrap" tabindex="0" role="region" aria-label="{label}">',
           "<table class=\"contract\">", "<thead><tr>"]
    out += [f'<th scope="col">{_inline(c)}</th>' for c in head]
    out.append("</tr></thead><tbody>")
    for line in lines[1:]:
        if _RULE.match(line):
            continue
        cells = _cells(line)
        row_id = ""
        if cells:
            m = _ANCHOR.match(cells[0])
            if m:
                row_id = f' id="{m.group(1)}"'
                cells[0] = cells[0][m.end():]
        tds = [f'<th scope="row">{_inline(cells[0])}</th>'] if cells else []
        tds += [f"<td>{_inline(c)}</td>" for c in cells[1:]]
        out.append(f"<tr{row_id}>{''.join(tds)}</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def render(markdown: str) -> SafeString:
    """Markdown (the subset above) to escaped HTML."""
    blocks: list[str] = []
    paragraph: list[str] = []
    table: list[str] = []

    def flush() -> None:
        if paragraph:
            blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if table:
            blocks.append(_table(table))
            table.clear()

    for raw in markdown.splitlines():
        line = raw.rstrip()
        if line.startswith("|"):
            if paragraph:
                blocks.append(f"<p>{_inline(' '.join(paragraph))}</p>")
                paragraph.clear()
            table.append(line)
            continue
        if table:
            flush()
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        if heading:
            flush()
            level = len(heading.group(1))
            # The slug GitHub gives the heading, so docs links (#readiness) work here too.
            slug = re.sub(r"[^a-z0-9]+", "-", heading.group(2).lower()).strip("-")
            blocks.append(f'<h{level} id="{slug}">{_inline(heading.group(2))}</h{level}>')
        elif not line.strip():
            flush()
        else:
            paragraph.append(line.strip())
    flush()
    # Safe: every piece of text above went through escape().
    return mark_safe("\n".join(blocks))
