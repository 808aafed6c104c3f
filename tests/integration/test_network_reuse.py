"""One network for several runs, on this machine's kernel: a network a run left dirty
(a queue changed, an MPTCP endpoint added, a process left behind, a variant's settings)
is reset and verified clean before the next run uses it; one with a route nobody may
leave is rebuilt, and the manifest's `network` entry says why. On each plane whose
networks are reused: nftables, and p4-ebpf (where its tools are found), whose switch maps
are read back too: an entry a run changed in one switch's map makes a new network."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from pathdiv.experiments.config.load import load
from pathdiv.experiments.execute.keeper import NetworkKeeper
from tests.conftest import REPO, dataplane_class

pytestmark = pytest.mark.root

OVERRIDES = {"dataplane": "nftables", "hosts.kernel": "host", "switching.mode": "ecmp",
             "hosts.transport": "mptcp", "hosts.scheduler": "default",
             "network.reuse": "true"}  # opt-in this release


def config(**more):
    return load(REPO / "configs" / "class-probe.yaml",
                [f"{k}={v}" for k, v in {**OVERRIDES, **more}.items()])


@pytest.mark.parametrize("plane", ["nftables", "p4-ebpf"])
def test_a_dirty_run_is_cleaned_or_its_network_rebuilt(root_fabric, tmp_path, plane):
    cls = dataplane_class(plane)  # skips with the reason when the plane's tools are missing
    base = {"dataplane": plane}
    keeper = NetworkKeeper()
    try:
        net, info = keeper.acquire(config(**base), cls, tmp_path / "r1")
        assert not info["reused"] and "reference_problems" not in info
        host = net.topo.hosts[0]
        intf = net.topo.links_of(host)[0].port_of(host).intf
        # what a careless run leaves: a changed queue, an endpoint, a process, and the
        # variant's own settings (4 subflows' endpoints, ecmp rules) for a TCP run next
        net.cmd(host, ["tc", "qdisc", "replace", "dev", intf, "parent", "1:1", "handle",
                       "10:", "pfifo", "limit", "7"])
        net.cmd(host, ["ip", "mptcp", "endpoint", "add", "10.99.0.1", "dev", intf, "signal"])
        net.node(host).cmd("sleep 600 &")
        # until the shell's child has become `sleep` (before its exec it is named as the
        # shell, and is killed as such)
        deadline = time.monotonic() + 10
        while "sleep" not in net.node(host).cmd("ps -o comm= -p $!") and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        keeper.release(True)

        net2, info = keeper.acquire(config(**base, **{"switching.mode": "static",
                                                       "hosts.transport": "tcp"}),
                                    cls, tmp_path / "r2")
        assert net2 is net and info["reused"], info
        assert "qdisc" in info["found"][host]  # set again; the process was killed first
        assert any("sleep" in p for p in info["killed"][host])
        assert keeper.reuse.check() == {}  # verified clean after the reset
        assert net.cmd(host, ["ip", "mptcp", "endpoint", "show"]).strip() == ""
        assert "limit 100" in net.cmd(host, ["tc", "qdisc", "show", "dev", intf])

        # a route no run may leave: the reset cannot vouch for it, so a new network
        switch = net.topo.switches[0]
        net.cmd(switch, ["ip", "route", "add", "192.0.2.0/24", "dev",
                         net.topo.links_of(switch)[0].port_of(switch).intf])
        keeper.release(True)
        net3, info = keeper.acquire(config(**base), cls, tmp_path / "r3")
        assert net3 is not net and not info["reused"]
        assert "192.0.2.0/24" in info["built_because"] and switch in info["built_because"]
        assert keeper.reuse.check() == {}
        if plane == "p4-ebpf":  # an entry of one switch's maps changed under the plane
            dp = net3.plane
            edge = net3.topo.switches[-1]
            write = dp.writes[edge][0]
            fd = dp.bpf_.open_pinned(dp.loaded[edge].maps[write.map_name])
            try:
                dp.bpf_.update(fd, write.key, bytes(len(write.value)), "a planted change")
            finally:
                os.close(fd)
            keeper.release(True)
            net4, info = keeper.acquire(config(**base), cls, tmp_path / "r4")
            assert net4 is not net3 and not info["reused"]
            assert edge in info["built_because"] and "differ from what was written" in \
                info["built_because"], info
            assert keeper.reuse.check() == {}
    finally:
        keeper.close()
    left = subprocess.run(["pgrep", "-f", "^sleep 600$"], capture_output=True, text=True)
    assert left.stdout.strip() == ""
