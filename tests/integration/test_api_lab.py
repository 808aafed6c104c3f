"""`pathdiv.experiments.api` with hosts.kernel: lab: `api.network` boots the lab kernel,
whose guest builds the fat tree and serves the block's requests (experiments/api/lab.py).
One transfer returns FCT, goodput and the paths the topology has; the guest and its
scratch folder are gone after the block, also when the block raises."""

from __future__ import annotations

import glob
import os

import pytest

from pathdiv.experiments import api
from pathdiv.experiments.api.lab import LabNetwork
from pathdiv.kernels.processes import owned_processes
from tests.conftest import REPO

pytestmark = [pytest.mark.root, pytest.mark.slow]

# class-probe: k=4, 20 Mbit/s links; spraying puts one TCP flow on all four core paths
CONFIG = str(REPO / "configs" / "class-probe.yaml")
LAB = {"hosts.kernel": "lab", "dataplane": "nftables", "hosts.transport": "tcp"}


def left_behind() -> list[str]:
    """UML processes of this test process and api scratch folders still there."""
    procs = [str(p) for p, owner in owned_processes() if owner == os.getpid()]
    return procs + glob.glob("/tmp/pathdiv-api-lab-*")


def test_one_transfer_in_the_lab_kernel(lab_kernel, root_fabric, tmp_path):
    with api.network(CONFIG, {**LAB, "switching.mode": "spray"}) as net:
        assert isinstance(net, LabNetwork)
        assert net.kernel_release.endswith("-pathdiv"), net.kernel_release
        assert owned_processes(), "UML should run while the block does"
        assert net.cmd("h16", ["uname", "-r"]).strip() == net.kernel_release
        assert len(net.paths("h1", "h16")) == 4
        with net.capture(tmp_path / "pcaps") as folder:
            t = net.transfer("h1", "h16", "1MB")
        with pytest.raises(KeyError, match="h99"):
            net.transfer("h1", "h99", "1MB")
        counters = net.link_bytes()
    assert t.received == 1_000_000 and t.fct_s > 0
    # the virtual clock: links are the only bottleneck, so near their 20 Mbit/s
    assert 10 < t.goodput_mbps <= 20, t.goodput_mbps
    assert sorted(t.paths) == sorted(net.topo.paths("h1", "h16"))  # spraying: all four
    assert all(n > 100_000 for n in t.path_bytes.values()), t.path_bytes
    assert counters[("e8", "h16")] >= 1_000_000  # h16's downlink carried the data
    assert 0 < counters[("h16", "e8")] < counters[("e8", "h16")] / 10  # its uplink ACKs
    assert len(list(folder.glob("*.pcap"))) == len(net.topo.links)
    assert net.draw(t).count('class="path"') == 4
    assert left_behind() == []


def test_the_lab_kernel_stops_when_the_block_raises(lab_kernel, root_fabric):
    with pytest.raises(RuntimeError, match="user code failed"):
        with api.network(CONFIG, LAB) as net:
            assert net.cmd("h1", ["true"]) == ""
            raise RuntimeError("user code failed")
    assert left_behind() == []
