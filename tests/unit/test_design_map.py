"""docs/DESIGN.md is the map: every path its tables name exists, and it stays a map."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO

DESIGN = REPO / "docs" / "DESIGN.md"
# a backticked name that is a path: a folder (ends with /) or a file of the product
PATHLIKE = re.compile(r"`([\w./-]+(?:/|\.(?:py|c|p4|yaml|md|config)))`")


def table_rows(text: str) -> list[list[str]]:
    """The cells of every table row of `text` (header and rule rows left out)."""
    rows = []
    for line in text.splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] not in ("folder", "word", "record", "command"):
            rows.append(cells)
    return rows


def named_paths(cells: list[str], root: Path) -> list[tuple[str, list[Path]]]:
    """(name, where it may be) for every path a row names: under the row's folder (its
    first cell, when that is a folder) or the last sub-folder the cell named before it
    (`metrics/` (`columns.py`, ...)), under docs/ (the decision records), or from the
    repository's top."""
    first = PATHLIKE.fullmatch(cells[0])
    folder = root / first.group(1) if first and first.group(1).endswith("/") else None
    out = []
    for cell in cells:
        sub = None
        for name in PATHLIKE.findall(cell):
            places = [root / name, root / "docs" / name]
            if folder is not None:
                places[:0] = [p for p in (sub / name if sub else None, folder / name) if p]
            out.append((name, places))
            if name.endswith("/") and folder is not None and (folder / name).is_dir():
                sub = folder / name
    return out


def missing_paths(text: str, root: Path) -> list[str]:
    return [name for cells in table_rows(text) for name, places in named_paths(cells, root)
            if not any(p.exists() for p in places)]


def test_every_path_the_maps_tables_name_exists():
    text = DESIGN.read_text()
    assert len(table_rows(text)) > 20  # the folder table, the records, the words
    assert missing_paths(text, REPO) == []


def test_a_path_that_is_not_there_is_named(tmp_path):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "runner.py").write_text("")
    (tmp_path / "experiments" / "plan").mkdir()
    (tmp_path / "experiments" / "plan" / "runs.py").write_text("")
    table = ("| folder | holds |\n| --- | --- |\n"
             "| `experiments/` | `runner.py` (the plan), `gone.py`, `plan/` (`runs.py`) |\n")
    assert missing_paths(table, tmp_path) == ["gone.py"]


def test_the_map_stays_short():
    assert len(DESIGN.read_text().splitlines()) <= 250
