"""The review's counts of the product's code: functions over 50 lines, functions of
cyclomatic complexity over 12 (ruff's C901), and public names (functions and classes,
`main` left out) defined at the top of two or more modules.

    .venv/bin/python scripts/review_counts.py [-v]

`-v` lists each. The product is the folders setup.py installs (topologies, experiments,
analysis, kernels, pathdiv).
"""

from __future__ import annotations

import ast
import collections
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("topologies", "experiments", "analysis", "kernels", "pathdiv")


def main() -> int:
    verbose = "-v" in sys.argv[1:]
    files = sorted(p for f in FOLDERS for p in (ROOT / f).rglob("*.py"))
    long_functions, defined = [], collections.defaultdict(set)
    for path in files:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > 50:
                    long_functions.append((lines, f"{path.relative_to(ROOT)}:{node.name}"))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined[node.name].add(str(path.relative_to(ROOT)))
    twice = {name: where for name, where in defined.items()
             if len(where) > 1 and not name.startswith("_") and name != "main"}
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "C901",
                           "--config", "lint.mccabe.max-complexity=12",
                           "--output-format", "json", *FOLDERS],
                          cwd=ROOT, capture_output=True, text=True)
    complex_ = json.loads(ruff.stdout or "[]")
    print(f"functions over 50 lines: {len(long_functions)}")
    for lines, where in sorted(long_functions, reverse=True) if verbose else []:
        print(f"  {lines:4d} {where}")
    print(f"complexity over 12: {len(complex_)}")
    for item in complex_ if verbose else []:
        print(f"  {Path(item['filename']).relative_to(ROOT)}: {item['message']}")
    print(f"names defined in 2+ modules: {len(twice)}")
    for name, where in sorted(twice.items()) if verbose else []:
        print(f"  {name}: {', '.join(sorted(where))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
