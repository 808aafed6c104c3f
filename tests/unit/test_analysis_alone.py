"""`python -m pathdiv.analysis` re-analyses a committed reproduction with the emulation
stack unavailable: Mininet, tqdm, scapy, dpkt and pathdiv's experiments and kernels
packages cannot be imported, as on a machine with only the analysis dependencies."""

from __future__ import annotations

import json
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
    assert json.loads((folder / "stats.json").read_text()) == \
        json.loads((committed / "stats.json").read_text())
    assert (folder / "report.md").read_text().startswith("# ")


def test_the_blocker_does_block(tmp_path):
    res = subprocess.run([sys.executable, "-c", BLOCKED.replace(
        'runpy.run_module("pathdiv.analysis", run_name="__main__", alter_sys=True)',
        "import pathdiv.experiments.cli")], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "not an analysis dependency" in res.stderr
