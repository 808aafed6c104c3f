"""Which committed folders each generated block of docs/reproduction.md and its pages is
made from: the one list, and the command that regenerates every block from it.

    python -m pathdiv.analysis.report.reproduction_pages [--check]

reads the folders under docs/reproduction/ (their reference.json and metrics.csv; nothing
is run) and fills the blocks between the markers of each page with its generator's output:
docs/reproduction.md's claim tally, seed table, Table IV and Table IV candidates;
docs/reproduction/claims.md (the tally per claim and every comparison), stability.md
(every seed-pair row), juggler-claims.md, and the seed pages' own blocks. A folder or a
second seed joins the tallies by a line here, then this command; `--check` writes
nothing and names the blocks that differ from what their command gives (exit status 1).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathdiv.analysis.report import claim_table, stability, table4, table4_candidates

R = "docs/reproduction"
PAGE = "docs/reproduction.md"


@dataclass(frozen=True)
class Pair:
    """One config run with two seeds; `design`: the config whose analysis design both are
    marked with (a folder run before its config scoped its levels), else their own."""

    first: str
    second: str
    design: str | None = None

    def folders(self) -> tuple[str, str]:
        return f"{R}/{self.first}", f"{R}/{self.second}"

    def sources(self) -> list[str]:
        """The pair as the seed table's arguments (FOLDER or FOLDER:CONFIG)."""
        return [f"{f}:{self.design}" if self.design else f for f in self.folders()]


# Seed 001 (and seed 000's RB claims, which the RB design also judges): the RB design, the
# study's own design, its long flows, the TCP control; each with its second seed.
STUDY001 = (
    Pair("noisy", "noisy-seed2", "configs/noisy.yaml"),
    Pair("silent", "silent-seed2", "configs/silent.yaml"),
    Pair("study001-noisy-qs", "study001-noisy-qs-seed201"),
    Pair("study001-silent-qs", "study001-silent-qs-seed211"),
    Pair("study001-noisy-long", "study001-noisy-long-seed201"),
    Pair("study001-silent-long", "study001-silent-long-seed211"),
    Pair("study001-control-noisy-qs", "study001-control-noisy-qs-seed202"),
    Pair("study001-control-silent-qs", "study001-control-silent-qs-seed212"),
    Pair("study001-noisy-r10", "study001-noisy-r10-seed201"),
)
# Seeds 003 and 004: both seeds on one lab kernel where a figure ran again (Figs. 8-9 on
# the minRTT scheduler their configs name, `-minrtt`), else the committed first seed (its
# page says what differs).
SEED003 = (
    Pair("seed003/fig8-minrtt", "seed003/fig8-minrtt-seed2"),
    Pair("seed003/fig9-minrtt", "seed003/fig9-minrtt-seed2"),
    Pair("seed003/fig10", "seed003/fig10-seed2"),
    Pair("seed003/fig11", "seed003/fig11-seed2"),
)
SEED004 = (
    Pair("seed004/ese", "seed004/ese-seed2"),
    Pair("seed004/ese-together", "seed004/ese-together-seed2"),
    Pair("seed004/short", "seed004/short-seed2"),
    Pair("seed004/energy", "seed004/energy-seed2"),
    Pair("seed004/sweep", "seed004/sweep-seed2"),
    Pair("seed004/power-real", "seed004/power-real-seed2"),
    Pair("seed004/energy-real", "seed004/energy-real-seed2"),
)
TALLIED = STUDY001 + SEED003 + SEED004

# Table IV on both clocks: the RB design's folders beside bmv2 on the wall clock.
TABLE4 = ("noisy", "noisy-seed2", "silent", "silent-seed2", "study001-bmv2-noisy",
          "study001-bmv2-silent", "study001-bmv2-noisy-loaded", "study001-bmv2-silent-loaded")
# Table IV's candidate causes: each column a folder (or its captures' definitions/).
TABLE4_CANDIDATES = (
    ("study001-control-noisy-qs", "ours (study design)"),
    ("study001-control-silent-qs", "ours (study design)"),
    ("study001-noisy-long", "ours (study design)"),
    ("study001-silent-long", "ours (study design)"),
    ("noisy", "ours (RB design)"),
    ("silent", "ours (RB design)"),
    ("study001-bmv2-noisy", "bmv2, wall clock"),
    ("study001-bmv2-silent", "bmv2, wall clock"),
    ("study001-bmv2-noisy-loaded", "bmv2, wall clock, switches CPU-starved"),
    ("study001-bmv2-silent-loaded", "bmv2, wall clock, switches CPU-starved"),
    ("table4-queue1000-noisy/definitions", "1000-packet queues"),
    ("table4-queue1000-silent/definitions", "1000-packet queues"),
    ("table4-queue100-noisy/definitions", "100-packet queues"),
)
# Seed 001's claims on the study's design with Juggler hosts (their own page).
JUGGLER = (
    Pair("study001-noisy-juggler-qs", "study001-noisy-juggler-qs-seed201"),
    Pair("study001-silent-juggler-qs", "study001-silent-juggler-qs-seed211"),
    Pair("study001-noisy-juggler-long", "study001-noisy-juggler-long-seed201"),
    Pair("study001-silent-juggler-long", "study001-silent-juggler-long-seed211"),
)
JUGGLER_ONE_SEED = ("study001-control-noisy-juggler-qs", "study001-control-silent-juggler-qs")
# The seed pages' own blocks (their READMEs say why these folders).
SEED003_PAGE_PAIRS = (
    Pair("seed003/fig8", "seed003/fig8-seed2"),
    Pair("seed003/fig9", "seed003/fig9-seed2"),
    Pair("seed003/fig8-current", "seed003/fig8-seed2"),
    Pair("seed003/fig9-current", "seed003/fig9-seed2"),
    Pair("seed003/fig8-minrtt", "seed003/fig8-minrtt-seed2"),
    Pair("seed003/fig9-minrtt", "seed003/fig9-minrtt-seed2"),
    Pair("seed003/fig10", "seed003/fig10-seed2"),
    Pair("seed003/fig11", "seed003/fig11-seed2"),
    Pair("seed003/fig10-paper-r3", "seed003/fig10-paper-r3-seed2"),
    Pair("seed003/fig11-paper-r3", "seed003/fig11-paper-r3-seed2"),
    Pair("seed003/fig9b-paper-r3", "seed003/fig9b-paper-r3-seed2"),
    Pair("seed003/fig9a-paper-r3", "seed003/fig9a-paper-r3-seed2"),
    Pair("seed003/fig9b-paper-r3-0024", "seed003/fig9b-paper-r3-0024-seed2"),
    Pair("seed003/fig8-paper-0025", "seed003/fig8-paper-0025-seed2"),
    Pair("seed003/fig8-paper-0025", "seed003/fig8-paper-0025-seed2-lia-olia"),
    Pair("seed003/fig9b-paper-0025", "seed003/fig9b-paper-0025-seed2"),
    Pair("seed003/fig9a-paper-0025", "seed003/fig9a-paper-0025-seed2"),
)
SEED003_PAGE_CLAIMS = ("seed003/fig8", "seed003/fig9", "seed003/fig10", "seed003/fig11")
SEED004_PAGE_CLAIMS = ("seed004/sweep", "seed004/short", "seed004/energy",
                       "seed004/energy-real", "seed004/power-real")


@dataclass(frozen=True)
class Generation:
    """One generator's command: `python -m pathdiv.analysis.report.<module> ARGS`."""

    module: str
    run: Callable[[Sequence[str]], object]
    args: tuple[str, ...]

    def command(self) -> str:
        return shlex.join(["python", "-m", f"pathdiv.analysis.report.{self.module}",
                           *self.args])


def _claim_args(folders: Sequence[str], pairs: Sequence[Pair]) -> list[str]:
    args = [f for p in pairs for f in p.folders()[:1]] + [f"{R}/{f}" for f in folders]
    for pair in pairs:
        args += ["--rerun", *pair.folders()]
    return args


def generations() -> list[Generation]:
    """Every generated block's command, in the order they run."""
    tally = _claim_args((), TALLIED)
    juggler = _claim_args(JUGGLER_ONE_SEED, JUGGLER)
    return [
        Generation("claim_table", claim_table.main, (
            *tally, "--tally", PAGE, "--write", f"{R}/claims.md", "--rows", f"{R}/claims.md")),
        Generation("stability", stability.main, (
            *[s for p in TALLIED for s in p.sources()], "--write", PAGE,
            "--rows", f"{R}/stability.md")),
        Generation("table4", table4.main, (*[f"{R}/{f}" for f in TABLE4], "--write", PAGE)),
        Generation("table4_candidates", table4_candidates.main, (
            "table", *[f"{R}/{f}={label}" for f, label in TABLE4_CANDIDATES],
            "--write", PAGE)),
        Generation("claim_table", claim_table.main, (
            *juggler, "--write", f"{R}/juggler-claims.md", "--rows", f"{R}/juggler-claims.md")),
        Generation("stability", stability.main, (
            *[s for p in SEED003_PAGE_PAIRS for s in p.sources()],
            "--write", f"{R}/seed003/README.md", "--rows", f"{R}/seed003/stability.md")),
        Generation("claim_table", claim_table.main, (
            *[f"{R}/{f}" for f in SEED003_PAGE_CLAIMS], "--write", f"{R}/seed003/README.md",
            "--rows", f"{R}/seed003/README.md")),
        Generation("stability", stability.main, (
            *[s for p in SEED004 for s in p.sources()],
            "--write", f"{R}/seed004/README.md", "--rows", f"{R}/seed004/stability.md")),
        Generation("claim_table", claim_table.main, (
            *[f"{R}/{f}" for f in SEED004_PAGE_CLAIMS], "--write", f"{R}/seed004/README.md",
            "--rows", f"{R}/seed004/README.md")),
    ]


def _page_positions(args: Sequence[str]) -> list[int]:
    return [i + 1 for i, word in enumerate(args) if word in ("--tally", "--write", "--rows")]


def regenerate(check: bool = False) -> list[str]:
    """Run every generation (from the repository's root) and return the commands whose
    blocks changed; with `check` each writes into a copy of its pages, the pages are left
    as they are."""
    stale = []
    with tempfile.TemporaryDirectory(prefix="reproduction-pages-") as scratch:
        for n, generation in enumerate(generations()):
            args = list(generation.args)
            targets = {}
            for i in _page_positions(args):
                page = Path(args[i])
                if check:
                    copy = Path(scratch) / str(n) / page
                    copy.parent.mkdir(parents=True, exist_ok=True)
                    copy.write_text(page.read_text())
                    args[i] = str(copy)
                targets[page] = (Path(args[i]), page.read_text())
            with contextlib.redirect_stdout(io.StringIO()):
                generation.run(args)
            changed = [page for page, (written, before) in targets.items()
                       if written.read_text() != before]
            if changed:
                stale.append(generation.command())
            if not check:
                for page in changed:
                    print(f"wrote {page}")
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming the blocks that are stale")
    args = parser.parse_args(argv)
    stale = regenerate(check=args.check)
    if args.check and stale:
        for command in stale:
            print(f"stale: {command}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

