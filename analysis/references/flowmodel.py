"""A flow-level model of a permutation traffic matrix on a fat tree (pure): the rates
that max-min fair sharing gives each flow, from the topology object alone.

The second reference beside Raiciu et al.'s figure (SIGCOMM 2011): what the same
permutations, on the same fat tree, give when the transport is an ideal fluid:

  single path   each flow on one equal-cost path drawn at random (ECMP's hash, as the
                paper's "random load balancing"), rates max-min fair over the links
                (progressive filling);
  n subflows    each flow may send on up to n paths drawn at random (with replacement:
                each subflow's 5-tuple is hashed on its own; two subflows on one path
                are one path here) and splits its rate over them as it likes; rates
                max-min fair over the flows (the resource pooling that MPTCP's coupled
                increase approximates: a flow moves its traffic to its least congested
                paths);
  spraying      each flow's rate is split evenly over all its equal-cost paths (packets
                sprayed at random), rates max-min fair.

Flows go from server to client (the data of a fetch); every link has one capacity in
each direction; rates are shares of it (1.0: the link rate). In a full-bisection fat
tree the optimum of a permutation is 1.0 for every flow, which is what "share of the
optimum" divides by. `long_run` gives the rates while every flow is active (the paper's
long-running flows). For transfers of one size started together (what a permutation run
sends) the mean of size / completion time is the same: under max-min fairness a flow
bottlenecked at a link has the highest rate there, so the flows that finish first free
no capacity a slower flow was waiting for, and no rate changes before its flow ends
(tests/unit/test_flowmodel.py checks it against a fluid simulation).

Multipath max-min fairness is a sequence of linear programs (scipy's HiGHS): raise
the smallest rate of the flows not yet fixed as far as the links allow, then fix those
flows that cannot go higher however the others split their traffic; repeat.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from pathdiv.topologies.fattree import FatTree

EPS = 1e-7
RANDOM_ROUNDS = 3
Direction = tuple[str, str]


@dataclass(frozen=True)
class Flow:
    """One flow's routes: each a dict link direction -> share of the flow's rate on it
    when all of it takes that route (a path: 1.0 on each of its links; spraying: one
    route with each link's share of the paths). `adaptive`: the flow splits its rate
    over its routes as it likes (MPTCP); otherwise it has exactly one route."""

    routes: tuple[dict[Direction, float], ...]
    adaptive: bool = False


def path_links(path: Sequence[str]) -> dict[Direction, float]:
    return {(u, v): 1.0 for u, v in itertools.pairwise(path)}


def flows_for(topo: FatTree, pairs: Sequence[tuple[str, str]], kind: str, subflows: int,
              rng: random.Random) -> list[Flow]:
    """The flows of a permutation (client, server pairs; data from server to client):
    `kind` single (one random path), multipath (`subflows` random paths, adaptive) or
    spray (every path, evenly)."""
    out = []
    for client, server in pairs:
        paths = topo.paths(server, client)
        if kind == "single":
            out.append(Flow((path_links(rng.choice(paths)),)))
        elif kind == "multipath":
            chosen = sorted({rng.randrange(len(paths)) for _ in range(subflows)})
            out.append(Flow(tuple(path_links(paths[i]) for i in chosen), adaptive=True))
        elif kind == "spray":
            share: dict[Direction, float] = {}
            for path in paths:
                for d in path_links(path):
                    share[d] = share.get(d, 0.0) + 1.0 / len(paths)
            out.append(Flow((share,)))
        else:
            raise ValueError(f"unknown kind {kind!r}: single, multipath or spray")
    return out


def _water_fill(flows: Sequence[Flow], active: Sequence[int]) -> dict[int, float]:
    """Max-min fair rates of single-route flows (progressive filling)."""
    rate = {f: 0.0 for f in active}
    load: dict[Direction, float] = {}
    frozen: set[int] = set()
    while len(frozen) < len(active):
        free = [f for f in active if f not in frozen]
        weight: dict[Direction, float] = {}
        for f in free:
            for d, a in flows[f].routes[0].items():
                weight[d] = weight.get(d, 0.0) + a
        step = min((1.0 - load.get(d, 0.0)) / w for d, w in weight.items() if w > 0)
        step = max(step, 0.0)
        for f in free:
            rate[f] += step
        for d, w in weight.items():
            load[d] = load.get(d, 0.0) + w * step
        full = {d for d, w in weight.items() if w > 0 and load[d] >= 1.0 - EPS}
        for f in free:
            if any(d in full for d in flows[f].routes[0]):
                frozen.add(f)
    return rate


class _Program:
    """The linear programs of multipath max-min fairness over `active` flows: one
    variable per (flow, route), then one per flow for its rate above the level."""

    def __init__(self, flows: Sequence[Flow], active: Sequence[int]) -> None:
        self.columns = [(f, r) for f in active for r in range(len(flows[f].routes))]
        links = sorted({d for f in active for route in flows[f].routes for d in route})
        row = {d: i for i, d in enumerate(links)}
        entries = [(row[d], j, a) for j, (f, r) in enumerate(self.columns)
                    for d, a in flows[f].routes[r].items()]
        rows, cols, vals = zip(*entries, strict=True) if entries else ((), (), ())
        self.a_links = sparse.csr_array((vals, (rows, cols)),
                                        shape=(len(links), len(self.columns)))
        self.active = list(active)
        self.of_flow = {f: [j for j, (g, _) in enumerate(self.columns) if g == f]
                        for f in active}

    def solve(self, fixed: dict[int, float], floor: float, objective: dict[int, float],
              cap: float | None = None) -> np.ndarray | None:
        """Route variables, then an extra variable s_f per flow not in `fixed`: each
        such flow's rate is floor + s_f (0 <= s_f <= cap); maximise the weighted sum of
        s_f (`objective`). None when infeasible."""
        free = [f for f in self.active if f not in fixed]
        n, m = len(self.columns), len(free)
        c = np.zeros(n + m)
        for i, f in enumerate(free):
            c[n + i] = -objective.get(f, 0.0)
        a_ub = sparse.hstack([self.a_links, sparse.csr_array((self.a_links.shape[0], m))])
        b_ub = np.ones(self.a_links.shape[0])
        a_eq = sparse.lil_array((len(self.active), n + m))
        b_eq = np.zeros(len(self.active))
        slot = {f: i for i, f in enumerate(free)}
        for i, f in enumerate(self.active):
            a_eq[i, self.of_flow[f]] = 1.0
            if f in fixed:
                b_eq[i] = fixed[f]
            else:
                a_eq[i, n + slot[f]] = -1.0
                b_eq[i] = floor
        bounds = [(0, None)] * n + [(0, cap)] * m
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq.tocsr(), b_eq=b_eq, bounds=bounds,
                      method="highs")
        return res.x if res.status == 0 else None


def _max_min(flows: Sequence[Flow], active: Sequence[int]) -> dict[int, float]:
    """Max-min fair rates of `active` flows (single-route flows by progressive filling
    when none is adaptive; otherwise linear programs)."""
    if all(len(flows[f].routes) == 1 for f in active):
        return _water_fill(flows, active)
    program = _Program(flows, active)
    rng = random.Random(len(active))  # the order of the tests only, not the result
    fixed: dict[int, float] = {}
    while len(fixed) < len(active):
        free = [f for f in active if f not in fixed]
        # the highest level every free flow reaches together: floor 0, maximise the
        # common rise (s_f equal: one objective on the first, the rest bound to it)
        level = _common_level(program, fixed, free)
        if level >= 1.0 - EPS:  # a flow's own access link holds no more
            fixed.update(dict.fromkeys(free, level))
            break
        # who can rise above it: capped rises, weighted at random (flows that compete
        # for one link's slack take turns), then one program per flow still in doubt
        n = len(program.columns)
        can: set[int] = set()
        for _ in range(RANDOM_ROUNDS):
            weights = {f: 1.0 + rng.random() for f in free if f not in can}
            x = program.solve(fixed, level, weights, cap=0.01)
            if x is not None:
                can |= {f for i, f in enumerate(free) if x[n + i] > EPS}
        blocked = []
        for f in free:
            if f in can:
                continue
            alone = program.solve(fixed, level, {f: 1.0}, cap=0.01)
            if alone is None or alone[n + free.index(f)] <= EPS:
                blocked.append(f)
        for f in blocked or free:  # none blocked: numerical noise; never loop forever
            fixed[f] = level
    return fixed


def _common_level(program: _Program, fixed: dict[int, float], free: list[int]) -> float:
    """The largest t with every free flow at t or more (bisection-free: one program with
    a shared level variable)."""
    n = len(program.columns)
    c = np.zeros(n + 1)
    c[n] = -1.0
    links = program.a_links.shape[0]
    below = sparse.lil_array((len(free), n + 1))  # t - rate_f <= 0 for the free flows
    for i, f in enumerate(free):
        below[i, program.of_flow[f]] = -1.0
        below[i, n] = 1.0
    a_ub = sparse.vstack([sparse.hstack([program.a_links, sparse.csr_array((links, 1))]),
                          below.tocsr()])
    b_ub = np.concatenate([np.ones(links), np.zeros(len(free))])
    held = [f for f in program.active if f in fixed]
    a_eq = sparse.lil_array((len(held), n + 1))
    for i, f in enumerate(held):
        a_eq[i, program.of_flow[f]] = 1.0
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq.tocsr() if held else None,
                  b_eq=np.array([fixed[f] for f in held]) if held else None,
                  bounds=[(0, None)] * (n + 1), method="highs")
    return float(res.x[n]) if res.status == 0 else 0.0


def long_run(flows: Sequence[Flow]) -> list[float]:
    """Every flow's max-min fair rate while all of them are active (share of a link)."""
    rates = _max_min(flows, list(range(len(flows))))
    return [rates[f] for f in range(len(flows))]


def mean_share(topo: FatTree, pairs: Sequence[tuple[str, str]], kind: str, subflows: int = 1,
               draws: int = 10, seed: int = 0) -> float:
    """The mean rate of the flows as a share of the optimum (1.0 each), over `draws`
    random path choices of the same permutation."""
    rng = random.Random(f"pathdiv-flowmodel|{seed}|{kind}|{subflows}")
    total = 0.0
    runs = 1 if kind == "spray" else draws
    for _ in range(runs):
        flows = flows_for(topo, pairs, kind, subflows, rng)
        rates = long_run(flows)
        total += sum(rates) / len(rates)
    return total / runs
