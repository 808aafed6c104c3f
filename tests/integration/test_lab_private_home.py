"""A checkout in a private home (0700, as /root on every Debian and a home Debian 12's
adduser makes): a lab-kernel run from it completes, and the guest reaches nothing else of
that home.

A copy of this checkout with a venv of its own (an editable install as pip makes it:
this checkout's finder, pointed at the copy; the dependencies borrowed from this
checkout's venv) goes into a 0700 folder with a secret beside it; the
copy's `pathdiv run` of one lab-kernel query run writes its results into the same 0700
folder. Then guest root tries to read the folder's other files, directly and through a
hostfs mount of the folder, and /etc/shadow. About 60 s here (one boot of one run, one of
a shell).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from pathdiv.kernels import uml
from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]
PRODUCT = ("pathdiv", "topologies", "experiments", "analysis", "kernels", "configs", "p4src",
           "setup.py")  # p4src: dataplane: auto compiles P4 where p4lang's tools are


def _private_checkout(home: Path) -> Path:
    """A copy of the product in `home`/pathdiv with an editable install in its .venv."""
    checkout = home / "pathdiv"
    checkout.mkdir()
    for name in PRODUCT:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, checkout / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(source, checkout / name)
    venv = checkout / ".venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    ours = Path(sysconfig.get_paths()["purelib"])
    # pandas, statsmodels, ...: this checkout's venv, as a plain folder on sys.path (its
    # .pth files, among them the editable install of this checkout, are not read)
    (site / "deps.pth").write_text(f"{ours}\n")
    # the editable install (pip's finder and .pth; pip itself would need the network
    # for `wheel`), mapping pathdiv.* to the copy's folders
    for finder in ours.glob("__editable__*pathdiv*"):
        text = finder.read_text().replace(f"'{REPO}/", f"'{checkout}/")
        (site / finder.name).write_text(text)
    return checkout


def test_a_checkout_in_a_0700_home_runs_the_lab_kernel_and_hides_the_rest_of_it(
        root_fabric, lab_kernel, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret").write_text("HOME-SECRET\n")  # readable by all: only the home hides it
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("KEY\n")
    checkout = _private_checkout(home)
    home.chmod(0o700)
    python = checkout / ".venv" / "bin" / "python"
    out = home / "results" / "q"
    run = subprocess.run(
        [str(python), "-m", "pathdiv.experiments.cli", "run", "configs/class-rb.yaml",
         "--quick", "--only", "flow_type=query", "--only", "host=rb", "--out", str(out),
         "--quiet", "--no-analyze", "--jobs", "1"],
        cwd=checkout, capture_output=True, text=True, timeout=1800)
    print(run.stdout[-2000:], run.stderr[-3000:])
    assert run.returncode == 0, run.stderr[-3000:]
    manifests = [json.loads(p.read_text()) for p in out.glob("runs/*/manifest.json")]
    assert [m["status"] for m in manifests] == ["complete"]
    assert manifests[0]["kernel_release"].endswith("-pathdiv")
    # the run ran the copy's code, not this checkout's
    probe = subprocess.run([str(python), "-c", "import pathdiv.kernels.uml as u; "
                            "print(u.__file__)"], capture_output=True, text=True)
    assert probe.stdout.startswith(str(checkout)), probe.stdout

    # guest root, in a boot whose share and working folder are in the home
    share = home / "results" / "probe"
    share.mkdir()
    tries = {
        "secret": f"cat {home}/secret",
        "key": f"cat {home}/.ssh/id_ed25519",
        "hostfs-home": f"mkdir -p /tmp/h && mount -t hostfs -o {home} none /tmp/h && "
                       "cat /tmp/h/secret",
        "shadow": "cat /etc/shadow",
        "code": f"cat {checkout}/setup.py",
        "share": f"touch {share}/inside",
    }
    script = "".join(f"( {cmd} ) >/dev/null 2>&1 && echo {name}=yes || echo {name}=no; "
                     for name, cmd in tries.items())
    script += f"ls -A {home}"
    res = uml.run_in_uml(["sh", "-c", script], share=share, kernel=lab_kernel,
                         timeout_s=300, cwd=checkout)
    print(res.stdout)
    lines = res.stdout.split()
    said = dict(line.split("=") for line in lines if "=" in line)
    assert said == {"secret": "no", "key": "no", "hostfs-home": "no", "shadow": "no",
                    "code": "yes", "share": "yes"}, said
    # the guest's view of the home: the way to what it needs, nothing else
    assert sorted(w for w in lines if "=" not in w) == ["pathdiv", "results"]
    assert oct(os.stat(home).st_mode & 0o777) == "0o700"  # the home itself unchanged
