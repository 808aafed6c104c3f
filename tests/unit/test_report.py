"""write_report renders stats.json, report.md and a self-contained report.html from a
results folder, including one that holds only metrics.csv."""

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from pathdiv.analysis.report.analyze import write_report
from pathdiv.analysis.report.content import ranking_sentence
from tests.support.study_data import synthetic_metrics

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STUDY_PLOTS = {"box_throughput_mbps", "box_goodput_mbps", "box_fct_s", "box_utilization",
               "fct_cdf", "path_usage", "forest", *(f"cluster_{i:02d}" for i in range(1, 7))}


def embedded_plots(html: str) -> dict[str, bytes]:
    found = re.findall(r'data-plot="([^"]+)" src="data:image/png;base64,([^"]+)"', html)
    return {name: base64.b64decode(data) for name, data in found}


@pytest.fixture(scope="module")
def study_folder(tmp_path_factory) -> Path:
    """A results folder shaped like a real run: metrics, config, plan, manifests."""
    folder = tmp_path_factory.mktemp("study")
    metrics = synthetic_metrics(11, repetitions=4, effects={
        "switching": {"ps-mptcp": {"goodput_mbps": 5.0}}})
    metrics.to_csv(folder / "metrics.csv", index=False)
    config = {"name": "noisy-synthetic", "seed": 7, "repetitions": 4,
              "factors": {"switching": {"ecmp-mptcp": {}, "ps-mptcp": {}}},
              "workload": {"designations": "per_repetition"},
              "analysis": {"alpha": 0.05, "reference": ["seed001", "seed000"]}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    runs = metrics[["run_id", "switching", "host"]].drop_duplicates()
    plan = [{"run_id": r.run_id, "factors": {"switching": r.switching, "host": r.host}}
            for r in runs.itertuples()]
    (folder / "plan.json").write_text(json.dumps({"runs": plan}))
    for r in runs.head(3).itertuples():
        run_dir = folder / "runs" / r.run_id
        run_dir.mkdir(parents=True)
        manifest = {"run_id": r.run_id, "status": "complete",
                    "dataplane": {"dataplane": "kernel", "mode": "ecmp"},
                    "kernel_release": "6.18.0"}
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
    write_report(folder)
    return folder


def test_report_embeds_every_plot(study_folder):
    html = (study_folder / "report.html").read_text()
    plots = embedded_plots(html)
    assert set(plots) == STUDY_PLOTS
    assert all(png.startswith(PNG_MAGIC) and len(png) > 1000 for png in plots.values())
    assert "nan" not in re.sub(r"data:image/png;base64,[^\"]+", "", html).lower().split()


def test_report_shows_design_and_every_cluster(study_folder):
    md = (study_folder / "report.md").read_text()
    for cluster in ("condition=noisy / flow_type=query", "condition=silent / flow_type=long"):
        assert f"## Cluster {cluster}" in md
    assert "Pillai's trace" in md and "Roy's largest root" in md
    assert "partial η²" in md
    assert "equal covariance matrices (Box's M)" in md
    assert "240 runs planned" in md
    assert "kernel (3)" in md and "6.18.0 (3)" in md
    assert "## Excess traffic" in md
    for image in re.findall(r"\]\((plots/[^)]+\.png)\)", md):
        assert (study_folder / image).is_file()


def test_stats_json_holds_every_number(study_folder):
    stats = json.loads((study_folder / "stats.json").read_text())
    assert len(stats["clusters"]) == 6
    cluster = stats["clusters"][0]
    pillai = [r for r in cluster["manova"] if r["statistic"] == "pillai"]
    assert {r["effect"] for r in pillai} == {"switching", "host", "switching:host"}
    assert all(set(r) >= {"value", "f", "num_df", "den_df", "p"} for r in pillai)
    assert {r["dv"] for r in cluster["anova"]} == {"throughput_mbps", "goodput_mbps", "fct_s",
                                                   "utilization"}
    assert all(r["partial_eta_sq"] is not None for r in cluster["anova"]
               if r["effect"] != "Residual")
    assert len(cluster["assumptions"]) == 6
    assert stats["excess_traffic"]


def test_stats_only_folder_with_config_subset(tmp_path):
    metrics = synthetic_metrics(2, repetitions=3, conditions=["noisy"], flow_types=["long"],
                                switching=["ecmp-mptcp", "ps-mptcp"])
    metrics = metrics.drop(columns=[c for c in metrics.columns if c.startswith("path_")])
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(
        {"name": "elsewhere", "analysis": {"dvs": ["goodput_mbps", "fct_s"]}}))
    html_path = write_report(tmp_path, stats_only=True)
    html = html_path.read_text()
    assert set(embedded_plots(html)) == {"box_goodput_mbps", "box_fct_s", "fct_cdf",
                                         "cluster_01", "forest"}
    assert "path-usage heatmap is skipped" in html
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["spec"]["dvs"] == ["goodput_mbps", "fct_s"]


def test_degenerate_cluster_is_explained_in_report(tmp_path):
    metrics = synthetic_metrics(2, repetitions=3, conditions=["noisy"], flow_types=["long"],
                                switching=["ecmp-mptcp", "ps-mptcp"])
    metrics["utilization"] = 1.0
    metrics.to_csv(tmp_path / "metrics.csv", index=False)
    write_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "> utilization is constant (1) in this cluster" in md


def test_bad_folders_raise_with_next_step(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"metrics\.csv does not exist.*--stats-only"):
        write_report(tmp_path)
    synthetic_metrics(1, repetitions=2).to_csv(tmp_path / "metrics.csv", index=False)
    (tmp_path / "config.yaml").write_text("analysis: {ivz: [host]}\n")
    with pytest.raises(ValueError, match=r"unknown analysis key\(s\) \['ivz'\]"):
        write_report(tmp_path)


def test_report_opens_in_headless_chromium(study_folder):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    html_path = study_folder / "report.html"
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--dump-dom", html_path.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shown = set(re.findall(r'<img[^>]*data-plot="([^"]+)"[^>]*src="data:image/png;base64,',
                           done.stdout))
    assert shown == STUDY_PLOTS


def test_report_answers_first_and_keeps_provenance_for_the_appendix(study_folder):
    md = (study_folder / "report.md").read_text()
    headings = re.findall(r"^(#{1,3}) (.+)$", md, flags=re.M)
    second = [text for level, text in headings if level == "##"]
    assert second[0] == "Summary"
    assert second[1].startswith("The study's figures beside ours (seed001)")
    assert second[-1] == "Appendix: provenance"
    assert second.index("Appendix: provenance") > second.index(
        "Cluster condition=silent / flow_type=long")
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    # per cluster the MANOVA and the best configuration per metric, in units
    assert "noisy / long" in summary and "best goodput (Mbit/s)" in summary
    assert "switching: V = " in summary and "η²p = " in summary
    assert "host: V = " not in summary  # only significant effects are summarised
    assert "levels compared paired" in summary  # workload.designations: per_repetition
    assert "Against the published studies" in summary
    # the planted goodput effect of ps-mptcp is found and said in plain words
    assert re.search(r"ps-mptcp/\w+ has the best goodput \(Mbit/s\)", summary)


def test_report_marks_the_studys_claims(study_folder):
    md = (study_folder / "report.md").read_text()
    assert "Spraying raises mean network utilisation over ECMP in every test group" in md
    assert "RB lowers mean FCT" in md
    assert "Where the study gives no figure" in md
    marks = json.loads((study_folder / "reference.json").read_text())
    rows = marks["seed001"]["claims"]
    # the synthetic goodput effect of ps-mptcp: ps-mptcp beats ecmp-mptcp, significantly
    # and by more than the smallest effect of interest
    planted = [r for r in rows if r["claim_id"] == "spray-better-noisy"
               and r["metric"] == "goodput_mbps"]
    assert planted and all(r["verdict"] == "agree" for r in planted)
    assert all(r["ci_low_pct"] > 1 and r["p_adj"] >= r["p"] for r in planted)
    table4 = [r for r in rows if r["kind"] == "excess"]
    assert len(table4) == 24
    long_noisy = [r for r in table4 if r["claim_id"] == "table-iv-noisy-long-ps-mptcp"]
    assert long_noisy[0]["paper"] == "58.1 %"
    assert marks["seed001"]["tally"]["agree"] > 0


def test_axes_carry_units():
    from pathdiv.analysis.report.plots import axis_label

    assert axis_label("fct_s") == "FCT (s)"
    assert axis_label("goodput_mbps") == "goodput (Mbit/s)"


FIRST_SCREEN = """<script>
const h = [...document.querySelectorAll('h2')].find(e => e.textContent === 'Summary');
const img = document.querySelector('img');
const forest = document.querySelector('img[data-plot="forest"]');
const answer = document.querySelector('ul.answer');
const said = answer ? [...answer.querySelectorAll('li')] : [];
document.body.setAttribute('data-first-screen', JSON.stringify({
  summary: h ? h.getBoundingClientRect().top : null,
  img: img ? img.getBoundingClientRect().top : null,
  img_height: img ? img.getBoundingClientRect().height : null,
  forest: forest ? forest.getBoundingClientRect().top : null,
  forest_bottom: forest ? forest.getBoundingClientRect().bottom : null,
  answers: said.map(li => [li.getBoundingClientRect().top, li.textContent])}));
</script></body>"""


def test_report_first_screen_answers_the_question(study_folder, tmp_path):
    """In a 1280x900 window (headless Chromium) the first screen holds the summary, the
    forest plot of the comparisons of interest whole, and their sentences (effect, CI,
    p, verdict); the screenshot is kept as first-screen.png to look at."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    html = (study_folder / "report.html").read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", FIRST_SCREEN, 1))
    argv = [browser, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-background-networking", "--window-size=1280,900"]
    done = subprocess.run([*argv, "--dump-dom", probe.as_uri()], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r"data-first-screen=\"([^\"]+)\"", done.stdout)
    assert found, "the probe script did not run"
    where = json.loads(found.group(1).replace("&quot;", '"'))
    assert where["summary"] is not None and where["summary"] < 900
    assert where["img"] is not None and where["img"] < 900 - 100  # at least 100 px of it
    assert where["forest"] == where["img"]  # the first picture is the forest plot
    assert where["forest_bottom"] < 900  # whole on the first screen
    answers = where["answers"]
    assert len(answers) == 6  # ps-mptcp vs ecmp-mptcp in each of the six clusters
    assert all(top < 900 for top, _ in answers[:3])  # the first sentences are on screen
    first = answers[0][1]
    assert re.match(r"\w+ / \w+, ps-mptcp vs ecmp-mptcp: throughput [+-][\d.]+ % "
                    r"\[[+-][\d.]+, [+-][\d.]+\], p [=<] [.\d]+ \(adj\. [<.\d ]+\): \w+",
                    first), first
    assert "goodput +" in first and ": better" in first  # the planted goodput effect
    shot = study_folder / "first-screen.png"
    done = subprocess.run([*argv, f"--screenshot={shot}", (study_folder / "report.html")
                           .as_uri()], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0 and shot.read_bytes().startswith(PNG_MAGIC)


def test_ranking_sentence_uses_the_studys_phrasing():
    ranked = pd.DataFrame({"level": ["ps-mptcp", "ecmp-mptcp"], "mean": [10.165, 10.0],
                           "pct_vs_next": [1.65, None]})
    assert ranking_sentence("goodput_mbps", ranked) == (
        "ps-mptcp has the best goodput_mbps (10.16), 1.65% greater than the runner-up "
        "ecmp-mptcp (10)."
    )
    faster = pd.DataFrame({"level": ["a", "b"], "mean": [1.8, 2.0], "pct_vs_next": [-10.0, None]})
    assert "10.00% smaller than the runner-up b" in ranking_sentence("fct_s", faster)


def test_report_from_measured_runs(tmp_path):
    """The whole chain after emulation: crafted captures -> metrics.csv -> report, with
    run manifests, as `pathdiv analyze DIR` does it on a real results folder."""
    import numpy as np

    from pathdiv.analysis.metrics.table import compute_metrics
    from pathdiv.topologies.fattree import FatTree
    from tests.support.pcap_synth import CaptureBuilder, add_transfer, spec_between, write_run

    rng = np.random.default_rng(1)
    n = 0
    for switching, paths in (("ecmp-mptcp", (0, 1, 2, 3)), ("static-mptcp", (0, 0, 0, 0))):
        for host in ("vanilla", "rb"):
            for repetition in range(2):
                n += 1
                topo = FatTree(4, aliases_per_host=3)
                builder = CaptureBuilder(topo, hop_delay_s=50e-6)
                rows = [add_transfer(builder, spec_between(
                    topo, t, "h1", "h16", paths=paths, mptcp=True, t0=1000.0 + t, mss=1000,
                    gap_s=float(rng.uniform(0.5e-3, 1.5e-3)), request_bytes=100,
                    size_bytes=20000, flow_type=flow_type, client_port=40000 + 10 * t))
                    for t, flow_type in ((1, "short"), (2, "long"))]
                write_run(tmp_path / "runs" / f"r{n}", topo, builder, rows, transport="mptcp",
                          subflows=4, pattern="silent",
                          factors={"switching": switching, "host": host},
                          run_id=f"r{n}", repetition=repetition)
    compute_metrics(tmp_path)
    html = write_report(tmp_path).read_text()
    # metrics.csv carries the per-path shares, so the path heat map is drawn by default
    assert set(embedded_plots(html)) == {"box_throughput_mbps", "box_goodput_mbps",
                                         "box_fct_s", "box_utilization", "fct_cdf",
                                         "goodput_time",  # from each run's timeline.csv
                                         "path_usage", "cluster_01", "cluster_02", "forest"}
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert [c["key"] for c in stats["clusters"]] == [
        {"condition": "silent", "flow_type": "long"}, {"condition": "silent", "flow_type": "short"}]
    # Every run used all four paths or one: utilization never varies within a cell.
    assert any("utilization does not vary within any cell" in m
               for m in stats["clusters"][0]["messages"])
    assert "8 run manifests" in (tmp_path / "report.md").read_text()
