"""What the report says: turns results, provenance and plots into document blocks.

Pure: no files are read or written here (see `analysis/report/analyze.py` for that). The
wording aims at a student reading a MANOVA for the first time: each table is followed by one
sentence saying what it means.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pathdiv.analysis.report.blocks import Block, Bullets, Heading, Image, Paragraph, Table
from pathdiv.analysis.report.plots import Plot, short_name
from pathdiv.analysis.stats.effects import NEGLIGIBLE, REAL, screen_anova
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


def cluster_blocks(c: ClusterResult, alpha: float, figure: Plot | None = None) -> list[Block]:
    blocks: list[Block] = [Heading(f"Cluster {c.label}", 2),
                           Paragraph(f"{c.n} observations; analysis status: {c.status}.")]
    if figure is not None:
        blocks.append(Image(figure.name, figure.png, figure.caption))
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
        "largest effect (% of mean)": t.effect_pct,
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
        "effect (% of mean)": t.effect_pct,
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
            "difference": significant.mean_diff,
            "difference (% of B)": significant.effect_pct,
            "p (Holm)": significant.p_holm.map(fmt_p),
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


DESIGNS = {
    "per_run": "designations drawn anew for every run (levels compared unpaired)",
    "per_repetition": "the same designations for every factor level of a repetition "
                      "(levels compared paired)",
}


def design_sentence(results: StudyResults, prov: Provenance) -> str:
    workload = ((prov.config or {}).get("workload") or {})
    design = workload.get("designations", "per_run" if prov.config else None)
    said = DESIGNS.get(str(design), "design of the designations unknown (no config.yaml)")
    return (f"{results.n_observations} observations in {len(results.clusters)} test "
            f"cluster(s); {said}; alpha = {results.spec.alpha}.")


def _best(c: ClusterResult, dv: str) -> tuple[str, float] | None:
    if c.rankings.empty:
        return None
    grouping = CONFIGURATION if CONFIGURATION in set(c.rankings.grouping) else c.ivs[0]
    rows = c.rankings[(c.rankings.dv == dv) & (c.rankings.grouping == grouping)]
    if rows.empty:
        return None
    top = rows.sort_values("rank").iloc[0]
    return str(top.level), float(top["mean"])


def _strongest(c: ClusterResult, dv: str) -> tuple[str, float, float] | None:
    """The ANOVA effect with the largest partial eta squared for `dv`."""
    if c.anova.empty:
        return None
    rows = c.anova[(c.anova.dv == dv) & (c.anova.effect != "Intercept")].dropna(
        subset=["partial_eta_sq"])
    if rows.empty:
        return None
    r = rows.sort_values("partial_eta_sq", ascending=False).iloc[0]
    return str(r.effect), float(r.partial_eta_sq), float(r.p)


def _manova_text(c: ClusterResult, alpha: float) -> str:
    """The significant effects with Pillai's V and p, or the smallest p when none is."""
    rows = c.manova[c.manova.statistic == "pillai"] if not c.manova.empty else c.manova
    if rows.empty:
        return f"not tested ({c.status})"
    sig = rows[rows.p < alpha]
    if sig.empty:
        return f"no effect significant (smallest p {_p_words(float(rows.p.min()))})"
    return "; ".join(f"{r.effect}: V = {r.value:.2f}, p {_p_words(r.p)}"
                     for r in sig.itertuples(index=False))


def _p_words(p: float) -> str:
    return "< .001" if p < 0.001 else f"= {p:.3f}"


def _effect(x: float) -> str:
    if not np.isfinite(x):
        return "?"
    return f"{x:+.0f}" if abs(x) >= 10 else f"{x:+.1f}"


def _size(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def _p_short(p: float) -> str:
    if p is None or not np.isfinite(p):
        return "–"
    return "< .001" if p < 0.001 else f"= {p:.3f}".replace("0.", ".", 1)


def _finding_words(r: Any, min_effect_pct: float) -> str:
    if r.finding == "inconclusive":
        return (f"inconclusive (detectable >= {_size(r.detectable_pct)} %)"
                if np.isfinite(r.detectable_pct) else "inconclusive")
    if r.finding == "negligible":
        return f"negligible (< {min_effect_pct:g} %)"
    if r.finding == "equivalent":
        return f"equivalent within ± {min_effect_pct:g} %"
    return str(r.finding)


def answer_sentences(comparisons: pd.DataFrame, min_effect_pct: float) -> list[str]:
    """One sentence per cluster and comparison of interest: each metric's effect (% of
    b's mean) with its 95 % CI, p raw and adjusted, and what that says."""
    sentences = []
    for (cluster, a, b), rows in comparisons.groupby(["cluster", "a", "b"], sort=False):
        parts = [f"{short_name(str(r.metric))} {_effect(r.effect_pct)} % "
                 f"[{_effect(r.ci_low_pct)}, {_effect(r.ci_high_pct)}], "
                 f"p {_p_short(r.p)} (adj. {_p_short(r.p_adj).removeprefix('= ')}): "
                 f"{_finding_words(r, min_effect_pct)}"
                 for r in rows.itertuples(index=False)]
        sentences.append(f"{cluster}, {a} vs {b}: " + "; ".join(parts) + ".")
    return sentences


def short_test(c: ClusterResult) -> str:
    """The test of a scoped cluster in a few words: 'switching at host=vanilla'."""
    if not c.scope:
        return " x ".join(c.ivs)
    held = [f"{f}={v[0]}" if len(v) == 1 else f"{len(v)} {f} levels"
            for f, v in c.scope.items() if f not in c.effects or len(v) == 1]
    return ", ".join(e.replace(":", " x ") for e in c.effects) + (
        f" at {', '.join(held)}" if held else "")


def summary_blocks(results: StudyResults, prov: Provenance, key_plot: Plot | None,
                   reference_note: str | None, forest: Plot | None = None) -> list[Block]:
    """The answer first: per cluster one sentence per comparison of interest, the forest
    plot of their effects; then per cluster the MANOVA and the best configuration per
    metric."""
    from pathdiv.analysis.report.plots import axis_label

    alpha = results.spec.alpha
    rows = []
    sentences: list[str] = []
    screened: list[str] = []
    for c in results.clusters:
        name = " / ".join(c.key.values()) or c.label
        row: dict[str, Any] = {"cluster": name, "test": short_test(c), "n": c.n,
                               "MANOVA (Pillai's V)": _manova_text(c, alpha)}
        said = []
        for dv in results.spec.dvs:
            best, effect = _best(c, dv), _strongest(c, dv)
            if best is None:
                row[f"best {axis_label(dv)}"] = "–"
                continue
            size = (f" ({effect[0]} η²p = {effect[1]:.2f}, p {_p_words(effect[2])})"
                    if effect else "")
            row[f"best {axis_label(dv)}"] = f"{best[0]} {best[1]:.4g}{size}"
            if effect and effect[2] < alpha:
                said.append(f"{best[0]} has the best {axis_label(dv)} ({best[1]:.4g}; "
                            f"{effect[0]} explains {effect[1]:.0%} of its variance, "
                            f"p {_p_words(effect[2])})")
        rows.append(row)
        sig = c.significant_effects(alpha)
        label = f"{name} ({row['test']})" if c.scope else name
        head = (f"{label}: the configurations differ ({', '.join(sig)})"
                if sig else f"{label}: no significant multivariate difference")
        sentences.append(head + (": " + "; ".join(said) if said else "") + ".")
        split = screen_anova(c.anova, alpha, results.spec.min_effect_pct)
        if split[REAL] or split[NEGLIGIBLE]:
            screened.append(f"{label}: significant and at least "
                            f"{results.spec.min_effect_pct:g} % of the mean: "
                            f"{'; '.join(split[REAL]) or 'none'}. Significant but "
                            f"negligible (< {results.spec.min_effect_pct:g} %): "
                            f"{'; '.join(split[NEGLIGIBLE]) or 'none'}.")
    blocks: list[Block] = [Heading("Summary", 2), Paragraph(design_sentence(results, prov))]
    answers = answer_sentences(results.comparisons, results.spec.min_effect_pct)
    if answers:
        blocks.append(Paragraph(
            "The comparisons of interest (analysis.compare), per cluster: each metric's "
            "effect as % of b's mean with its 95 % CI, Welch's p and the p Holm-adjusted "
            "over the cluster's comparisons, and what that says (better or worse: "
            f"significant and at least {results.spec.min_effect_pct:g} %, "
            "analysis.min_effect_pct).", "answer-intro"))
        if forest is not None:
            blocks.append(Image(forest.name, forest.png, forest.caption))
        blocks.append(Bullets(answers, "answer"))
    blocks.append(Table(pd.DataFrame(rows), "Per test cluster: the significant MANOVA "
                        "effects (Pillai's V), and per metric the best configuration, its "
                        "mean, and the strongest effect's partial η² and p (type III ANOVA)"))
    if key_plot is not None:
        blocks.append(Image(key_plot.name, key_plot.png, key_plot.caption))
    blocks.append(Bullets(sentences))
    if screened:
        blocks += [Paragraph("Practical significance (analysis.min_effect_pct): each "
                             "significant between-subjects effect with its size as a "
                             "percentage of the metric's mean (spread of the level means; "
                             "for an interaction, the largest departure from the main "
                             "effects)."), Bullets(screened)]
    if reference_note:
        blocks.append(Paragraph(reference_note))
    return blocks


def reference_blocks(name: str, study: str, source: str, silent_on: Sequence[dict],
                     claims: pd.DataFrame) -> list[Block]:
    """The study's claims (figures and stated directions) beside ours, with the verdicts
    of pathdiv.analysis.stats.agreement."""
    blocks: list[Block] = [Heading(f"The study's figures beside ours ({name})", 2),
                           Paragraph(f"{study}. Source: {source}")]
    if silent_on:
        blocks.append(Paragraph("Where the study gives no figure (never estimated here): "
                                + "; ".join(f"{s.get('item')} ({s.get('section', '')})"
                                            for s in silent_on) + ".", "note"))
    if claims.empty:
        return blocks
    frame = pd.DataFrame({
        "section": claims.section, "claim": claims.claim, "cluster": claims.cluster,
        "metric": claims.metric, "a vs b": claims.a + (" vs " + claims.b).where(
            claims.b != "", ""), "paper": claims.paper, "ours (95 % CI)": claims.ours,
        "p": claims.p.map(fmt_p), "p adj.": claims.p_adj.map(fmt_p),
        "verdict": claims.verdict, "why": claims.why,
    })
    css = ["violated" if x == "disagree" else "significant" if x == "agree" else ""
           for x in claims.verdict]
    blocks.append(Table(frame, "Every claim of the study against our data: the effect as a "
                        "percentage of b's mean with its 95 % CI, Welch's p raw and "
                        "Holm-adjusted within the claim's family, and the verdict by what "
                        "the claim says (direction, equivalence within a margin, or a "
                        "figure)", css))
    return blocks


def build_report(results: StudyResults, prov: Provenance, plots: Sequence[Plot],
                 plot_notes: Sequence[str], title: str,
                 cluster_figures: Mapping[str, Plot] | None = None,
                 reference: Sequence[Block] = (), reference_note: str | None = None,
                 fidelity: Sequence[Block] = (),
                 pictures: Sequence[Block] = ()) -> list[Block]:
    """Summary first, then the reference and the runs' fidelity, then each cluster with its
    key plot beside its tables, the remaining plots, the fat tree's link loads per
    configuration (`pictures`), and provenance as an appendix."""
    cluster_figures = cluster_figures or {}
    key_plot = next((p for p in plots if p.name == f"box_{results.spec.dvs[0]}"), None)
    forest = next((p for p in plots if p.name == "forest"), None)
    blocks: list[Block] = [Heading(title, 1)]
    blocks += summary_blocks(results, prov, key_plot, reference_note, forest)
    blocks += [Paragraph(n, "note") for n in results.notes]
    blocks += list(reference)
    blocks += list(fidelity)
    shown: set[str] = set()
    for cluster in results.clusters:
        name = " / ".join(cluster.key.values())
        figure = None if name in shown else cluster_figures.get(name)  # once per cluster
        shown.add(name)
        blocks += cluster_blocks(cluster, results.spec.alpha, figure)
    blocks += excess_blocks(results)
    blocks += subflow_blocks(results)
    blocks += plot_blocks([p for p in plots if p is not key_plot and p is not forest],
                          plot_notes)
    blocks += list(pictures)
    blocks += reading_guide(results)
    blocks += [Heading("Appendix: provenance", 2)]
    blocks += [b if not isinstance(b, Heading) or b.level > 2 else Heading(b.text, 3)
               for b in provenance_blocks(prov, results)]
    return blocks
