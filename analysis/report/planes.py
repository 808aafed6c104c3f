"""Do two data planes give the same results? One config run on two planes, cell by cell.

    python -m pathdiv.analysis.report.planes FIRST SECOND [--labels A B] [--write FILE]

FIRST and SECOND are results folders (or docs/reproduction/<name>) of the same config
run on two data planes (e.g. the nftables plane and bmv2). On the lab kernel's virtual
clock every plane is an ideal switch, so where the two differ one of them has a bug.

Rows are matched by (run_id, group_id): the same config and seed give the same runs
and the same designations on any plane, so when every observation of one folder has
its twin in the other (the other may hold more repetitions), the twins are compared
paired (Wilcoxon's signed-rank test on the differences); otherwise (another seed) all
rows are compared unpaired (Welch's t test). Per test cluster, configuration and
metric of the config's analysis section: both means, SECOND's difference as a percent
of FIRST's mean, the p-value (Holm-corrected over the cells of each metric: many cells,
some differ by chance), and the verdict with the config's own screen
(`analysis.alpha`, `analysis.min_effect_pct`): "same" (not significant), "same,
negligible" (significant but smaller than min_effect_pct), "differ", or "too few to
tell" (fewer than 6 pairs: the signed-rank test cannot reach 0.05 whatever the data).
With --write the tables go between
`<!-- planes:begin -->` and `<!-- planes:end -->` of FILE; without, they are printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from scipy import stats

from pathdiv.analysis.report.analyze import spec_from_config
from pathdiv.analysis.report.generated import write_or_print
from pathdiv.analysis.stats import effects
from pathdiv.analysis.stats.posthoc import holm
from pathdiv.analysis.stats.spec import AnalysisSpec

BEGIN = "<!-- planes:begin -->"
END = "<!-- planes:end -->"
KEY = ("run_id", "group_id")
SAME = "same"
SAME_NEGLIGIBLE = "same, negligible"
DIFFER = "differ"
TOO_FEW = "too few to tell"
VERDICT = {effects.NOT_SIGNIFICANT: SAME, effects.NEGLIGIBLE: SAME_NEGLIGIBLE,
           effects.REAL: DIFFER}
COLUMNS = ["cluster", "configuration", "dv", "n", "paired", "mean_first", "mean_second",
           "diff_pct", "p", "p_holm", "verdict"]


@dataclass
class Folder:
    path: Path
    plane: str
    metrics: pd.DataFrame


def plane_of(folder: Path) -> str:
    """The data plane the folder's runs used, from their manifests ('?' when a folder
    keeps none, as the compact copies under docs/reproduction/ do: give --labels)."""
    planes = set()
    for manifest in sorted(folder.glob("runs/*/manifest.json")):
        try:
            section = json.loads(manifest.read_text()).get("dataplane")
        except (OSError, ValueError):
            continue
        if isinstance(section, dict) and section.get("dataplane"):
            planes.add(str(section["dataplane"]))
    return "/".join(sorted(planes)) or "?"


def load(folder: Path, label: str | None = None) -> Folder:
    return Folder(folder, label or plane_of(folder), pd.read_csv(folder / "metrics.csv"))


def design(folder: Path) -> AnalysisSpec:
    config = folder / "config.yaml"
    return spec_from_config(yaml.safe_load(config.read_text()) if config.is_file() else None)


def _label(row: pd.Series | tuple, names: Sequence[str]) -> str:
    values = row if isinstance(row, tuple) else tuple(row)
    return ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))


def smallest_wilcoxon_p(n: int) -> float:
    """The smallest two-sided p the exact signed-rank test can give n pairs: 2 / 2**n
    (every difference of one sign). Below 6 pairs it is 0.0625 or more, so no difference
    can be significant at 0.05: such a cell says "too few to tell", not "same"."""
    return min(1.0, 2.0 / 2 ** n)


def _test(a: np.ndarray, b: np.ndarray, paired: bool) -> float:
    """p of the difference between the samples (NaN when it cannot be computed)."""
    if paired:
        d = b - a
        if len(d) < 2 or np.allclose(d, 0):
            return 1.0 if len(d) and np.allclose(d, 0) else float("nan")
        return float(stats.wilcoxon(a, b).pvalue)
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    if np.std(a) == 0 and np.std(b) == 0:
        return 1.0 if a.mean() == b.mean() else 0.0
    return float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def compare(first: pd.DataFrame, second: pd.DataFrame, spec: AnalysisSpec) -> pd.DataFrame:
    """One row per (cluster, configuration, metric): both means, the difference, p and
    the verdict. Rows of `first` with a twin in `second` (by run and group) are paired."""
    clusters = [c for c in spec.clusters if c in first.columns and c in second.columns]
    ivs = [c for c in spec.ivs if c in first.columns and c in second.columns]
    dvs = [d for d in spec.dvs if d in first.columns and d in second.columns]
    twins = first.merge(second, on=list(KEY), suffixes=("_a", "_b"))
    # paired when one folder's observations all have their twin in the other (a plan
    # run with fewer repetitions than the other): only the twins are compared then
    paired = len(twins) > 0 and len(twins) == min(len(first), len(second))
    if paired:
        first = first[first.set_index(list(KEY)).index.isin(twins.set_index(list(KEY)).index)]
    rows: list[dict[str, Any]] = []
    groups = first.groupby(clusters + ivs, sort=True, dropna=False) if clusters + ivs \
        else [((), first)]
    for key, part in groups:
        key = key if isinstance(key, tuple) else (key,)
        cluster = _label(key[:len(clusters)], clusters)
        config = "/".join(str(v) for v in key[len(clusters):])
        if paired:
            mine = twins[twins.set_index(list(KEY)).index.isin(part.set_index(list(KEY)).index)]
        else:
            mask = np.ones(len(second), dtype=bool)
            for col, val in zip(clusters + ivs, key, strict=True):
                mask &= (second[col] == val).to_numpy()
            other = second[mask]
        for dv in dvs:
            if paired:
                a = mine[f"{dv}_a"].to_numpy(dtype=float)
                b = mine[f"{dv}_b"].to_numpy(dtype=float)
                keep = np.isfinite(a) & np.isfinite(b)
                a, b = a[keep], b[keep]
            else:
                a = part[dv].to_numpy(dtype=float)
                b = other[dv].to_numpy(dtype=float)
                a, b = a[np.isfinite(a)], b[np.isfinite(b)]
            if not len(a) or not len(b):
                continue
            mean_a, mean_b = float(a.mean()), float(b.mean())
            diff = float("nan") if mean_a == 0 else (mean_b - mean_a) / abs(mean_a) * 100
            rows.append({"cluster": cluster, "configuration": config, "dv": dv,
                         "n": len(a) if paired else f"{len(a)}/{len(b)}", "paired": paired,
                         "mean_first": mean_a, "mean_second": mean_b, "diff_pct": diff,
                         "p": _test(a, b, paired), "too_few": paired and
                         smallest_wilcoxon_p(len(a)) >= spec.alpha})
    for dv in dvs:  # Holm over the cells of one metric: many cells, some differ by chance
        mine = [r for r in rows if r["dv"] == dv and np.isfinite(r["p"])]
        for r, adjusted in zip(mine, holm([r["p"] for r in mine]) if mine else [],
                               strict=True):
            r["p_holm"] = adjusted
    for r in rows:
        r.setdefault("p_holm", float("nan"))
        r["verdict"] = TOO_FEW if r.pop("too_few") else VERDICT[effects.verdict(
            r["p_holm"], r["diff_pct"], spec.alpha, spec.min_effect_pct)]
    if paired:
        rows += pooled(twins, dvs, spec)
    return pd.DataFrame(rows, columns=COLUMNS)


def pooled(twins: pd.DataFrame, dvs: Sequence[str], spec: AnalysisSpec) -> list[dict[str, Any]]:
    """Per metric, every pair of the plan at once: is one plane systematically above the
    other? The signed-rank test on each pair's difference as a percent of the first's
    value (so cells of different scales weigh alike); the effect is the difference of
    the two means, as in the cells' rows."""
    rows: list[dict[str, Any]] = []
    for dv in dvs:
        a = twins[f"{dv}_a"].to_numpy(dtype=float)
        b = twins[f"{dv}_b"].to_numpy(dtype=float)
        keep = np.isfinite(a) & np.isfinite(b) & (a != 0)
        a, b = a[keep], b[keep]
        if not len(a):
            continue
        rel = (b - a) / np.abs(a) * 100
        p = 1.0 if np.allclose(rel, 0) else float(stats.wilcoxon(rel).pvalue)
        diff = float((b.mean() - a.mean()) / abs(a.mean()) * 100)
        verdict = TOO_FEW if smallest_wilcoxon_p(len(a)) >= spec.alpha \
            else VERDICT[effects.verdict(p, diff, spec.alpha, spec.min_effect_pct)]
        rows.append({"cluster": "all", "configuration": "all pairs",
                     "dv": dv, "n": len(a), "paired": True, "mean_first": float(a.mean()),
                     "mean_second": float(b.mean()), "diff_pct": diff, "p": p,
                     "p_holm": p, "verdict": verdict})
    return rows


def _num(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.4g}"


def markdown(first: Folder, second: Folder, table: pd.DataFrame, spec: AnalysisSpec) -> str:
    counts = table.verdict.value_counts()
    paired = bool(table.paired.any()) if not table.empty else False
    lines = [f"**{first.path.name}** ({first.plane}) against **{second.path.name}** "
             f"({second.plane}): {len(table)} comparisons "
             f"({'paired by run and group' if paired else 'unpaired'}; alpha {spec.alpha}, "
             f"smallest effect of interest {spec.min_effect_pct:g} %): "
             "verdicts on Holm-corrected p within each metric; "
             f"{counts.get(SAME, 0)} same, {counts.get(SAME_NEGLIGIBLE, 0)} same but for a "
             f"negligible difference, {counts.get(DIFFER, 0)} differ, "
             f"{counts.get(TOO_FEW, 0)} too few to tell.", "",
             f"| cluster | configuration | metric | n | {first.plane} | {second.plane} "
             "| difference | p | p (Holm) | verdict |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.cluster} | {r.configuration} | {r.dv} | {r.n} | "
                     f"{_num(r.mean_first)} | {_num(r.mean_second)} | "
                     f"{_num(r.diff_pct)} % | {_num(r.p)} | {_num(r.p_holm)} | {r.verdict} |")
    return "\n".join(lines) + "\n"


def render(first_path: Path, second_path: Path, labels: Sequence[str] = ()) -> str:
    first, second = (load(path, label) for path, label in
                     zip((first_path, second_path), [*labels, None, None][:2], strict=True))
    spec = design(first_path)
    table = compare(first.metrics, second.metrics, spec)
    labelled = f" --labels {' '.join(labels)}" if labels else ""
    return (f"Generated by `python -m pathdiv.analysis.report.planes {first_path} "
            f"{second_path}{labelled}`; do not edit by hand.\n\n"
            + markdown(first, second, table, spec))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path, help="a results folder (one plane)")
    parser.add_argument("second", type=Path, help="the same config on another plane")
    parser.add_argument("--labels", nargs=2, metavar=("FIRST", "SECOND"), default=(),
                        help="the planes' names (default: read from the runs' manifests)")
    parser.add_argument("--write", type=Path, help="the Markdown file to fill")
    args = parser.parse_args(argv)
    for folder in (args.first, args.second):
        if not (folder / "metrics.csv").is_file():
            parser.error(f"{folder} has no metrics.csv (a results folder or "
                         "docs/reproduction/<name>)")
    block = render(args.first, args.second, args.labels)
    write_or_print(block, args.write, "planes table", BEGIN, END)
    return 0


if __name__ == "__main__":
    sys.exit(main())
