"""The transfer tool starts in every host namespace, once per transfer."""

import subprocess
import sys

from tests.conftest import REPO


def test_the_transfer_tool_runs_without_site_packages():
    """Lab.python starts it with -S (no site-packages), so it must need only the stdlib."""
    res = subprocess.run([sys.executable, "-S", "-m", "experiments.transfer", "--help"],
                         cwd=REPO, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    assert "serve" in res.stdout and "fetch" in res.stdout
