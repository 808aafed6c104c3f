"""Run tests/support/ese_lab.py in a given lab kernel image (evidence for patch 0015)."""
import sys
from pathlib import Path

from pathdiv.kernels import uml

image, out, *args = sys.argv[1:]
share = Path(out).parent / (Path(out).stem + "-share")
share.mkdir(parents=True, exist_ok=True)
tool = uml.REPO_DIR / "tests" / "support" / "ese_lab.py"
res = uml.run_in_uml([sys.executable, str(tool), *args], share=share, kernel=Path(image),
                     timeout_s=1800)
Path(out).write_text(res.stdout)
sys.stderr.write(res.stderr[-3000:])
print("rc", res.returncode, "release", res.kernel_release, "s", round(res.seconds, 1))
