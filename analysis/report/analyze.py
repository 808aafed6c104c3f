"""Entry point of `pathdiv analyze` (and of `python -m pathdiv.analysis`, which needs none of
the emulation stack): a results folder in, stats.json and reports out.

`write_report(folder)` reads `metrics.csv` (required) and, when present, `config.yaml`
(its `analysis` section picks clusters/IVs/DVs), `plan.json` and `runs/*/manifest.json`,
then writes into the folder:

- `stats.json`  - every number behind the report (`StudyResults.to_dict()`),
- `report.md`   - the report in Markdown, images linked from `plots/*.png`,
- `report.html` - the same report, self-contained (plots embedded as base64 PNG).

A folder holding only `metrics.csv` is enough (`stats_only=True` also ignores any
plan and manifests, for data that was produced elsewhere).

The folder is read as hostile (analysis/readers.py: no link followed, every file
bounded, config.yaml within a config's bounds; a run that cannot be read is said in the
report and skipped), and one analysis writes one generation of files: everything into
a staging folder, then swapped in under the folder's analysis lock
(analysis/generation.py), so an interrupted or concurrent analysis never leaves files
of two analyses side by side.
"""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

import pathdiv.analysis.readers as readers
import pathdiv.analysis.safefiles as safefiles
from pathdiv.analysis.atomic import write_text_atomic
from pathdiv.analysis.generation import Generation, new_generation
from pathdiv.analysis.metrics.measured import MEASURED_FILE
from pathdiv.analysis.metrics.paths_run import SERIES_FILE
from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.analysis.report import fidelity
from pathdiv.analysis.report.blocks import (
    Block,
    Heading,
    Paragraph,
    Svg,
    render_html,
    render_markdown,
)
from pathdiv.analysis.report.content import Provenance, build_report, reference_blocks
from pathdiv.analysis.report.linkmap import configuration_maps
from pathdiv.analysis.report.plots import (
    Plot,
    box_plots,
    cluster_plots,
    fct_cdfs,
    forest_plot,
    path_heatmap,
)
from pathdiv.analysis.report.timeplots import condition_plots
from pathdiv.analysis.stats import agreement, claims
from pathdiv.analysis.stats.scope import scopes_of
from pathdiv.analysis.stats.spec import AnalysisSpec
from pathdiv.analysis.stats.study import StudyResults, analyze_metrics
from pathdiv.topologies.conditions import fat_tree_of

log = logging.getLogger(__name__)

PLOT_DIR = "plots"
# the files of the metrics stage, kept by an analysis that reads metrics.csv as it is
CARRIED = ("metrics.csv", "transfer_metrics.csv", "slowdown.csv", SERIES_FILE, MEASURED_FILE,
           "runs/")


def spec_from_config(config: dict[str, Any] | None) -> AnalysisSpec:
    """AnalysisSpec from a config's `analysis` section (defaults for missing keys)."""
    section = (config or {}).get("analysis") or {}
    if not isinstance(section, dict):
        raise ValueError(
            f"config.yaml: analysis is {section!r}; expected a mapping such as "
            "{clusters: [condition, flow_type], ivs: [switching, host], dvs: [...]}"
        )
    valid = {f.name for f in fields(AnalysisSpec)} - {"level_scope"}
    unknown = sorted(set(section) - valid)
    if unknown:
        raise ValueError(
            f"config.yaml: unknown analysis key(s) {unknown}; valid keys are {sorted(valid)}"
        )
    factors = (config or {}).get("factors") or {}
    scopes = scopes_of(factors) if isinstance(factors, dict) else {}
    level_scope = tuple((f, lv, o, xs) for f, lvs in scopes.items() for lv, where in lvs.items()
                        for o, xs in where.items())
    for key in ("lower_is_better", "compare"):  # null in a config: the default
        if section.get(key) is None:
            section = {k: v for k, v in section.items() if k != key}
    if "compare" not in section and isinstance(factors, dict):
        # each factor's levels against its first, in the config's order
        ivs = section.get("ivs") or list(factors)
        section = {**section, "compare": [
            [level, next(iter(factors[f]))] for f in ivs if isinstance(factors.get(f), dict)
            for level in list(factors[f])[1:]]}
    return AnalysisSpec(**section, level_scope=level_scope)


def read_provenance(folder: Path, stats_only: bool) -> Provenance:
    prov = Provenance(folder=str(folder))
    try:
        prov.config = readers.read_config(folder)
    except readers.FolderError as exc:
        raise ValueError(f"{exc}; fix it or remove it to analyse with the default "
                         "design") from None
    if stats_only:
        return prov
    plan = readers.read_record(folder / "plan.json", prov.notes)
    prov.plan = plan if isinstance(plan, dict) else None
    prov.manifests = [m for _, m in readers.manifests(folder, prov.notes)]
    return prov


def make_plots(metrics: pd.DataFrame, spec: AnalysisSpec) -> tuple[list[Plot], list[str]]:
    plots = box_plots(metrics, spec)
    notes = []
    cdf = fct_cdfs(metrics, spec)
    if cdf is None:
        notes.append("No fct_s column in metrics.csv: the FCT CDF plot is skipped.")
    else:
        plots.append(cdf)
    heatmap = path_heatmap(metrics, spec)
    if heatmap is None:
        notes.append(
            "metrics.csv has no per-path columns (path_<i>_share): the path-usage heatmap "
            "is skipped."
        )
    else:
        plots.append(heatmap)
    return plots, notes


def compare_with_references(metrics: pd.DataFrame, spec: AnalysisSpec,
                            folder: Path) -> tuple[list[Block], str | None]:
    """Report blocks putting each named reference's claims beside our figures, a one-line
    tally for the summary, and reference.json in `folder` (the generation's staging
    folder) with every mark as data."""
    names = [spec.reference] if isinstance(spec.reference, str) else list(spec.reference or [])
    blocks: list[Block] = []
    tallies, dump = [], {}
    for name in names:
        study = claims.load_reference(name)
        table = agreement.mark_claims(study, metrics, spec.clusters, spec.alpha,
                                      spec.lower_is_better, spec.min_effect_pct)
        blocks += reference_blocks(study.name, study.study, study.source, study.silent_on,
                                   table)
        counts = agreement.tally(table)
        tallies.append(f"{study.name}: " + ", ".join(f"{n} {m}" for m, n in counts.items()))
        dump[study.name] = {"study": study.study, "source": study.source,
                            "design": study.design, "silent_on": study.silent_on,
                            "tally": counts,
                            "claims": json.loads(table.to_json(orient="records"))}
    if dump:
        write_text_atomic(folder / "reference.json", json.dumps(dump, indent=2))
    note = ("Against the published studies (every claim, compared with ours): "
            + "; ".join(tallies) + ".") if tallies else None
    return blocks, note


def link_pictures(prov: Provenance, spec: AnalysisSpec, plot_dir: Path) -> list[Block]:
    """The fat tree drawn with each link's bytes, one picture per configuration (the IVs'
    levels), from the manifests' interface counters; written as plots/linkmap_<i>.svg."""
    maps = configuration_maps(prov.manifests, fat_tree_of(prov.config or {}), spec.ivs)
    if not maps:
        return []
    blocks: list[Block] = [
        Heading("Bytes per link, per configuration", 2),
        Paragraph("Each picture is the fat tree with every link coloured by the bytes it "
                  "carried in both directions over the configuration's runs (switch "
                  "interface counters over the capture windows, all flow types together); "
                  "labels give a link's share of all bytes, hovering a link its bytes per "
                  "direction.")]
    for i, (label, svg) in enumerate(maps, 1):
        name = f"linkmap_{i:02d}"
        write_text_atomic(plot_dir / f"{name}.svg", svg)
        blocks.append(Svg(name, svg, f"Bytes per link: {label}"))
    return blocks


def write_report(folder: Path, spec: AnalysisSpec | None = None, stats_only: bool = False,
                 include_invalid: bool = False, design: str | None = None,
                 gen: Generation | None = None, notes: list[str] | None = None) -> Path:
    """Analyse `folder/metrics.csv`, write stats.json, report.md, report.html (and
    plots/*.png); return the path of report.html. Runs whose fidelity verdict is
    invalid are left out unless `include_invalid` (analysis/report/fidelity.py).
    Everything is written into the generation `gen` (a new one of its own when None:
    committed when this returns); metrics.csv is the generation's when it wrote one.
    `notes` (runs the metrics skipped) go into the report."""
    folder = Path(folder)
    if gen is None:
        with new_generation(folder) as own:
            write_report(folder, spec, stats_only, include_invalid, design, own, notes)
        return folder / "report.html"
    metrics_path = gen.path("metrics.csv")
    measured = gen.staging if metrics_path.is_file() else folder  # the metrics stage's
    if not metrics_path.is_file():  # the folder's metrics, used as they are
        metrics_path = folder / "metrics.csv"
        gen.carry(*CARRIED)
    try:
        metrics = readers.read_table(metrics_path)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{metrics_path} does not exist; `pathdiv analyze` needs the metrics table. "
            "Run the experiment (`pathdiv run CONFIG --out DIR`) or copy a metrics.csv "
            "into the folder and use --stats-only"
        ) from None
    except readers.FolderError as exc:
        raise ValueError(str(exc)) from None
    if metrics.empty:
        raise ValueError(f"{metrics_path} has no rows; nothing to analyse")
    prov = read_provenance(folder, stats_only)
    spec = spec or spec_from_config(prov.config)
    chosen = fidelity.split(metrics, include_invalid)
    if chosen.kept.empty:
        raise ValueError(f"every run in {metrics_path} was judged invalid by the fidelity "
                         "monitor (reasons in runs/*/manifest.json); rerun them on a quieter "
                         "machine, or analyse them anyway with --include-invalid")
    log.info("analysis: %d observations from %s", len(chosen.kept), metrics_path)
    results: StudyResults = analyze_metrics(chosen.kept, spec)
    results.notes += [*(notes or []), *prov.notes]
    if chosen.note():
        results.notes.append(str(chosen.note()))
    if design:
        results.notes.append(f"Analysed with the design of {design} (its analysis section "
                             "and factor scopes), not the folder's config.yaml.")
    gen.write_text("stats.json", json.dumps(results.to_dict(), indent=2, allow_nan=False))
    if prov.manifests:
        gen.write_text(fidelity.FIGURES_FILE,
                       fidelity.figures_table(prov.manifests).to_csv(index=False))
    else:  # no manifests read (--stats-only, a compact folder): the recorded table stays
        gen.carry(fidelity.FIGURES_FILE)
    log.info("analysis: plotting")
    plots, plot_notes = make_plots(chosen.kept, spec)
    forest = forest_plot(results.comparisons, spec.min_effect_pct)
    plots += [forest] if forest is not None else []
    if not stats_only:  # each run's timeline.csv and slowdown.csv, beside metrics.csv
        plots += condition_plots(measured, prov.manifests)
    for plot in plots:
        gen.write_bytes(f"{PLOT_DIR}/{plot.name}.png", plot.png)
    figures = cluster_plots(metrics, spec)
    for plot in figures.values():
        gen.write_bytes(f"{PLOT_DIR}/{plot.name}.png", plot.png)
    pictures = [] if stats_only else link_pictures(prov, spec, gen.path(PLOT_DIR))
    reference, note = compare_with_references(chosen.kept, spec, gen.staging)
    name = (prov.config or {}).get("name") or folder.resolve().name
    title = f"pathdiv report: {name}"
    blocks = build_report(results, prov, plots, plot_notes, title, figures, reference, note,
                          fidelity=fidelity.fidelity_blocks(metrics, chosen, spec.clusters,
                                                            prov.manifests),
                          pictures=pictures)
    gen.write_text("report.md", render_markdown(blocks, PLOT_DIR))
    gen.write_text("report.html", render_html(blocks, title))
    log.info("analysis: wrote %s (committed with the rest of its generation)",
             folder / "report.html")
    return folder / "report.html"


def _run_ids(path: Path) -> set[str]:
    try:
        table = readers.read_table(path, usecols=lambda c: c == "run_id")
    except (OSError, readers.FolderError):
        return set()
    return set(table["run_id"].astype(str)) if "run_id" in table else set()


def refuse_lost_runs(folder: Path, measured: Path, notes: list[str]) -> None:
    """A full analysis measures the runs again from their captures, and keeps the
    recorded rows of a run whose captures were deleted (`compute_metrics`, measured.json);
    runs the folder's metrics.csv holds that this one neither measured nor kept (a run
    folder gone, captures that cannot be read) would leave the table with it: refused,
    before anything is committed, so the recorded rows stay."""
    lost = sorted(_run_ids(folder / "metrics.csv") - _run_ids(measured))
    if lost:
        shown = ", ".join(lost[:5]) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
        why = f" ({notes[0]})" if notes else ""
        raise ValueError(f"{folder}/metrics.csv holds {len(lost)} run(s) this analysis could "
                         f"not measure again: {shown}{why}; nothing was changed. Analyse "
                         "the recorded metrics with `pathdiv analyze --stats-only`, or "
                         "remove those runs' rows from metrics.csv to drop them")


def analyze_folder(folder: Path, stats_only: bool = False, include_invalid: bool = False,
                   spec: AnalysisSpec | None = None, design: str | None = None) -> Path:
    """Metrics from the captures (unless stats_only), then statistics and the report,
    as one generation (analysis/generation.py).

    Reads only files, so a results folder can be re-analysed anywhere, any time. The
    folder's path is resolved once, physically, and used as resolved."""
    folder = safefiles.resolve_physical(folder)
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such results folder")
    if not stats_only and not (folder / "runs").is_dir():
        raise ValueError(f"{folder} has no runs/ folder; for a folder holding only "
                         "metrics.csv use `pathdiv analyze --stats-only`")
    if stats_only and not (folder / "metrics.csv").is_file():
        raise ValueError(f"{folder} has no metrics.csv to analyse")
    notes: list[str] = []
    with new_generation(folder) as gen:
        if not stats_only:
            path = compute_metrics(folder, out=gen.staging, notes=notes, recorded=folder)
            log.info("metrics: %s", path)
            refuse_lost_runs(folder, path, notes)
        return write_report(folder, spec=spec, stats_only=stats_only,
                            include_invalid=include_invalid, design=design, gen=gen,
                            notes=notes)
