"""`pathdiv net` and `pathdiv probe` with hosts.kernel: lab: the same command in the lab kernel.

The host boots the lab kernel (execute/boot.py) once for the command, with a scratch
folder as the share holding the resolved config, and the guest runs `pathdiv probe`
or `pathdiv net` on it, the same code as on the host kernel (the guest is told it is
the lab kernel, as runs are). `probe` is not interactive: its output is printed on the
host when the guest has finished. `net` runs on the user's terminal: the Mininet CLI
reads and writes the guest's console, which is that terminal (Ctrl-C reaches the CLI;
`exit` or Ctrl-D ends it and powers the guest off). Input from a pipe or file is typed
on a pseudo-terminal instead, its end as Ctrl-D.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.execute.boot import LabBoot, lab_kernel_image, prepare, say
from pathdiv.experiments.plan.memory import config_mb
from pathdiv.kernels.processes import remove_scratch, scratch_folder

COMMANDS = ("net", "probe")
CLI_MODULE = "pathdiv.experiments.cli"
PROBE_TIMEOUT_S = 1800.0  # wall seconds; the probe takes ~1 min of guest time at 20 Mbit/s


def command_args(command: str, config: Path, json_out: bool = False,
                 verbose: bool = False) -> list[str]:
    """The arguments of the pathdiv command (CLI_MODULE) the guest runs on the resolved
    config (pure)."""
    if command not in COMMANDS:
        raise ValueError(f"command {command!r} does not run in the lab kernel; "
                         f"only {', '.join(COMMANDS)} do")
    return [*(["-v"] if verbose else []), command, str(config),
            *(["--json"] if json_out else [])]


def run_in_lab_kernel(command: str, cfg: Config, json_out: bool = False,
                      verbose: bool = False, log: Callable[[str], None] = say) -> int:
    """Run `pathdiv COMMAND` on `cfg` in the lab kernel; return its exit status.

    Builds the lab kernel first when it is not cached (LabKernelUnavailable when it
    cannot be), and compiles the P4 programs when the config's plane is bmv2 or p4-ebpf here.
    `probe` prints the guest's stdout and stderr here when it ends.
    """
    image = lab_kernel_image(log)
    for line in prepare([cfg.dataplane]):  # the guest cannot write the cache
        if verbose:
            log(f"pathdiv: {line}")
    clock = str(cfg.data["lab"]["clock"])
    boot = LabBoot(image, clock, config_mb(cfg))
    share = scratch_folder("lab")
    try:
        config = share / "config.yaml"
        config.write_text(cfg.to_yaml())
        terminal = command == "net"
        if verbose or terminal:  # the CLI's banner comes once the network is up
            log(f"pathdiv: booting the lab kernel ({image.parent.name}, {clock} clock) for "
                f"`pathdiv {command}`")
        res = boot.run(CLI_MODULE, command_args(command, config, json_out, verbose), share,
                       None if terminal else PROBE_TIMEOUT_S, terminal=terminal)
        sys.stdout.write(res.stdout)
        sys.stdout.flush()
        sys.stderr.write(res.stderr)
        return res.returncode
    finally:
        remove_scratch(share)
