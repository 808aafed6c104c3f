"""One network for consecutive runs: which network a run gets, built or reset.

`NetworkKeeper.acquire` hands a run the network the previous run used when both runs
have the same `fabric.netstate.reuse_key` (topology, data plane, link conditions, ...),
the previous run ended normally and `network.reuse` is on; it is reset and verified
first (`network/reuse.py`). Otherwise, or when the verification finds what a reset
cannot undo, the old network is torn down and a new one built; the run's manifest says
which and why (`network` entry). `release` after each run says whether it ended
normally; `close` tears down what is kept, at the end of the plan.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError
from pathdiv.experiments.fabric.netstate import reuse_key, variant_of
from pathdiv.experiments.network.network import Network
from pathdiv.experiments.network.reuse import NetworkReuse
from pathdiv.experiments.running import NetworkError

log = logging.getLogger("pathdiv")


def missing_aliases(topo: Any, cfg: Config) -> str:
    """Why a network built with `topo` cannot serve `cfg`'s run ('' when it can): every
    extra MPTCP subflow needs an alias address on its host, added when the network is
    built (FatTree.aliases_per_host = subflows - 1; none for TCP). A network built for
    fewer cannot give the run its subflows; one with more serves it (TCP and MPTCP use
    the primary address for everything else)."""
    have = int(getattr(topo, "aliases_per_host", 0))
    need = cfg.subflows - 1
    return (f"the run needs {need} alias address(es) per host for its subflows, the "
            f"network was built with {have}") if need > have else ""


class NetworkKeeper:
    """Keeps the last run's network for the next run that can use it."""

    def __init__(self) -> None:
        self.net: Network | None = None
        self.reuse: NetworkReuse | None = None  # the kept network's reference and reset
        self.key: str | None = None
        self.clean = False  # the run that used it ended normally
        self.runs = 0  # runs the kept network served
        # runs the caller executes after the current one (None: unknown). With none left,
        # nothing can reuse the network, so no reference is taken: a snapshot of every
        # node, which at k=16 ran 10 min of guest CPU and tripped the frozen-guest
        # watchdog (docs/benchmarks.md, "Bigger fat trees")
        self.runs_after: int | None = None

    def acquire(self, cfg: Config, plane: type[DataPlane], workdir: Path
                ) -> tuple[Network, dict[str, Any]]:
        """(a network for `cfg`'s run writing into `workdir`, the manifest's `network`
        entry: reused or built, why built, what the reset found and repaired)."""
        wanted = bool(cfg.data.get("network", {}).get("reuse", False))
        key = reuse_key(cfg.data, getattr(plane, "name", "")) if wanted else None
        info: dict[str, Any] = {"reused": False, "variant": variant_of(cfg.data)}
        if self.net is not None:
            if key is None or key != self.key:
                info["built_because"] = ("network.reuse is false" if not wanted else
                                         "the data plane is rebuilt every run"
                                         if key is None else
                                         "topology, data plane or conditions differ")
            elif not self.clean:
                info["built_because"] = "the previous run did not end normally"
            elif missing_aliases(self.net.topo, cfg):
                info["built_because"] = missing_aliases(self.net.topo, cfg)
            else:
                assert self.reuse is not None  # taken when the key was kept
                try:
                    info.update(self.reuse.reset_for(cfg, workdir), reused=True,
                                runs_before=self.runs)
                    self.runs += 1
                    self.clean = False
                    return self.net, info
                except (NetworkError, DataPlaneError) as exc:
                    info["built_because"] = f"the reset left it dirty: {exc}"
                    log.warning("rebuilding the network: %s", exc)
        else:
            info["built_because"] = "first run"
        self.close()
        net = Network(cfg, plane, workdir)
        net.__enter__()
        self.net, self.key, self.runs, self.clean = net, key, 1, False
        if key is not None and self.runs_after == 0:
            info["reference"] = "not taken: no later run of this boot can reuse the network"
            self.key = None
        elif key is not None:
            self.reuse = NetworkReuse(net)
            mismatch = self.reuse.take_reference()
            if mismatch:  # netstate's model of a clean node is wrong: never reuse it
                info["reference_problems"] = mismatch[:10]
                self.key = None
        return net, info

    def release(self, ended_normally: bool) -> None:
        """After a run: keep the network for the next run only when it ended normally
        and may be reused; tear it down otherwise."""
        self.clean = ended_normally and self.key is not None
        if not self.clean:
            self.close()

    def close(self) -> None:
        if self.net is not None:
            self.net.stop()
        self.net, self.reuse, self.key, self.clean = None, None, None, False
