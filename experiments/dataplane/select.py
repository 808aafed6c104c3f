"""Which data plane each run gets, and why; the planes' implementations by registry name.

`dataplane: nftables | bmv2 | p4-ebpf` (or an older name of one) means that plane: a run
gets it where its tools are found and it can carry the run, and is refused otherwise.
`dataplane: auto` chooses per run (`choose`), from the registry (`config/planes.py`):

1. the P4 planes whose tools are found here and which can carry the run (its switching
   mode, its link conditions) are the candidates;
2. a candidate is affordable when the run's cell (its configuration, with every flow type
   of the config) is expected to take at most AUTO_BOUND (1.5) times its time on the
   nftables plane, by the default costs of `plan/estimate.py`. The same on every machine,
   so the host and the lab kernel's guest, which chooses again for each run it executes,
   agree; and judged on the cell, so the query, short and long runs of one configuration
   (and every repetition) land on one plane, where a run-by-run bound could put a cheap
   query run of a plane that rebuilds its network every run (bmv2) on another plane
   than its long runs;
3. the cheapest affordable candidate wins (ties: registry order); with none, the
   nftables plane, unless it cannot carry the run: then the cheapest candidate, whatever
   it costs, and the reason says how much.

On this project's reference machine that puts the reference plans' lab-kernel runs on
p4-ebpf where its tools are found, never on bmv2 (11x on a query run, 64x on a long one),
and host-kernel runs on p4-ebpf, or on bmv2 where p4-ebpf's tools are missing (a few
seconds of switch start-up per run, the traffic at the link rate). Every choice names the
one thing to install to get the fastest P4 plane when the run is not on it.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

from pathdiv.experiments.config.load import Config
from pathdiv.experiments.config.planes import (
    AUTO,
    AUTO_BOUND,
    BASELINE,
    PLANES,
    Plane,
    alias_note,
    lookup,
    refusals,
)
from pathdiv.experiments.dataplane.base import DataPlane, DataPlaneError, PlaneImplementation
from pathdiv.experiments.fabric.linkcap import LinkcapError, build_linkcap
from pathdiv.experiments.plan.estimate import boot_of, expected_run_s
from pathdiv.experiments.plan.lanes import own_boot
from pathdiv.experiments.plan.runs import Run

PACKAGE = "pathdiv.experiments.dataplane"


@cache
def _module_implementation(module: str) -> PlaneImplementation:
    impl = getattr(importlib.import_module(f"{PACKAGE}.{module}"), "IMPLEMENTATION", None)
    if not isinstance(impl, PlaneImplementation):
        raise TypeError(f"{PACKAGE}.{module} has no IMPLEMENTATION (a PlaneImplementation)")
    return impl


def implementation(plane: str | Plane) -> PlaneImplementation:
    """The implementation of a plane (or of the plane an alias names)."""
    entry = plane if isinstance(plane, Plane) else lookup(plane)
    return _module_implementation(entry.implementation)


Found = dict[str, tuple[bool, str]]  # plane -> (tools found, where or what is missing)


def find_tools(env: Mapping[str, str] | None = None) -> Found:
    """Every plane's tools, looked for in `env` (this process's environment)."""
    env = os.environ if env is None else env
    out: Found = {}
    for name, plane in PLANES.items():
        tools, text = implementation(plane).find_tools(env)
        out[name] = (tools is not None, text)
    return out


@dataclass(frozen=True)
class Choice:
    """The plane one run gets here, and why."""

    asked: str          # the config's `dataplane:` value
    plane: str | None   # the plane the run runs on; None: no plane here can run it
    rule: str           # why, in the same words for runs chosen alike
    ratio: float = 1.0  # the run's expected wall time on `plane` over the nftables plane's
    cell_ratio: float = 1.0  # the same for its cell, every flow type (what auto judges)
    found: str = ""     # where its tools are
    hint: str = ""      # the one thing to install to get the fastest P4 plane ('' on it)
    # auto: the P4 planes found that carry the run but were above the bound, with the
    # cell ratio each would have had
    too_dear: tuple[tuple[str, float], ...] = ()

    @property
    def reason(self) -> str:
        """One line: the plane, the rule, the cost, the tools (for manifests and check)."""
        head = f"{self.plane or 'no plane'}: {self.rule}"
        if self.plane is not None and self.plane != BASELINE:
            head += (f"; expected {times(self.ratio)}x the {BASELINE} plane's time (its "
                     f"cell {times(self.cell_ratio)}x)")
        dear = "; ".join(f"{p} would take {times(r)}x per cell" for p, r in self.too_dear)
        return head + (f" ({dear})" if dear else "") + (f"; {self.found}" if self.found else "")

    def implementation(self) -> PlaneImplementation:
        if self.plane is None:
            raise DataPlaneError(f"dataplane: {self.asked}: {self.rule}")
        return implementation(self.plane)

    def switches(self) -> type[DataPlane]:
        """The class that drives a network's switches on this plane; DataPlaneError with
        the reason when no plane here can run the run."""
        return self.implementation().switches


def times(ratio: float) -> str:
    """A ratio to two figures: '1.2', '64', '170'."""
    return f"{ratio:.2g}" if ratio < 10 else f"{ratio:.0f}"


def ratio(run: Run, plane: str) -> float:
    """The run's expected wall time on `plane` over its time on the nftables plane (the
    default costs: the same on every machine)."""
    base = expected_run_s(run, BASELINE)
    return expected_run_s(run, plane) / base if base > 0 else 1.0


def cell_ratio(run: Run, plane: str) -> float:
    """As `ratio`, for the run's cell: its configuration with every flow type, each run
    with the boot of the lab kernel it starts when it has one to itself (and, on a plane
    whose networks are reused, the build that boot's first run pays)."""
    cell = [dataclasses.replace(run, flow_type=flow) for flow in run.config.flow_sizes()]

    def cost(on: str) -> float:
        return sum(expected_run_s(r, on) + (boot_of(r, on) if own_boot(r) else 0.0)
                   for r in cell)

    base = cost(BASELINE)
    return cost(plane) / base if base > 0 else 1.0


def _fastest_p4(run: Run) -> Plane | None:
    """The P4 plane that carries `run` in the least expected time, whatever is installed."""
    p4 = [p for p in PLANES.values() if p.p4 and not refusals(p, run.config.data)]
    return min(p4, key=lambda p: cell_ratio(run, p.name)) if p4 else None


def choose(run: Run, found: Found | None = None) -> Choice:
    """The plane `run` gets on this machine (module docstring: the rule of auto)."""
    return _choose(run.config, run, found if found is not None else find_tools())


def choose_for_config(cfg: Config, found: Found | None = None) -> Choice:
    """The plane a live network of `cfg` gets (`pathdiv net`, `probe`, the Python API):
    as a run of the config's first flow type would."""
    flow = next(iter(cfg.flow_sizes()))
    run = Run(run_id="live", order=0, repetition=1, flow_type=flow, factors={},
              seed=cfg.seed, config=cfg)
    return _choose(cfg, run, found if found is not None else find_tools())


def _choose(cfg: Config, run: Run, found: Found) -> Choice:
    asked = cfg.dataplane
    if cfg.topology_kind == "paths":
        return Choice(asked, BASELINE, "parallel paths: plain routing between routers, no "
                      "switches of a data plane")
    fastest = _fastest_p4(run)

    def hint_for(plane: str | None) -> str:
        """What to install: the fastest P4 plane, where it is not found here."""
        if fastest is None or fastest.name == plane or found[fastest.name][0]:
            return ""
        return f"for P4 at the {BASELINE} plane's pace: {fastest.install}"

    def chosen(plane: Plane, rule: str, dear: tuple[tuple[str, float], ...] = ()) -> Choice:
        return Choice(asked, plane.name, rule, ratio(run, plane.name),
                      cell_ratio(run, plane.name), found[plane.name][1],
                      hint_for(plane.name) if plane.p4 or asked == AUTO else "", dear)

    if asked != AUTO:
        plane = lookup(asked)
        ok, where = found[plane.name]
        if not ok:
            return Choice(asked, None, f"dataplane: {asked} was asked for, but {where}; "
                          f"install: {plane.install}, or use dataplane: auto")
        problems = refusals(plane, cfg.data)
        if problems:
            return Choice(asked, None, "; ".join(problems))
        note = alias_note(asked)
        return chosen(plane, "as configured" + (f"; {note}" if note else ""))
    passed: list[str] = []
    carried: list[tuple[float, Plane]] = []
    for plane in PLANES.values():
        if not plane.p4:
            continue
        ok, where = found[plane.name]
        problems = refusals(plane, cfg.data)
        if not ok:
            passed.append(f"{plane.name}: {where}")
        elif problems:
            passed.append(f"{plane.name}: {'; '.join(problems)}")
        else:
            carried.append((cell_ratio(run, plane.name), plane))
    bound = f"auto's bound of {AUTO_BOUND}x the {BASELINE} plane's time"
    affordable = [c for c in carried if c[0] <= AUTO_BOUND]
    if affordable:
        _, plane = min(affordable, key=lambda c: c[0])  # min keeps registry order on ties
        return chosen(plane, f"auto: the cheapest P4 plane found, within {bound}")
    passed += [f"{p.name}: above {bound}" for _, p in carried]
    dear = tuple((p.name, r) for r, p in carried)
    base = PLANES[BASELINE]
    base_problems = refusals(base, cfg.data)
    if not base_problems:
        return chosen(base, "auto: no P4 plane here carries it within the bound (" +
                      "; ".join(passed) + ")", dear)
    if carried:
        _, plane = min(carried, key=lambda c: c[0])
        return chosen(plane, "auto: the only plane found that carries it ("
                      + "; ".join(base_problems) + "), above the bound")
    hint = hint_for(None)
    return Choice(asked, None, "no plane here can run it: " + "; ".join(
        [*base_problems, *passed]) + (f"; {hint}" if hint else ""))


def choose_runs(runs: Iterable[Run], found: Found | None = None) -> dict[str, Choice]:
    """Run id -> its choice, the tools looked for once."""
    found = found if found is not None else find_tools()
    return {r.run_id: choose(r, found) for r in runs}


def plane_problems(runs: list[Run], found: Found | None = None) -> list[str]:
    """Runs no plane here can run, one line per distinct reason (`pathdiv check`)."""
    out = []
    for run, choice in zip(runs, choose_runs(runs, found).values(), strict=True):
        if choice.plane is None:
            line = f"dataplane: {run.config.dataplane}: {choice.rule}"
            if line not in out:
                out.append(line)
    return out


def guest_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables the lab kernel's guest needs to find every plane's tools
    (each entry's `guest_env`), as this process has them."""
    environ = os.environ if environ is None else environ
    names = dict.fromkeys(n for p in PLANES.values() for n in p.guest_env)
    return {n: environ[n] for n in names if environ.get(n)}


def prepare_for_lab_kernel(wanted: Iterable[str]) -> list[str]:
    """Do on the host what cannot be done in the lab kernel, whose view of the host's
    files is read-only: build the link captures' program (fabric/linkcap.py; where it
    cannot be, the guest's runs capture with tcpdump, and the line says why), and prepare
    each plane the `wanted` `dataplane:` values may run on here (its programs compiled
    into their cache): an explicit plane, or for auto every P4 plane whose tools are
    found (the guest chooses per run). One line per thing done; DataPlaneError naming
    what failed."""
    done = []
    try:
        done.append(f"link captures: {build_linkcap()}")
    except LinkcapError as exc:
        done.append(f"link captures: tcpdump ({exc})")
    names: list[str] = []
    found: Found | None = None
    for value in sorted(set(wanted)):
        if value != AUTO:
            names.append(lookup(value).name)
            continue
        found = found if found is not None else find_tools()
        names += [n for n, p in PLANES.items() if p.p4 and found[n][0]]
    for name in dict.fromkeys(names):
        prepare = implementation(name).prepare_for_lab_kernel
        if prepare is not None:
            done.append(prepare())
    return done
