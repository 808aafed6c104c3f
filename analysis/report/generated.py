"""Generated tables inside hand-written Markdown pages: the text between a begin and an
end marker (HTML comments) is the tool's, the rest the author's. Used by the claim,
Table IV, planes and stability tables (`python -m pathdiv.analysis.report.<tool>
... --write PAGE`)."""

from __future__ import annotations

import sys
from pathlib import Path


def replace_block(text: str, block: str, begin: str, end: str) -> str:
    """`text` with what lies between the markers replaced by `block`."""
    if begin not in text or end not in text:
        raise ValueError(f"the file has no {begin} ... {end} markers to fill")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{block}{end}{tail}"


def write_or_print(block: str, page: Path | None, what: str, begin: str, end: str) -> None:
    """Fill `page`'s markers with `block` and say so, or print the block when no page."""
    if page is None:
        sys.stdout.write(block)
        return
    page.write_text(replace_block(page.read_text(), block, begin, end))
    print(f"wrote the {what} into {page}")
