"""`api.network(config)`: the network a config asks for, on the kernel it names.

    with api.network("silent", {"hosts.kernel": "host", "hosts.transport": "tcp"}) as net:
        t = net.transfer("h1", "h16", 2_000_000)
        print(t.fct_s, t.goodput_mbps, t.paths)

`hosts.kernel: lab` from the host boots the lab kernel, whose guest builds the network
and serves the block's calls (lab.py: a `LabNetwork`); otherwise the network runs on
this process's kernel (live.py: a `KernelNetwork`), also inside the lab kernel's guest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pathdiv.experiments.api.lab import lab_network
from pathdiv.experiments.api.live import LiveNetwork, local_network
from pathdiv.experiments.api.plans import ConfigSource, Overrides, load_config
from pathdiv.experiments.execute.boot import guest_kernel_description


@contextmanager
def network(config: ConfigSource, overrides: Overrides = (),
            workdir: str | Path | None = None) -> Iterator[LiveNetwork]:
    """Build the network `config` describes (with `overrides`), yield it, tear it down,
    also when the block raises or is interrupted (Ctrl-C)."""
    cfg = load_config(config, overrides)
    cfg.fat_tree("`api.network`")
    if cfg.host_kernel == "lab" and guest_kernel_description() is None:
        with lab_network(cfg) as lab:
            yield lab
        return
    with local_network(cfg, workdir) as net:
        yield net
