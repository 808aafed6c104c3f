"""A comparison for the "At the paper's own settings" tables of the seeds' READMEs,
judged by pathdiv's verdict rules (pathdiv.analysis.stats.verdicts): two groups of runs,
their means with sd and n, the difference in % of b's mean with its 95 % interval,
Welch's p, and the verdict for the claim's kind.

    python scripts/paper_settings.py compare GROUP_A GROUP_B --test equivalence
    python scripts/paper_settings.py compare GROUP_A GROUP_B --test direction

A group is `CSV:COLUMN:KEY=PREFIX` (the rows of CSV whose KEY starts with PREFIX, their
COLUMN; e.g. docs/reproduction/seed003/trace/runs.csv:goodput_mbps:run=C) or
`GLOB:FIELD` (the FIELD of every paths.json the glob finds, e.g.
'results/x/runs/*coupled-bbr*/paths.json:goodput_mbps').

With one run per group there is no interval: the verdict is "inconclusive" and the
line says n = 1.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pathdiv.analysis.stats.verdicts import (
    DIRECTION,
    EQUIVALENCE,
    NON_INFERIORITY,
    estimate,
    judge_direction,
    judge_margin,
    margin_p,
)


def values(group: str) -> list[float]:
    """The numbers a group names (module docstring)."""
    parts = group.split(":")
    if len(parts) == 3:
        path, column, where = parts
        key, prefix = where.split("=", 1)
        with open(path, newline="") as fh:
            return [float(row[column]) for row in csv.DictReader(fh)
                    if row[key].startswith(prefix) and row[column] not in ("", None)]
    pattern, field = parts
    found = sorted(glob.glob(pattern))
    return [float(json.loads(Path(p).read_text())[field]) for p in found]


def compare(a: Sequence[float], b: Sequence[float], test: str, margin_pct: float,
            alpha: float = 0.05) -> dict[str, object]:
    """The estimate and the verdict of 'a better than b' (direction) or 'a about b'
    (equivalence) or 'a not worse than b' (non-inferiority); higher is better."""
    est = estimate(np.asarray(a), np.asarray(b), alpha)
    scale = abs(est.mean_b) / 100 if est.mean_b else math.nan
    effect = est.diff / scale
    if test == DIRECTION:
        verdict = judge_direction(effect, est.p, True, alpha, margin_pct)
    else:
        p_margin = margin_p(np.asarray(a), np.asarray(b), test, margin_pct * scale, True)
        verdict = judge_margin(test, effect, est.p, p_margin, True, alpha, margin_pct)
    return {"a": f"{est.mean_a:.2f} ± {est.sd_a:.2f} ({est.n_a})",
            "b": f"{est.mean_b:.2f} ± {est.sd_b:.2f} ({est.n_b})",
            "effect_pct": round(effect, 1),
            "ci_pct": [round(est.ci_low / scale, 1), round(est.ci_high / scale, 1)],
            "p": round(est.p, 4) if math.isfinite(est.p) else None,
            "verdict": verdict}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--test", choices=(DIRECTION, EQUIVALENCE, NON_INFERIORITY),
                   default=EQUIVALENCE)
    c.add_argument("--margin-pct", type=float, default=1.0,
                   help="the smallest effect of interest, % of b's mean (the configs' "
                   "analysis.min_effect_pct, 1 unless the claim says otherwise)")
    args = parser.parse_args(argv)
    print(json.dumps(compare(values(args.a), values(args.b), args.test, args.margin_pct),
                     ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
