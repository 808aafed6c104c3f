"""One network for several runs, in the lab kernel on its virtual clock: the same runs
executed with a network built for each (`network.reuse: false`) and in one reused network
(`true`) give the same static TCP results to the microsecond (every transfer's FCT), the
randomised levels (ECMP, spraying, MPTCP: the guest draws ports and keys at random) the
same distribution of FCTs and of subflows opened, and MPTCP runs after a TCP run still
open their extra subflows. Runs with transfers above lab.own_boot_above_kb, which have a
boot to themselves, give in a lane of three what they give alone."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import fisher_exact, ks_2samp

from pathdiv.kernels.guest_bytecode import PACKAGES
from tests.conftest import REPO, open_for_guest

pytestmark = [pytest.mark.root, pytest.mark.slow]
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]
LEVELS = 5  # the switching levels of noisy.yaml (one --only per factor is kept)


def _run(out: Path, reuse: bool, *only: str) -> dict[str, dict]:
    return _plan(out, "--quick", "--only", "flow_type=query",
                 *(x for level in only for x in ("--only", f"switching={level}")),
                 "--set", f"network.reuse={'true' if reuse else 'false'}")


def _plan(out: Path, *args: str) -> dict[str, dict]:
    """noisy.yaml's runs of the vanilla hosts (narrowed by `args`), one repetition of one
    iteration, in one lane (--jobs 1: its runs one after another), nftables plane."""
    argv = [*PATHDIV, "run", str(REPO / "configs/noisy.yaml"), "--out", str(out),
            "--reps", "1", "--only", "host=vanilla", *args,
            "--set", "workload.iterations=1", "--set", "fidelity.max_repeats=0",
            # reuse is the nftables plane's: bmv2 and p4-ebpf rebuild their switches every
            # run, and noisy.yaml's `auto` picks bmv2 wherever it is installed
            "--set", "dataplane=nftables", "--no-analyze",
            "--quiet", "--jobs", "1"]  # one lane: a boot's runs after the first reuse
    subprocess.run(argv, check=True, timeout=900)
    out_runs = {}
    for run_dir in sorted((out / "runs").iterdir()):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "complete", manifest.get("error")
        with (run_dir / "transfers.csv").open() as f:
            rows = list(csv.DictReader(f))
        out_runs[run_dir.name] = {"manifest": manifest, "rows": rows}
    return out_runs


def _fcts(rows: list[dict]) -> list[tuple[str, str, int]]:
    """(client, server, FCT in µs) of every transfer, in the run's order."""
    return [(r["client"], r["server"], round((float(r["end_s"]) - float(r["start_s"])) * 1e6))
            for r in rows]


def _same_to_the_microsecond(a: list[tuple[str, str, int]], b: list[tuple[str, str, int]]
                             ) -> bool:
    """Equal pairs and FCTs within 1 µs: start and end are seconds since the epoch as
    floats (about 0.24 µs apart at 1.8e9 s), so a difference of two rounds either way."""
    return len(a) == len(b) and all(x[:2] == y[:2] and abs(x[2] - y[2]) <= 1
                                    for x, y in zip(a, b, strict=True))


def _all_subflows(runs: dict[str, dict]) -> list[int]:
    """[MPTCP transfers that opened all 4 subflows, those that opened fewer]."""
    counts = [int(r["subflows"]) for name, run in runs.items() if "mptcp" in name
              for r in run["rows"]]
    return [counts.count(4), len(counts) - counts.count(4)]


@pytest.fixture(scope="module")
def fresh_and_reused(root_fabric, lab_kernel, tmp_path_factory) -> tuple[dict, dict, dict]:
    """The same five runs with a network built for each, then in one reused network, and
    the static-TCP run alone (first in its boot): built once for the tests below (about
    70 s here)."""
    base = tmp_path_factory.mktemp("reuse")
    open_for_guest(base)
    return (_run(base / "fresh", reuse=False), _run(base / "reused", reuse=True),
            _run(base / "alone", False, "static-tcp"))


def test_a_reused_network_serves_every_run_and_mptcp_after_tcp(fresh_and_reused):
    fresh, reused, _ = fresh_and_reused
    assert set(fresh) == set(reused) and len(fresh) == LEVELS
    assert not any(r["manifest"]["network"]["reused"] for r in fresh.values())
    order = sorted(reused, key=lambda k: reused[k]["manifest"]["order"])
    assert all(reused[k]["manifest"]["network"]["reused"] for k in order[1:])
    assert reused[order[0]]["manifest"]["clock"] == "virtual"
    # the randomised levels: one sample of FCTs per side, pooled over the levels; a
    # reused network that slowed or sped transfers would move the whole distribution
    static = next(k for k in fresh if "static-tcp" in k)
    pooled = {side: [f for name, run in runs.items() if name != static
                     for _, _, f in _fcts(run["rows"])]
              for side, runs in (("fresh", fresh), ("reused", reused))}
    assert len(pooled["fresh"]) == len(pooled["reused"]) >= 40
    assert ks_2samp(pooled["fresh"], pooled["reused"]).pvalue > 0.001, pooled
    for name, run in reused.items():
        assert all(r["ok"] == "True" for r in run["rows"]), name
        if "mptcp" in name:  # the endpoints came back after TCP variants flushed them
            assert min(int(r["subflows"]) for r in run["rows"]) > 1, name


def test_a_reused_network_is_independent_of_the_runs_before_it(fresh_and_reused):
    fresh, reused, alone = fresh_and_reused
    static = next(k for k in fresh if "static-tcp" in k)
    assert reused[static]["manifest"]["order"] > 0  # other runs came before it
    first = _fcts(alone[static]["rows"])  # the same run first in its boot, a fresh network
    assert _same_to_the_microsecond(_fcts(reused[static]["rows"]), first)
    assert _same_to_the_microsecond(_fcts(fresh[static]["rows"]), first)
    # MPTCP opened every subflow as often as in fresh networks: fewer now and then is
    # seen in fresh networks too (a join refused: test_subflow_paths.py), while a reset
    # that lost endpoints or limits would leave every transfer short
    whole = {"fresh": _all_subflows(fresh), "reused": _all_subflows(reused)}
    assert sum(whole["reused"]) == sum(whole["fresh"]) >= 28
    assert fisher_exact([whole["fresh"], whole["reused"]]).pvalue > 0.001, whole


def _compiled(present: bool) -> None:
    """Leave pathdiv's modules compiled in the checkout, or none of them: the guest reads
    whichever the host left, and loading instead of compiling moved every FCT of the long
    run (kernels/guest_bytecode.py, which makes the boot compile them first)."""
    if present:
        subprocess.run([sys.executable, "-I", "-m", "compileall", "-q",
                        *(str(REPO / name) for name in PACKAGES)],
                       check=True, stdout=subprocess.DEVNULL, timeout=300)
        return
    for name in PACKAGES:
        for folder, _, files in os.walk(REPO / name):  # links to folders not followed
            if Path(folder).name == "__pycache__":
                for file in files:
                    if file.endswith(".pyc"):
                        (Path(folder) / file).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def large_runs(root_fabric, lab_kernel, tmp_path_factory) -> tuple[dict, dict, dict]:
    """The static-TCP runs of all three flow types in one lane, with pathdiv's modules
    compiled in the checkout, then its short (500 KB) and long (25 MB) runs each alone
    with none compiled, as the host lane of the suite may leave either (about 1.5 min
    here)."""
    base = tmp_path_factory.mktemp("large")
    open_for_guest(base)
    static = ("--only", "switching=static-tcp")
    _compiled(True)
    plan = _plan(base / "plan", *static)
    _compiled(False)
    return (plan,
            _plan(base / "short", *static, "--only", "flow_type=short"),
            _plan(base / "long", *static, "--only", "flow_type=long"))


def test_a_run_larger_than_own_boot_above_kb_is_independent_of_the_runs_before_it(
        large_runs):
    # Above 128 KB a transfer's losses and timeouts magnify what else the guest ran: in
    # one boot after another run the same 256 KB run's FCTs moved by up to 47 ms, a 25 MB
    # run's by seconds, and a 25 MB run first in a boot moved with the run queued after it
    # (docs/decisions/0008-network-reuse.md). Such runs have a boot to themselves, and
    # so give in a plan what they give alone, to the microsecond. Three runs in one
    # lane: the two large ones ran after another (the lane's shared boot, here the query
    # run's, goes first).
    plan, *alone = large_runs
    assert sorted(run["manifest"]["order"] for run in plan.values()) == [0, 1, 2]
    for single in alone:
        ((name, run),) = single.items()
        mine = plan[name]["manifest"]
        assert mine["flow_type"] in ("short", "long")
        assert mine["network"]["built_because"] == "first run"  # first in its boot
        assert len(run["rows"]) == 14  # one noisy iteration: 2 groups of 7 transfers
        assert _same_to_the_microsecond(_fcts(plan[name]["rows"]), _fcts(run["rows"])), name
