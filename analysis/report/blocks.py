"""A tiny document model and its two renderers: Markdown and self-contained HTML.

The report is built once as a list of blocks (headings, paragraphs, bullet lists,
tables, images) and rendered twice, so report.md and report.html cannot drift. HTML
embeds images as base64 PNG data URIs; Markdown links to image files.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str
    css: str = ""  # e.g. "warning", "note"


@dataclass(frozen=True)
class Bullets:
    items: Sequence[str]
    css: str = ""


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame
    caption: str = ""
    row_css: Sequence[str] = field(default_factory=tuple)  # one class per row, optional


@dataclass(frozen=True)
class Image:
    name: str  # file stem
    png: bytes
    caption: str


@dataclass(frozen=True)
class Svg:
    """A vector picture: inlined in HTML, linked as `<image_dir>/<name>.svg` in Markdown
    (the caller writes that file)."""

    name: str  # file stem
    svg: str
    caption: str


Block = Heading | Paragraph | Bullets | Table | Image | Svg


def format_cell(value: Any) -> str:
    """Numbers to 4 significant digits (p-values below .001 as `< .001` is the caller's
    choice); None/NaN to an en dash, so a table never shows `nan`."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "–"
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.3e}"
        return f"{value:.4g}"
    return str(value)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(blocks: Sequence[Block], image_dir: str = "plots") -> str:
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {block.text}\n")
        elif isinstance(block, Paragraph):
            prefix = "> " if block.css else ""
            out.append(f"{prefix}{block.text}\n")
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {item}" for item in block.items) + "\n")
        elif isinstance(block, Table):
            if block.caption:
                out.append(f"*{block.caption}*\n")
            frame = block.frame
            header = "| " + " | ".join(_md_escape(str(c)) for c in frame.columns) + " |"
            rule = "|" + "|".join(" --- " for _ in frame.columns) + "|"
            rows = [
                "| " + " | ".join(_md_escape(format_cell(v)) for v in row) + " |"
                for row in frame.itertuples(index=False)
            ]
            out.append("\n".join([header, rule, *rows]) + "\n")
        elif isinstance(block, Image):
            out.append(f"![{block.caption}]({image_dir}/{block.name}.png)\n\n*{block.caption}*\n")
        elif isinstance(block, Svg):
            out.append(f"![{block.caption}]({image_dir}/{block.name}.svg)\n\n*{block.caption}*\n")
    return "\n".join(out)


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5rem 0 1.2rem; font-size: 0.85rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; text-align: left; }
th { background: #f0f0f0; }
caption { caption-side: top; text-align: left; font-style: italic; padding: 0.2rem 0; }
tr.violated td, tr.significant td { background: #fff3e0; }
tr.skipped td { background: #f6f6f6; color: #777; }
p.warning { background: #fff3e0; border-left: 4px solid #e69500; padding: 0.4rem 0.8rem; }
p.note, ul.note { background: #eef4fb; border-left: 4px solid #4a8bd6; padding: 0.4rem 0.8rem; }
figure { margin: 1rem 0; } figure img { max-width: 100%; }
figcaption { font-size: 0.85rem; color: #555; }
"""


def render_html(blocks: Sequence[Block], title: str) -> str:
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            level = min(max(block.level, 1), 6)
            body.append(f"<h{level}>{html.escape(block.text)}</h{level}>")
        elif isinstance(block, Paragraph):
            css = f' class="{block.css}"' if block.css else ""
            body.append(f"<p{css}>{html.escape(block.text)}</p>")
        elif isinstance(block, Bullets):
            css = f' class="{block.css}"' if block.css else ""
            items = "".join(f"<li>{html.escape(i)}</li>" for i in block.items)
            body.append(f"<ul{css}>{items}</ul>")
        elif isinstance(block, Table):
            body.append(_html_table(block))
        elif isinstance(block, Image):
            data = base64.b64encode(block.png).decode("ascii")
            body.append(
                f'<figure><img alt="{html.escape(block.caption)}" data-plot="{block.name}" '
                f'src="data:image/png;base64,{data}"><figcaption>'
                f"{html.escape(block.caption)}</figcaption></figure>"
            )
        elif isinstance(block, Svg):
            body.append(f'<figure data-picture="{html.escape(block.name)}">{block.svg}'
                        f"<figcaption>{html.escape(block.caption)}</figcaption></figure>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_table(block: Table) -> str:
    frame = block.frame
    caption = f"<caption>{html.escape(block.caption)}</caption>" if block.caption else ""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for i, row in enumerate(frame.itertuples(index=False)):
        css = block.row_css[i] if i < len(block.row_css) and block.row_css[i] else ""
        cls = f' class="{css}"' if css else ""
        cells = "".join(f"<td>{html.escape(format_cell(v))}</td>" for v in row)
        rows.append(f"<tr{cls}>{cells}</tr>")
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
