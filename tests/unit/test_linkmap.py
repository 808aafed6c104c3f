"""The fat tree as a picture: links coloured by load bucket, in the report, and checked
in a headless browser (computed colours, a rendered, non-empty picture)."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from pathdiv.analysis import results
from pathdiv.analysis.report.analyze import write_report
from pathdiv.analysis.report.linkmap import BUCKETS, bucket_of, link_map_svg
from pathdiv.topologies.fattree import FatTree
from tests.conftest import REPO

LINE = re.compile(r'<line class="link" data-link="([^"]+)" data-bucket="([^"]+)" '
                  r'data-bytes="(\d+)"[^>]* stroke="([^"]+)"')


def test_buckets_are_quarters_of_the_busiest_link():
    assert bucket_of(0, 100).name == "idle"
    assert bucket_of(10, 100) is BUCKETS[1]
    assert bucket_of(25, 100) is BUCKETS[1]
    assert bucket_of(26, 100) is BUCKETS[2]
    assert bucket_of(100, 100) is BUCKETS[-1]
    assert len({b.colour for b in BUCKETS}) == len(BUCKETS)


def test_every_link_drawn_once_with_its_bucket_colour_and_paths_over_it():
    topo = FatTree(4)
    bytes_ = {("e1", "a1"): 800, ("a1", "e1"): 200, ("a1", "c1"): 300, ("h1", "e1"): 50}
    path = topo.paths("h1", "h16")[0]
    svg = link_map_svg(topo, bytes_, [path], "test")
    lines = LINE.findall(svg)
    assert sorted(n for n, *_ in lines) == sorted(lk.name for lk in topo.links)
    got = {name: (bucket, int(b), colour) for name, bucket, b, colour in lines}
    assert got["e1-a1"] == ("75-100%", 1000, BUCKETS[-1].colour)
    assert got["a1-c1"][0] == "25-50%"
    assert got["h1-e1"][0] == "0-25%"
    assert got["e2-a2"][0] == "idle"
    assert f'data-path="{" ".join(path)}"' in svg
    assert ">74%<" in svg  # e1-a1 carried 1000 of the 1350 bytes


def _synthetic_folder(tmp_path: Path) -> Path:
    """The noisy reproduction's metrics with one manifest per run whose switch counters
    load the links the way its switching mode would (spraying evenly, ECMP unevenly)."""
    src = REPO / "docs" / "reproduction" / "noisy"
    out = tmp_path / "res"
    out.mkdir()
    shutil.copy(src / "metrics.csv", out)
    shutil.copy(src / "plan.json", out)
    config = yaml.safe_load((src / "config.yaml").read_text())
    config["analysis"].pop("reference", None)
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    topo = FatTree(4)
    rng = random.Random(3)
    plan = json.loads((src / "plan.json").read_text())
    for run in plan["runs"]:
        counters = {}
        even = run["factors"]["switching"].startswith("ps")
        for link in topo.links:
            scale = 1.0 if even else rng.choice([0.0, 0.2, 0.6, 1.0])
            base = 0 if link.b.node.startswith("c") and not even and rng.random() < 0.5 else 1
            counters[link.b.intf] = {"tx_bytes": int(1e6 * scale * base),
                                     "rx_bytes": int(9e5 * scale * base),
                                     "tx_packets": 1000, "rx_packets": 900}
        run_dir = out / "runs" / run["run_id"]
        run_dir.mkdir(parents=True)
        (run_dir / "manifest.json").write_text(json.dumps(
            {"run_id": run["run_id"], "factors": run["factors"], "status": "complete",
             "flow_type": run["flow_type"], "interface_counters": counters}))
    return out


def test_report_has_one_picture_per_configuration(tmp_path):
    folder = _synthetic_folder(tmp_path)
    html = write_report(folder).read_text()
    pictures = re.findall(r'<figure data-picture="(linkmap_\d+)">', html)
    assert len(pictures) == 10  # 5 switching x 2 host configurations
    assert (folder / "plots" / "linkmap_01.svg").is_file()
    res = results.open(folder)
    assert len(res.links) == len(res.provenance) * len(FatTree(4).links) * 2
    svg = res.draw(switching="ps-tcp", host="rb")
    buckets = {b for _, b, _, _ in LINE.findall(svg)}
    assert buckets == {"75-100%"}  # spraying loads every link alike in this data


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

PROBE = """<script>
window.addEventListener('load', () => {
  const out = [];
  for (const fig of document.querySelectorAll('figure[data-picture]')) {
    const svg = fig.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const links = [...fig.querySelectorAll('line.link')].map(l => ({
      bucket: l.dataset.bucket, bytes: Number(l.dataset.bytes),
      colour: getComputedStyle(l).stroke, length: l.getTotalLength()}));
    out.push({name: fig.dataset.picture, width: box.width, height: box.height, links});
  }
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (headless check)")
def test_picture_in_report_html_renders_one_colour_per_bucket(tmp_path):
    folder = _synthetic_folder(tmp_path)
    html = write_report(folder).read_text()
    probed = tmp_path / "probed.html"
    probed.write_text(html.replace("</body>", PROBE + "</body>"))
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run", "--virtual-time-budget=5000",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", probed.as_uri()],
        capture_output=True, text=True, timeout=120, check=True).stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    figures = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(figures) == 10
    colours: dict[str, set[str]] = defaultdict(set)
    for fig in figures:
        assert fig["width"] > 400 and fig["height"] > 300, fig["name"]
        assert len(fig["links"]) == len(FatTree(4).links)
        assert sum(link["bytes"] for link in fig["links"]) > 0
        assert all(link["length"] > 0 for link in fig["links"])
        for link in fig["links"]:
            colours[link["bucket"]].add(link["colour"])
    assert len(colours) >= 3  # the data spans several buckets
    assert all(len(c) == 1 for c in colours.values()), colours
    distinct = [next(iter(c)) for c in colours.values()]
    assert len(set(distinct)) == len(distinct)
