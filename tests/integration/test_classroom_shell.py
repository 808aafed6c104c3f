"""`pathdiv net` driven on stdin, as a student types it: paths, counters, mode, flow, p4.

On the k=4 fat tree of configs/class-probe.yaml (20 Mbit/s), a 2 MB TCP flow h1 -> h16
must ride one core under ECMP and static routing and all four under spraying, and the
counters and paths must say so; on bmv2 `p4` shows a switch's table entries and the
spray program's register (docs/classroom/06-inside-a-p4-switch.md), elsewhere it says the
plane has no switch command line. Runs on the nftables plane, and on bmv2 when its tools
are installed.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.root
PATHDIV = [sys.executable, "-m", "pathdiv.experiments.cli"]
SCRIPT = """\
paths h1 h16
flow h1 h16 2MB tcp
paths h1 h16
counters
counters
mode static
flow h1 h16 2MB tcp
mode spray roundrobin
flow h1 h16 2MB tcp
paths h1 h16
flow h1 h99 2MB
flow h1 h16 2XB
mode warp
p4 e8 table_dump ipv4_lpm
p4 a1 register_read PathdivIngress.select_member.spray_policy 0
h1 echo still-alive
exit
"""


def session(dataplane: str) -> tuple[list[str], str]:
    """The output of SCRIPT, one chunk per command (split at the prompt), and stderr
    (where Mininet prints the output of node commands)."""
    proc = subprocess.run(
        [*PATHDIV, "net", "configs/class-probe.yaml", "--set", f"dataplane={dataplane}"],
        input=SCRIPT, capture_output=True, text=True, timeout=240, cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split("pathdiv> ")[1:], proc.stderr


def cores_used(chunk: str) -> list[str]:
    m = re.search(r"paths used: (\d) of 4; cores ((?:c\d ?)+)", chunk)
    assert m, chunk
    return m.group(2).split()


@pytest.fixture(params=["nftables", "bmv2"])
def dataplane(request, root_fabric) -> str:
    if request.param == "bmv2":
        from pathdiv.experiments.dataplane.bmv2.plane import find_p4_tools

        tools, reason = find_p4_tools()
        if tools is None:
            pytest.skip(f"bmv2 not available: {reason}")
    return request.param


def test_lab_cli_shows_paths_counters_modes_and_flows(dataplane: str) -> None:
    out, err = session(dataplane)
    (paths0, ecmp, paths1, counters, idle, static, static_flow, spray, spray_flow,
     paths2, bad_host, bad_size, bad_mode, p4_table, p4_register, *_rest) = out

    # paths before traffic: the four equal-cost paths, one per core
    assert "4 equal-cost path(s) h1 -> h16" in paths0
    assert [f"c{i}" for i in range(1, 5)] == re.findall(r"a\d > (c\d) > a", paths0)

    # ECMP: one 2 MB TCP flow, its FCT and goodput reported, one core (the rate itself is
    # the wall clock's and depends on the host's load: benchmarks/, never a test)
    assert re.search(r"FCT \d+\.\d+ s, goodput \d+\.\d+ Mbit/s", ecmp), ecmp
    (core,) = cores_used(ecmp)
    assert "1 of 4 path(s) carried it" in paths1
    assert re.search(rf"a\d > {core} > a\d > e8 > h16 +\d.* MB  carried", paths1), paths1

    # counters: the flow's 6 links since start; the heat map marks its core link
    assert re.search(r"^h1-e1 +host +\d{7} ", counters, re.M), counters
    assert "core-agg" in counters and "@" in counters
    assert "no link carried traffic since the last `counters`" in idle

    # static pins the flow to one core; spray (round robin) spreads it over all four
    assert f"mode: static on the {dataplane} data plane" in static
    assert len(cores_used(static_flow)) == 1
    assert f"mode: spray (roundrobin) on the {dataplane} data plane" in spray
    assert cores_used(spray_flow) == ["c1", "c2", "c3", "c4"]
    assert "4 of 4 path(s) carried it" in paths2

    # mistakes print one line and the CLI carries on (Mininet's own commands too)
    assert bad_host.strip() == "error: unknown host 'h99'; hosts are h1..h16"
    assert bad_size.strip().startswith("error: bad size '2XB'")
    assert bad_mode.strip().startswith("error: bad mode 'warp'")
    assert err.count("still-alive") == 1, err[-2000:]

    # inside a switch: e8's routes (its two hosts, the up group) and the spray policy
    if dataplane == "bmv2":
        # typed short, the dump is headed by the table's full name (bmv2 prints the
        # entries alone); a /32 per address of e8's two hosts (ports 0 and 1), its own
        # address dropped, the rest up the group
        assert p4_table.strip().startswith("table PathdivIngress.ipv4_lpm on e8:"), p4_table
        ports = re.findall(r"/32\s+Action entry: PathdivIngress\.forward - (\w+)", p4_table)
        assert sorted(set(ports)) == ["00", "01"], p4_table
        assert len(re.findall(r"/32\s+Action entry: PathdivIngress\.drop", p4_table)) == 1
        assert re.search(r"LPM +00000000/0\s+Action entry: PathdivIngress\.set_group - ",
                         p4_table), p4_table
        assert re.search(r"spray_policy\[0\]\s*=\s*1", p4_register), p4_register
    else:
        assert p4_table.strip().startswith(f"error: the {dataplane} plane has no switch "
                                           "command line")
