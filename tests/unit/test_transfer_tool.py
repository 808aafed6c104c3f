"""The transfer tool starts in every host namespace, once per transfer."""

import subprocess
import sys

from pathdiv.experiments.network.network import TRANSFER_TOOL


def test_the_transfer_tool_runs_without_site_packages(tmp_path):
    """Network.transfer starts it by path with -S (no site-packages): stdlib only."""
    res = subprocess.run([sys.executable, "-S", str(TRANSFER_TOOL), "--help"],
                         cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert "serve" in res.stdout and "fetch" in res.stdout
