"""A tiny document model rendered twice: self-contained HTML and Markdown.

The report is a list of blocks (heading, paragraph, bullet list, table,
warning, figure, links to the manual, a folded section); `to_html` embeds every figure as a
base64 PNG so the file opens anywhere on its own, `to_markdown` links the
PNGs beside it.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Callout:
    title: str
    items: tuple[str, ...]


@dataclass(frozen=True)
class Image:
    title: str
    caption: str
    png: Path
    svg: Path


@dataclass(frozen=True)
class Links:
    """(text, url) pairs: where the manual explains what the report shows (specplan.reports.manual)."""

    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Folded:
    """Blocks a reader opens on demand (HTML `<details>`): provenance below the answer."""

    summary: str
    blocks: tuple[Heading | Paragraph | Bullets | Table | Callout | Links, ...]


Block = Heading | Paragraph | Bullets | Table | Callout | Image | Links | Folded

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1.2em;color:#1d232a;line-height:1.45;background:#fff}
h1{font-size:1.7em;border-bottom:3px solid #2b6cb0;padding-bottom:.25em}
h2{font-size:1.3em;margin-top:1.8em;border-bottom:1px solid #d5dbe1;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{border:1px solid #cfd6dd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#edf2f7} tr:nth-child(even) td{background:#f8fafc}
details{margin:1.2em 0;border:1px solid #d5dbe1;border-radius:4px;padding:.4em .9em}
summary{cursor:pointer;font-weight:600;font-size:1.05em}
.warn{background:#fff5e6;border-left:5px solid #dd6b20;padding:.6em 1em;margin:1em 0}
figure{margin:1.2em 0} figure img{max-width:100%;border:1px solid #e2e8f0}
figcaption{font-size:.88em;color:#4a5568}
code{background:#edf2f7;padding:0 .25em;border-radius:3px}
"""


def to_html(title: str, blocks: list[Block]) -> str:
    body = "\n".join(html_block(b) for b in blocks)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n"
            f"<body>\n<h1>{html.escape(title)}</h1>\n{body}\n</body></html>\n")


def html_block(block: Block) -> str:
    esc = html.escape
    if isinstance(block, Heading):
        return f"<h{block.level}>{esc(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        return f"<p>{esc(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{esc(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Table):
        head = "".join(f"<th>{esc(h)}</th>" for h in block.header)
        rows = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in block.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    if isinstance(block, Callout):
        items = "".join(f"<li>{esc(i)}</li>" for i in block.items)
        return f"<div class=\"warn\"><strong>{esc(block.title)}</strong><ul>{items}</ul></div>"
    if isinstance(block, Links):
        return "<ul>" + "".join(f"<li><a href=\"{esc(url)}\">{esc(text)}</a></li>" for text, url in block.items) + "</ul>"
    if isinstance(block, Folded):
        inner = "\n".join(html_block(b) for b in block.blocks)
        return f"<details><summary>{esc(block.summary)}</summary>\n{inner}\n</details>"
    data = base64.b64encode(block.png.read_bytes()).decode("ascii")
    return (f"<figure><img alt=\"{esc(block.title)}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption><strong>{esc(block.title)}.</strong> {esc(block.caption)}</figcaption></figure>")


def to_markdown(title: str, blocks: list[Block], base: Path) -> str:
    return f"# {title}\n\n" + "\n\n".join(md_block(b, base) for b in blocks) + "\n"


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_block(block: Block, base: Path) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + block.text
    if isinstance(block, Paragraph):
        return block.text
    if isinstance(block, Bullets):
        return "\n".join(f"- {i}" for i in block.items)
    if isinstance(block, Table):
        lines = ["| " + " | ".join(md_cell(h) for h in block.header) + " |",
                 "|" + "---|" * len(block.header)]
        lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in block.rows]
        return "\n".join(lines)
    if isinstance(block, Callout):
        return f"> **{block.title}**\n" + "\n".join(f"> - {i}" for i in block.items)
    if isinstance(block, Links):
        return "\n".join(f"- [{text}]({url})" for text, url in block.items)
    if isinstance(block, Folded):
        return f"## {block.summary}\n\n" + "\n\n".join(md_block(b, base) for b in block.blocks)
    png = block.png.relative_to(base).as_posix()
    svg = block.svg.relative_to(base).as_posix()
    return f"### {block.title}\n\n![{block.title}]({png})\n\n{block.caption} ([SVG]({svg}))"
