"""`python -m pathdiv.analysis` re-analyses a committed reproduction with the emulation
stack unavailable: Mininet, tqdm, scapy, dpkt and pathdiv's experiments and kernels
packages cannot be imported, as on a machine with only the analysis dependencies."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

from tests.conftest import REPO

BLOCKED = """
import runpy, sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"mininet", "tqdm", "scapy", "dpkt"} or \\
                name.startswith(("pathdiv.experiments", "pathdiv.kernels")):
            raise ImportError(f"{name}: not an analysis dependency (blocked)")
        return None

sys.meta_path.insert(0, Blocked())
sys.argv = ["python -m pathdiv.analysis", *sys.argv[1:]]
runpy.run_module("pathdiv.analysis", run_name="__main__", alter_sys=True)
"""


def _same_figures(a: object, b: object) -> bool:
    """Equal structure and text; numbers equal to 1e-6 relative. Another machine's BLAS
    (OpenBLAS picks its kernels by CPU) sums in another order: on a fresh machine the
    committed stats.json's figures came back up to 2e-9 apart (the MANOVA's p-values)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_figures(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_figures(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6) or (math.isnan(a) and math.isnan(b))
    return a == b


def test_the_noisy_reproduction_is_reanalysed_without_the_emulation_stack(tmp_path):
    committed = REPO / "docs" / "reproduction" / "noisy"
    folder = tmp_path / "noisy"
    shutil.copytree(committed, folder)
    (folder / "stats.json").unlink()
    res = subprocess.run([sys.executable, "-c", BLOCKED, str(folder), "--stats-only",
                          "--design", "configs/noisy.yaml"],
                         capture_output=True, text=True, cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip() == f"report: {folder / 'report.html'}"
    assert _same_figures(json.loads((folder / "stats.json").read_text()),
                         json.loads((committed / "stats.json").read_text()))
    assert (folder / "report.md").read_text().startswith("# ")


def test_the_blocker_does_block(tmp_path):
    res = subprocess.run([sys.executable, "-c", BLOCKED.replace(
        'runpy.run_module("pathdiv.analysis", run_name="__main__", alter_sys=True)',
        "import pathdiv.experiments.cli")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "not an analysis dependency" in res.stderr
