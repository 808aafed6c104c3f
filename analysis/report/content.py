"""What the report says: turns results, provenance and plots into document blocks.

Pure: no files are read or written here (see `analysis/report/analyze.py` for that). The
wording aims at a student reading a MANOVA for the first time: each table is followed by one
sentence saying what it means.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pathdiv.analysis.report.blocks import Block, Bullets, Heading, Image, Paragraph, Table
from pathdiv.analysis.report.plots import Plot
from pathdiv.analysis.stats.posthoc import CONFIGURATION
from pathdiv.analysis.stats.study import ClusterResult, StudyResults

STATISTIC_NAMES = {
    "pillai": "Pillai's trace",
    "wilks": "Wilks' lambda",
    "hotelling_lawley": "Hotelling-Lawley trace",
    "roy": "Roy's largest root",
}
# Leaf keys of a run manifest that say what actually ran.
PROVENANCE_KEYS = (
    "dataplane", "backend", "mode", "spray", "transport", "subflows", "cc", "scheduler",
    "kernel", "kernel_release", "release", "host_kernel", "git_revision", "p4_hash", "status",
    "clock",
)


@dataclass
class Provenance:
    """What the results folder says about how the data were produced (all optional)."""

    folder: str
    config: dict[str, Any] | None = None
    plan: Any = None
    manifests: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def fmt_p(p: Any) -> str:
    if p is None or pd.isna(p):
        return "–"
    return "< .001" if p < 0.001 else f"{p:.3f}"


def _verdict(p: Any, alpha: float) -> str:
    if p is None or pd.isna(p):
        return "–"
    return "significant" if p < alpha else "not significant"


def _flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif not isinstance(obj, list):
        out[prefix] = obj
    return out


def provenance_blocks(prov: Provenance, results: StudyResults) -> list[Block]:
    blocks: list[Block] = [Heading("Experiment", 2)]
    if prov.config is None and prov.plan is None and not prov.manifests:
        blocks.append(Paragraph(
            "Analysed from metrics.csv alone: no config.yaml, plan.json or run manifests "
            "were read, so the run plan and the data plane and kernel used are unknown to "
            "this report.", "note"))
    if prov.config is not None:
        cfg = prov.config
        items = [f"{k}: {cfg[k]}" for k in ("name", "seed", "repetitions", "dataplane")
                 if k in cfg]
        for section in ("topology", "switching", "hosts", "workload"):
            if isinstance(cfg.get(section), dict):
                items.append(f"{section}: " + ", ".join(
                    f"{k}={v}" for k, v in _flatten(cfg[section]).items()))
        if isinstance(cfg.get("factors"), dict):
            for factor, levels in cfg["factors"].items():
                names = list(levels) if isinstance(levels, dict | list) else [levels]
                items.append(f"factor {factor}: {', '.join(map(str, names))}")
        blocks += [Heading("Configuration (config.yaml)", 3), Bullets(items)]
    if prov.plan is not None:
        blocks += [Heading("Run plan (plan.json)", 3), *plan_blocks(prov.plan)]
    if prov.manifests:
        blocks += [Heading("What actually ran (run manifests)", 3),
                   *manifest_blocks(prov.manifests)]
    if prov.notes:
        blocks.append(Bullets(prov.notes, "note"))
    blocks.append(Paragraph(
        f"{results.n_observations} observations in metrics.csv; "
        f"{len(results.clusters)} test cluster(s)."))
    return blocks


def plan_blocks(plan: Any) -> list[Block]:
    runs = plan.get("runs", plan) if isinstance(plan, dict) else plan
    if not isinstance(runs, list):
        return [Paragraph("plan.json has no list of runs; not summarised.", "note")]
    levels: dict[str, Counter[str]] = {}
    for run in runs:
        factors = run.get("factors", {}) if isinstance(run, dict) else {}
        for name, value in factors.items():
            levels.setdefault(name, Counter())[str(value)] += 1
    rows = [{"factor": name, "levels (runs each)": ", ".join(f"{v} ({n})" for v, n in c.items())}
            for name, c in levels.items()]
    blocks: list[Block] = [Paragraph(f"{len(runs)} runs planned.")]
    if rows:
        blocks.append(Table(pd.DataFrame(rows)))
    return blocks


def manifest_blocks(manifests: Sequence[dict[str, Any]]) -> list[Block]:
    seen: dict[str, Counter[str]] = {}
    for manifest in manifests:
        for key, value in _flatten(manifest).items():
            if key.split(".")[-1] in PROVENANCE_KEYS:
                seen.setdefault(key, Counter())[str(value)] += 1
    if not seen:
        return [Paragraph(f"{len(manifests)} run manifests; none records the data plane or "
                          "kernel used.", "note")]
    rows = [{"manifest key": k, "values (runs)": ", ".join(f"{v} ({n})" for v, n in c.items())}
            for k, c in sorted(seen.items())]
    return [Paragraph(f"{len(manifests)} run manifests."), Table(pd.DataFrame(rows))]


def reading_guide(results: StudyResults) -> list[Block]:
    a = results.spec.alpha
    return [
        Heading("How to read this report", 2),
        Bullets([
            f"Each test cluster ({' x '.join(results.spec.clusters) or 'all data'}) is "
            f"analysed on its own with a two-way MANOVA: do the configurations "
            f"({' x '.join(results.spec.ivs)}) differ on the metrics taken together "
            f"({', '.join(results.spec.dvs)})?",
            f"An effect is significant when p < {a}. Pillai's trace is the statistic to "
            "quote: it is the most robust when assumptions are shaky.",
            "A significant MANOVA effect is followed by one ANOVA per metric (type III sums "
            "of squares, as SPSS reports). Partial eta squared is the share of variance the "
            "effect explains: about .01 small, .06 medium, .14 large.",
            "Post-hoc comparisons say which levels differ (Welch t-tests, Holm-corrected).",
            "Assumption checks say how far to trust the p-values; a violated check is "
            "explained next to it.",
        ]),
    ]


def overview_blocks(results: StudyResults) -> list[Block]:
    rows = []
    for c in results.clusters:
        row: dict[str, Any] = {"cluster": c.label, "n": c.n, "status": c.status}
        for effect in _effects(results):
            row[f"{effect} (Pillai p)"] = fmt_p(c.manova_p(effect))
        rows.append(row)
    css = ["skipped" if c.status == "skipped" else "" for c in results.clusters]
    return [Heading("Overview", 2),
            Table(pd.DataFrame(rows), "MANOVA p-values (Pillai's trace) per cluster", css)]


def _effects(results: StudyResults) -> list[str]:
    ivs = list(results.spec.ivs)
    return ivs + ([":".join(ivs)] if len(ivs) > 1 else [])


def cluster_blocks(c: ClusterResult, alpha: float) -> list[Block]:
    blocks: list[Block] = [Heading(f"Cluster {c.label}", 2),
                           Paragraph(f"{c.n} observations; analysis status: {c.status}.")]
    blocks += [Paragraph(m, "warning") for m in c.messages]
    if not c.manova.empty:
        blocks += manova_blocks(c, alpha)
    if not c.anova.empty:
        blocks += anova_blocks(c, alpha)
    if not c.posthoc.empty:
        blocks += posthoc_blocks(c)
    if c.assumptions:
        blocks += assumption_blocks(c)
    if not c.rankings.empty:
        blocks += ranking_blocks(c)
    return blocks


def manova_blocks(c: ClusterResult, alpha: float) -> list[Block]:
    t = c.manova
    frame = pd.DataFrame({
        "effect": t.effect,
        "statistic": t.statistic.map(STATISTIC_NAMES),
        "value": t.value, "F": t.f, "df1": t.num_df, "df2": t.den_df,
        "p": t.p.map(fmt_p), "verdict": t.p.map(lambda p: _verdict(p, alpha)),
    })
    css = ["significant" if p < alpha else "" for p in t.p]
    sig = c.significant_effects(alpha)
    if sig:
        sentence = (f"The configurations differ on the metrics taken together for "
                    f"{', '.join(sig)} (Pillai's trace, p < {alpha}).")
    else:
        sentence = f"No effect is significant at {alpha} on the metrics taken together."
    return [Heading("Multivariate tests (MANOVA)", 3),
            Table(frame, f"Dependent variables: {', '.join(c.manova_dvs)}", css),
            Paragraph(sentence)]


def anova_blocks(c: ClusterResult, alpha: float) -> list[Block]:
    t = c.anova[c.anova.effect != "Intercept"]
    frame = pd.DataFrame({
        "dependent variable": t.dv, "effect": t.effect, "type III SS": t.sum_sq, "df": t.df,
        "F": t.f, "p": t.p.map(fmt_p), "partial η²": t.partial_eta_sq,
    })
    css = ["significant" if (pd.notna(p) and p < alpha) else "" for p in t.p]
    return [Heading("Tests of between-subjects effects", 3), Table(frame.reset_index(drop=True),
            "Univariate two-way ANOVA per metric, sum-to-zero coding", css)]


def posthoc_blocks(c: ClusterResult) -> list[Block]:
    t = c.posthoc
    significant = t[t.significant]
    blocks: list[Block] = [Heading("Post-hoc pairwise comparisons", 3),
                           Paragraph(f"{len(significant)} of {len(t)} pairwise comparisons "
                                     "differ after Holm correction (Welch t-tests).")]
    if not significant.empty:
        frame = pd.DataFrame({
            "metric": significant.dv, "grouping": significant.grouping,
            "level A": significant.level_a, "level B": significant.level_b,
            "mean A": significant.mean_a, "mean B": significant.mean_b,
            "difference": significant.mean_diff, "p (Holm)": significant.p_holm.map(fmt_p),
        })
        blocks.append(Table(frame.reset_index(drop=True), "Significant differences only"))
    return blocks


def assumption_blocks(c: ClusterResult) -> list[Block]:
    frame = pd.DataFrame([{"check": a.name, "result": a.status, "measured": a.summary,
                           "what it means": a.meaning} for a in c.assumptions])
    css = ["violated" if a.status == "violated" else "" for a in c.assumptions]
    return [Heading("Assumption checks", 3), Table(frame, "", css)]


def ranking_blocks(c: ClusterResult) -> list[Block]:
    blocks: list[Block] = [Heading("Rankings", 3)]
    grouping = CONFIGURATION if CONFIGURATION in set(c.rankings.grouping) else c.ivs[0]
    for dv, t in c.rankings[c.rankings.grouping == grouping].groupby("dv", sort=False):
        frame = pd.DataFrame({
            "rank": t["rank"], grouping: t.level, "n": t.n, "mean": t["mean"],
            "95% CI": [f"{lo:.4g} – {hi:.4g}" for lo, hi in zip(t.ci_low, t.ci_high,
                                                                strict=True)],
            "vs next (%)": t.pct_vs_next,
        })
        better = t.better.iloc[0]
        blocks.append(Table(frame.reset_index(drop=True),
                            f"{dv} ({better} is better); 'vs next' = how much the mean "
                            "exceeds the next-ranked one, in percent"))
        blocks.append(Paragraph(ranking_sentence(dv, t)))
    return blocks


def ranking_sentence(dv: str, ranked: pd.DataFrame) -> str:
    """The study's phrasing: `ps-mptcp/rb has the best goodput_mbps (13.57), 1.65% greater
    than ecmp-tcp/rb (13.35)`."""
    top = ranked.iloc[0]
    if len(ranked) < 2 or top.pct_vs_next is None or pd.isna(top.pct_vs_next):
        return f"{top.level} has the best {dv} ({top['mean']:.4g})."
    second = ranked.iloc[1]
    pct = float(top.pct_vs_next)
    word = "greater" if pct >= 0 else "smaller"
    return (f"{top.level} has the best {dv} ({top['mean']:.4g}), {abs(pct):.2f}% {word} than "
            f"the runner-up {second.level} ({second['mean']:.4g}).")


def excess_blocks(results: StudyResults) -> list[Block]:
    t = results.excess_traffic
    blocks: list[Block] = [Heading("Excess traffic", 2)]
    if t.empty:
        return [*blocks, Paragraph("metrics.csv has no excess_pct column; no excess-traffic "
                                   "table.", "note")]
    clusters = [c for c in results.spec.clusters if c in t.columns]
    cell = t.assign(text=[f"{m:.2f} ± {s:.2f}" for m, s in zip(t["mean"], t.sd, strict=True)])
    if clusters:
        cell["cluster"] = cell[clusters].astype(str).agg(" / ".join, axis=1)
        pivot = cell.pivot(index=CONFIGURATION, columns="cluster", values="text")
    else:
        pivot = cell.set_index(CONFIGURATION)[["text"]]
    pivot = pivot.fillna("–").reset_index()
    return [*blocks, Table(pivot, "Bytes beyond the payload, percent (mean ± sd), per "
                                  "configuration and test cluster")]


def subflow_blocks(results: StudyResults) -> list[Block]:
    t = results.subflow_paths
    if t.empty or "shared_subflows" not in t:
        return []
    note = ("Per configuration, means over transfer groups: subflows that carried data, "
            "subflows whose data shared a switch-to-switch link with another subflow of "
            "the connection, distinct paths used, and CPU ms (client + server threads) "
            "per MB of payload (empty in virtual time).")
    return [Heading("Subflow paths and CPU cost", 2), Paragraph(note, "note"),
            Table(t.round(3), "Subflows, link sharing and CPU cost per configuration")]


def plot_blocks(plots: Sequence[Plot], notes: Sequence[str]) -> list[Block]:
    blocks: list[Block] = [Heading("Plots", 2)]
    blocks += [Paragraph(n, "note") for n in notes]
    blocks += [Image(p.name, p.png, p.caption) for p in plots]
    return blocks


def build_report(results: StudyResults, prov: Provenance, plots: Sequence[Plot],
                 plot_notes: Sequence[str], title: str,
                 fidelity: Sequence[Block] = ()) -> list[Block]:
    blocks: list[Block] = [Heading(title, 1)]
    blocks += [Paragraph(n, "note") for n in results.notes]
    blocks += provenance_blocks(prov, results)
    blocks += list(fidelity)
    blocks += reading_guide(results)
    blocks += overview_blocks(results)
    for cluster in results.clusters:
        blocks += cluster_blocks(cluster, results.spec.alpha)
    blocks += excess_blocks(results)
    blocks += subflow_blocks(results)
    blocks += plot_blocks(plots, plot_notes)
    return blocks
