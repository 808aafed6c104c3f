"""Who fetches from whom, when: a run's workload as plain data (pure, seeded).

A workload is a list of *rounds* executed one after another; the requests of one round
start together. A request is one client fetching the payload from one or more servers
at once; its transfers share a `group_id` (a partition-aggregate response is complete
when all of them arrived). Designations are drawn per iteration from the run seed, so
the same run always gets the same pairs and groups, and they stay fixed within an
iteration.

Patterns:
  silent       each iteration draws a derangement (every host is client once and server
               once, never itself); the pairs take turns, one transfer at a time,
               `requests` times per pair.
  noisy        each iteration splits the hosts into two random halves (k^3/8 each, 8 for
               k=4); in each half one random client fetches from the other members at
               once; both halves run at the same time, `requests` times per iteration.
  incast       each iteration one random client fetches from every other host at once.
  permutation  each iteration a derangement whose transfers all run at the same time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


class WorkloadError(ValueError):
    """A workload that cannot be drawn for this topology."""


@dataclass(frozen=True)
class Request:
    """One client fetching `size_bytes` from each of `servers` at the same time."""

    group_id: int
    iteration: int
    client: str
    servers: tuple[str, ...]


Round = tuple[Request, ...]


def iteration_rng(seed: int, pattern: str, iteration: int) -> random.Random:
    """The generator of one iteration's designations (independent of other iterations)."""
    return random.Random(f"pathdiv-workload|{seed}|{pattern}|{iteration}")


def derangement(hosts: list[str], rng: random.Random) -> dict[str, str]:
    """client -> server: a uniformly random permutation with no host serving itself."""
    if len(hosts) < 2:
        raise WorkloadError(f"a derangement needs at least 2 hosts, got {len(hosts)}")
    while True:
        servers = hosts[:]
        rng.shuffle(servers)
        if all(c != s for c, s in zip(hosts, servers, strict=True)):
            return dict(zip(hosts, servers, strict=True))


def split_groups(hosts: list[str], rng: random.Random) -> list[tuple[str, tuple[str, ...]]]:
    """Two disjoint random halves, each as (client, servers)."""
    if len(hosts) < 4 or len(hosts) % 2:
        raise WorkloadError(f"the noisy pattern splits the hosts into two groups of at least "
                            f"2; {len(hosts)} hosts cannot be split (use topology.k >= 4)")
    order = hosts[:]
    rng.shuffle(order)
    half = len(order) // 2
    return [(g[0], tuple(g[1:])) for g in (order[:half], order[half:])]


Shape = list[tuple[str, tuple[str, ...]]]  # one round: (client, its servers) each


def _pairs(hosts: list[str], rng: random.Random) -> tuple[dict[str, str], list[str]]:
    pairs = derangement(hosts, rng)
    order = hosts[:]
    rng.shuffle(order)  # the turn order of the pairs
    return pairs, order


def _silent(hosts: list[str], rng: random.Random) -> list[Shape]:
    pairs, order = _pairs(hosts, rng)
    return [[(c, (pairs[c],))] for c in order]


def _permutation(hosts: list[str], rng: random.Random) -> list[Shape]:
    pairs, order = _pairs(hosts, rng)
    return [[(c, (pairs[c],)) for c in order]]


def _noisy(hosts: list[str], rng: random.Random) -> list[Shape]:
    return [split_groups(hosts, rng)]


def _incast(hosts: list[str], rng: random.Random) -> list[Shape]:
    client = rng.choice(hosts)
    return [[(client, tuple(h for h in hosts if h != client))]]


# The rounds of one iteration of each closed pattern of the registry
# (`pathdiv.experiments.config.workloads`), drawn from the iteration's generator.
SHAPES: dict[str, Callable[[list[str], random.Random], list[Shape]]] = {
    "silent": _silent, "noisy": _noisy, "incast": _incast, "permutation": _permutation,
}


def rounds(pattern: str, hosts: list[str], seed: int, iterations: int,
           requests: int) -> list[Round]:
    """Every round of a run, in execution order; group ids count from 0."""
    if pattern not in SHAPES:
        raise WorkloadError(f"workload.pattern {pattern!r} is not known; choose one of "
                            f"{', '.join(SHAPES)}")
    if iterations < 1 or requests < 1:
        raise WorkloadError(f"iterations ({iterations}) and requests ({requests}) must be >= 1")
    hosts = sorted(hosts, key=_host_order)
    out: list[Round] = []
    gid = 0
    for it in range(iterations):
        shapes = SHAPES[pattern](hosts, iteration_rng(seed, pattern, it))
        for _ in range(requests):
            for shape in shapes:
                rnd = []
                for client, servers in shape:
                    rnd.append(Request(gid, it, client, servers))
                    gid += 1
                out.append(tuple(rnd))
    return out


def _host_order(name: str) -> tuple[int, str]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (int(digits) if digits else 0, name)


def transfer_count(plan: list[Round]) -> int:
    return sum(len(r.servers) for rnd in plan for r in rnd)
