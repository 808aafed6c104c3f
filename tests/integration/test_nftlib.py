"""nftables from pathdiv's own process (fabric/nftlib.py): a ruleset loaded into a
namespace is what `nft -f` loads, its listing is what `nft -j list ruleset` prints
there, a bad file fails with nft's own message, and the process is back in its own
namespace after each, also when one fails; and a load works while the process holds
more than 1024 descriptors (libnftables select()s on its socket: fabric/lowfds.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pathdiv.experiments.fabric.nftlib import Nft, NftError

pytestmark = pytest.mark.root

RULESET = """
table inet pd_probe {
  counter hits { }
  set seen { type ipv4_addr; elements = { 10.0.0.1, 10.0.0.2 }; }
  chain input {
    type filter hook input priority 0; policy accept;
    tcp dport 5001 counter accept
    ip saddr @seen drop
  }
}
table netdev pd_cond {
  chain in_x {
    type filter hook ingress device lo priority 0;
    meta mark 3 counter drop
  }
}
"""


def test_a_ruleset_loaded_and_read_here_is_what_nft_loads_and_prints_there(
        root_fabric, tmp_path) -> None:
    reader = Nft.open()
    if reader is None:
        pytest.skip("libnftables.so.1 cannot be loaded here (apt install libnftables1)")
    holder = subprocess.Popen(["unshare", "-n", "sleep", "60"])
    try:
        pid = holder.pid
        subprocess.run(["sleep", "0.2"], check=True)
        home = os.readlink("/proc/thread-self/ns/net")
        (tmp_path / "rules.nft").write_text(RULESET)
        reader.load(pid, tmp_path / "rules.nft")
        assert os.readlink("/proc/thread-self/ns/net") == home
        (tmp_path / "bad.nft").write_text("table inet pd_bad {\n  chain c { nonsense }\n}\n")
        with pytest.raises(NftError, match=r"bad\.nft:2:.*Error"):
            reader.load(pid, tmp_path / "bad.nft")
        assert os.readlink("/proc/thread-self/ns/net") == home
        cli = subprocess.run(["nsenter", "-t", str(pid), "-n", "nft", "-j", "list", "ruleset"],
                             capture_output=True, text=True, check=True).stdout
        ours = reader.ruleset(pid)
        assert "pd_probe" in ours and "pd_cond" in ours and "pd_bad" not in ours
        assert ours.strip() == cli.strip()
        assert os.readlink("/proc/thread-self/ns/net") == home
        assert "pd_probe" not in reader.ruleset(os.getpid())
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(NftError, match=f"process {pid}"):
        reader.ruleset(pid)
    assert os.readlink("/proc/thread-self/ns/net") == home


# A child process (an abort must fail the test, not end pytest) that holds BUSY
# descriptors, as a big network's process does (two per node), then loads a ruleset into
# a fresh namespace and reads it back through libnftables. EARLY: the reserve of low
# numbers is taken before the descriptors (as Network.start takes it before the nodes).
CHILD = """
import os, resource, sys
from pathlib import Path
from pathdiv.experiments.fabric import nftlib
early, pid, rules = sys.argv[1] == "early", int(sys.argv[2]), Path(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (4096, max(4096, resource.getrlimit(
    resource.RLIMIT_NOFILE)[1])))
nft = nftlib.Nft.open() if early else None
while os.open(os.devnull, os.O_RDONLY) < 1100:
    pass
nft = nft or nftlib.Nft.open()
nft.load(pid, rules)
print("pd_probe" in nft.ruleset(pid), nft.programs)
"""


@pytest.mark.parametrize("early", [True, False], ids=["reserve", "late-reserve"])
def test_a_ruleset_loads_while_this_process_holds_1100_descriptors(root_fabric, tmp_path,
                                                                    early) -> None:
    """libnftables select()s on its netlink socket (glibc aborts for a number >= 1024: a
    k=16 run died so). With the reserve the library gets a low number; taken too late,
    the calls run `nft` (both say the table is there)."""
    if Nft.open() is None:
        pytest.skip("libnftables.so.1 cannot be loaded here (apt install libnftables1)")
    holder = subprocess.Popen(["unshare", "-n", "sleep", "60"])
    try:
        subprocess.run(["sleep", "0.2"], check=True)
        (tmp_path / "rules.nft").write_text(RULESET)
        done = subprocess.run([sys.executable, "-c", CHILD, "early" if early else "late",
                               str(holder.pid), str(tmp_path / "rules.nft")],
                              capture_output=True, text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-500:]}"
    assert done.stdout.split() == ["True", "0" if early else "2"]
