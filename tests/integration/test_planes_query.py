"""The reference experiment on the P4 plane `dataplane: auto` picks, beside the nftables
plane, run by run (the planes report), where that plane's tools are installed.

`pathdiv check configs/noisy.yaml` must put every run of the plan on one P4 plane whose
expected time is within auto's bound of the nftables plane's. Then the plan's query cells
(seven runs, one repetition) run in the lab kernel twice, as a user runs them: with
`dataplane: auto` (every manifest must name the P4 plane and why) and with
`--set dataplane=nftables`; both are analysed, and `python -m
pathdiv.analysis.report.planes` pairs them by run and transfer group. On the virtual clock
both planes are ideal switches, so no metric may differ over all pairs: the report's
verdict at alpha 0.0025 (0.01 over its four metrics, Bonferroni: a false alarm about once
in a hundred runs of this test), where bmv2's lock-step spraying, the last plane bug
found this way, gave p = 0.0007 on utilization (docs/p4.md). About 100 s on p4-ebpf.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from pathdiv.analysis.report import planes as report
from pathdiv.experiments.config.load import load
from pathdiv.experiments.config.planes import AUTO_BOUND, BASELINE, PLANES
from pathdiv.experiments.dataplane import select
from pathdiv.experiments.plan.runs import expand
from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]
QUERY = ["--only", "flow_type=query", "--reps", "1", "--quiet"]


@pytest.fixture(scope="module")
def p4_plane() -> str:
    runs = expand(load(REPO / "configs/noisy.yaml"), repetitions=1)
    choice = select.choose(runs[0])
    if choice.plane is None or not PLANES[choice.plane].p4:
        # the rule names the P4 tools not found (p4c-ebpf; simple_switch, p4c-bm2-ss, ...)
        pytest.skip(f"no P4 plane for configs/noisy.yaml here: {choice.rule}")
    return choice.plane


def test_check_puts_every_run_of_the_reference_plan_on_the_p4_plane(p4_plane):
    out = subprocess.run([*PATHDIV, "check", "configs/noisy.yaml"], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    runs = int(re.search(r"plan: (\d+) run\(s\)", out.stdout).group(1))
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("data plane: "))
    assert line.startswith(f"data plane: {runs} run(s) on {p4_plane} (auto: the cheapest "
                           "P4 plane found"), out.stdout
    cell = re.search(r"([\d.]+)(?:-([\d.]+))?x per cell", line)
    assert cell and float(cell.group(2) or cell.group(1)) <= AUTO_BOUND, line


def test_the_query_cells_on_the_p4_plane_agree_with_the_nftables_plane(
        p4_plane, root_fabric, lab_kernel, tmp_path):
    folders = {}
    for plane, extra in ((p4_plane, []), (BASELINE, ["--set", f"dataplane={BASELINE}"])):
        folders[plane] = tmp_path / plane
        proc = subprocess.run([*PATHDIV, "run", "configs/noisy.yaml", *QUERY, *extra,
                               "--out", str(folders[plane])], cwd=REPO, capture_output=True,
                              text=True, timeout=3600)
        assert proc.returncode == 0, (plane, proc.stdout[-2000:], proc.stderr[-3000:])
        plan = json.loads((folders[plane] / "plan.json").read_text())["runs"]
        assert len(plan) == 7 and {e["status"] for e in plan} == {"complete"}, plan
        for entry in plan:
            manifest = json.loads((folders[plane] / "runs" / entry["run_id"] /
                                   "manifest.json").read_text())
            assert manifest["dataplane"]["dataplane"] == plane
            rule = "auto: the cheapest P4 plane" if plane == p4_plane else "as configured"
            assert manifest["dataplane"]["selected"].startswith(f"{plane}: {rule}")
    first, second = (report.load(folders[p]) for p in (BASELINE, p4_plane))
    spec = dataclasses.replace(report.design(folders[BASELINE]), alpha=0.0025)
    table = report.compare(first.metrics, second.metrics, spec)
    print(report.markdown(first, second, table, spec))
    pooled = table[table.configuration == "all pairs"]
    assert len(pooled) == len(spec.dvs) and bool(table.paired.all())
    assert (pooled.n.astype(int) >= 20).all(), pooled
    assert report.DIFFER not in set(pooled.verdict), pooled.to_string()
    assert report.DIFFER not in set(table.verdict), table.to_string()
