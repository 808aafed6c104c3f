"""Lab kernel build time: the full build (from recipe.json) and, optionally, a rebuild after
touching net/mptcp (what a scheduler change costs).

    python benchmarks/kernel_build.py [--touch-mptcp]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

from pathdiv.kernels import build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--touch-mptcp", action="store_true",
                        help="also time `make linux` after touching net/mptcp/sched_rb.c")
    args = parser.parse_args()
    start = time.monotonic()
    image = build.build_lab_kernel()
    elapsed = time.monotonic() - start
    meta = json.loads((image.parent / "recipe.json").read_text())
    print(f"image            {image} ({build.kernel_release(image)})")
    print(f"cpus             {os.cpu_count()} (make -j{meta['jobs']}, nice 19)")
    print(f"recorded build   {meta['build_seconds']:.0f} s "
          f"({'incremental' if meta.get('incremental') else 'from a fresh tree'})")
    print(f"this call        {elapsed:.1f} s (cached: no-op)")
    if args.touch_mptcp:
        src = build.BUILD_DIR / build.SOURCE_PACKAGE
        (src / "net/mptcp/sched_rb.c").touch()
        start = time.monotonic()
        subprocess.run(["nice", "-n", "19", "make", "-s", "-C", str(src), f"O={build.OUT_DIR}",
                        "ARCH=um", f"-j{os.cpu_count()}", build.IMAGE_NAME],
                       check=True, env=dict(os.environ, **build.BUILD_ENV),
                       stdout=subprocess.DEVNULL)
        print(f"net/mptcp rebuild {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
