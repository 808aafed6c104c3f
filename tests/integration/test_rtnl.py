"""A node's qdiscs and classes read from pathdiv's own process (fabric/rtnl.py), as the
check between runs reads them: the same with traffic through them (counters are not
configuration), different after a class's rate changed, and what `tc` lists."""

from __future__ import annotations

import json
import subprocess

import pytest

from pathdiv.experiments.fabric.rtnl import RouteSocket

pytestmark = pytest.mark.root

SETUP = """
ip link add rt0 type veth peer name rt1
ip addr add 10.97.0.1/24 dev rt0
ip addr add 10.97.0.2/24 dev rt1
ip link set rt0 up; ip link set rt1 up; ip link set lo up
tc qdisc add dev rt0 root handle 1: htb default 1
tc class add dev rt0 parent 1: classid 1:1 htb rate 10mbit
tc qdisc add dev rt0 parent 1:1 handle 10: pfifo limit 50
"""


def ns(pid: int, script: str) -> None:
    subprocess.run(["nsenter", "-t", str(pid), "-n", "sh", "-ec", script], check=True,
                   capture_output=True)


def test_the_tc_section_follows_configuration_not_traffic(root_fabric) -> None:
    holder = subprocess.Popen(["unshare", "-n", "sleep", "60"])
    try:
        pid = holder.pid
        subprocess.run(["sleep", "0.2"], check=True)
        ns(pid, SETUP)
        with RouteSocket(pid) as rtnl:
            first = rtnl.tc(["rt0", "rt1"])
            qdiscs, rt0_classes, rt1_classes = (json.loads(x) for x in first.splitlines())
            listed = json.loads(subprocess.run(
                ["nsenter", "-t", str(pid), "-n", "tc", "-j", "qdisc", "show"],
                capture_output=True, text=True, check=True).stdout)
            assert sorted((q["dev"], q["handle"], q["kind"]) for q in qdiscs) == sorted(
                (q["dev"], q["handle"], q["kind"]) for q in listed)
            assert [(c["handle"], c["parent"], c["leaf"]) for c in rt0_classes] == [
                ("1:1", "root", "10:")]  # tc says "class htb 1:1 root leaf 10:" too
            assert rt1_classes == []
            # through rt0's qdisc: a neighbour no one answers for
            ns(pid, "ip neigh add 10.97.0.9 lladdr 02:00:00:00:00:09 dev rt0; "
                    "ping -c 5 -i 0.2 -W 1 10.97.0.9 || true")
            sent = json.loads(subprocess.run(
                ["nsenter", "-t", str(pid), "-n", "tc", "-s", "-j", "qdisc", "show", "dev",
                 "rt0"], capture_output=True, text=True, check=True).stdout)
            assert max(q["packets"] for q in sent) >= 5
            assert rtnl.tc(["rt0", "rt1"]) == first
            ns(pid, "tc class change dev rt0 parent 1: classid 1:1 htb rate 20mbit")
            assert rtnl.tc(["rt0", "rt1"]) != first
    finally:
        holder.kill()
        holder.wait()
