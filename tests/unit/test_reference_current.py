"""Every committed reference.json is what today's verdict engine makes of its folder's own
metrics.csv: the claims of analysis/references/ marked again (agreement.mark_claims on the
runs the fidelity monitor kept, with the design the folder was analysed with, as `pathdiv
analyze --stats-only` does) give the same rows, levels, verdicts and counting. A folder
analysed before a rule or a claim changed (a level that stood in for Juggler, a verdict
kind, a family) fails here with the command that rewrites it, so the tallies built from
these files never count a verdict today's rules would not give."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from pathdiv.analysis.report import stability
from tests.conftest import REPO

ROOT = REPO / "docs" / "reproduction"
FOLDERS = sorted(p.parent for p in ROOT.rglob("reference.json"))
DESIGN = re.compile(r"Analysed with the design of (\S+) \(")
KEY = ("claim_id", "cluster", "metric", "a", "b")
JUDGED = ("verdict", "counted", "counted_under", "family_size")
FIGURES = ("effect_pct", "p", "p_adj", "p_margin_adj")


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) and isinstance(y, float):
        return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-6,
                                                                 abs_tol=1e-9)
    return bool(x == y)


def _plain(value: Any) -> Any:
    """JSON's reading of a value (numpy scalars and None as the file holds them)."""
    if value is None:
        return float("nan")
    if hasattr(value, "item"):
        value = value.item()
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else value


def _rows(records: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(tuple(r[k] for k in KEY), []).append(
            {k: _plain(r.get(k)) for k in (*JUDGED, *FIGURES)})
    return out


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_committed_reference_json_is_what_todays_engine_makes_of_its_data(
        folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    design = DESIGN.search((folder / "report.md").read_text())
    fresh = stability.load(folder, Path(design.group(1)) if design else None).marks
    committed = [r for study in json.loads((folder / "reference.json").read_text()).values()
                 for r in study["claims"]]
    ours, theirs = _rows(committed), _rows(fresh.to_dict("records"))
    where = folder.relative_to(REPO)
    again = (f"pathdiv analyze {where} --stats-only"
             + (f" --design {design.group(1)}" if design else ""))
    missing = sorted(set(theirs) - set(ours), key=str)[:3]
    extra = sorted(set(ours) - set(theirs), key=str)[:3]
    assert not missing and not extra, (
        f"{where}/reference.json predates today's claims or verdict rules (rows today's "
        f"engine makes that it lacks: {missing}; rows it holds that today's does not: "
        f"{extra}); rewrite it with `{again}`")
    for key, rows in theirs.items():
        for mine, now in zip(ours[key], rows, strict=True):
            differ = [k for k in (*JUDGED, *FIGURES) if not _same(mine[k], now[k])]
            assert not differ, (f"{where}/reference.json, {key}: {differ} differ from "
                                f"today's verdict engine ({[mine[k] for k in differ]} against "
                                f"{[now[k] for k in differ]}); rewrite it with `{again}`")
