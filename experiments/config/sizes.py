"""Flow-size CDFs: the built-in distributions, a CDF file the user names
(`workload.sizes: FILE`, read and checked), and their mean (what `pathdiv check` bounds
a run's arrivals with).

A CDF file holds lines `<bytes> <cumulative probability>` (comma or space separated,
'#' comments; probabilities in [0, 1] or percent), non-decreasing in both columns and
ending at 1. It is read once per process and version of the file, and an error names
its line, never its values. The arrivals that draw from a CDF are
`pathdiv.experiments.plan.arrivals`.

Distributions (bytes, cumulative probability):
  websearch   DCTCP web search (Alizadeh et al., SIGCOMM 2010, Fig. 4), as tabulated in
              traffic_gen/WebSearch_distribution.txt of HPCC (Li et al., SIGCOMM 2019);
              mean 1.7 MB.
  datamining  VL2 data mining (Greenberg et al., SIGCOMM 2009, Fig. 2), as tabulated in
              Figure1_traffic/datamining.csv of Opera (Mellette et al., NSDI 2020); mean
              5.0 MB, up to 1 GB (cut it with workload.max_size on slow links).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import os
from collections.abc import Sequence
from pathlib import Path

from pathdiv.experiments.config.files import ConfigFileError, read_config_file

Cdf = list[tuple[float, float]]


WEBSEARCH: Cdf = [
    (0, 0.0), (10_000, 0.15), (20_000, 0.20), (30_000, 0.30), (50_000, 0.40),
    (80_000, 0.53), (200_000, 0.60), (1_000_000, 0.70), (2_000_000, 0.80),
    (5_000_000, 0.90), (10_000_000, 0.97), (30_000_000, 1.0),
]
DATAMINING: Cdf = [
    (100, 0.0), (180, 0.085), (250, 0.14), (560, 0.33), (900, 0.47), (1_100, 0.55),
    (1_870, 0.65), (3_160, 0.70), (10_000, 0.80), (100_001, 0.874), (400_000, 0.90),
    (1_850_000, 0.95), (10_000_000, 0.97), (30_000_000, 0.98), (100_000_000, 0.99),
    (250_000_000, 0.995), (1_000_000_000, 1.0),
]
DISTRIBUTIONS = {"websearch": WEBSEARCH, "datamining": DATAMINING}
MIN_SIZE = 1  # a fetch asks for at least one byte




def cut(cdf: Cdf, max_size: int) -> Cdf:
    """Every size above `max_size` becomes `max_size` (a point mass at the top)."""
    if cdf[-1][0] <= max_size:
        return list(cdf)
    if cdf[0][0] >= max_size:
        return [(float(max_size), 0.0), (float(max_size), 1.0)]
    kept = [(x, p) for x, p in cdf if x < max_size]
    kept.append((float(max_size), cdf_at(cdf, max_size)))
    kept.append((float(max_size), 1.0))
    return kept


def cdf_at(cdf: Cdf, size: float) -> float:
    xs = [x for x, _ in cdf]
    i = bisect.bisect_right(xs, size)
    if i == 0:
        return 0.0
    if i == len(cdf):
        return 1.0
    (x0, p0), (x1, p1) = cdf[i - 1], cdf[i]
    return p0 if x1 == x0 else p0 + (p1 - p0) * (size - x0) / (x1 - x0)


def mean_size(cdf: Cdf) -> float:
    """Mean of the interpolated distribution (mass below the first point sits on it)."""
    total = cdf[0][0] * cdf[0][1]
    for (x0, p0), (x1, p1) in itertools.pairwise(cdf):
        total += (p1 - p0) * (x0 + x1) / 2
    return total


class CdfError(ValueError):
    """A size distribution that cannot be used (bad file, not a CDF)."""


def check_cdf(points: Sequence[tuple[float, float]], source: str,
              lines: Sequence[int] | None = None) -> Cdf:
    """`points` as a CDF, or CdfError naming the source and line (`lines`: the file's
    line of each point), never the values: the file may not be the author's to read."""
    cdf = [(float(x), float(p)) for x, p in points]
    where = list(lines) if lines is not None else list(range(1, len(cdf) + 1))
    if len(cdf) < 2:
        raise CdfError(f"{source}: a CDF needs at least 2 points, got {len(cdf)}")
    for i, ((x0, p0), (x1, p1)) in enumerate(itertools.pairwise(cdf)):
        if x1 < x0 or p1 < p0:
            raise CdfError(f"{source}:{where[i + 1]}: sizes and probabilities must not "
                           f"decrease (this line is below line {where[i]})")
    if cdf[0][0] < 0 or cdf[0][1] < 0:
        raise CdfError(f"{source}:{where[0]}: sizes and probabilities must be >= 0")
    if abs(cdf[-1][1] - 1.0) > 1e-9:
        raise CdfError(f"{source}:{where[-1]}: the last probability must be 1 (or 100 "
                       "for percent)")
    return cdf


@functools.lru_cache(maxsize=64)
def _read_cdf(path: str, identity: tuple[int, int, int, int]) -> tuple[tuple[float, float], ...]:
    """The file's CDF, read once per process and file version (`identity`: device,
    inode, size, mtime): a plan of 1000 runs validates each with the same file."""
    try:
        lines = read_config_file(path).splitlines()
    except ConfigFileError as exc:
        raise CdfError(str(exc)) from None
    points, where = [], []
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].replace(",", " ").split()
        if not text:
            continue
        try:
            x, q = float(text[0]), float(text[1])
        except (ValueError, IndexError):
            # the line itself is not shown: the file may not be the author's to read
            raise CdfError(f"{path}:{n}: expected '<bytes> <probability>' (two numbers)") \
                from None
        if not (math.isfinite(x) and math.isfinite(q)):
            raise CdfError(f"{path}:{n}: sizes and probabilities must be finite numbers")
        points.append((x, q))
        where.append(n)
    if points and points[-1][1] > 1.0 + 1e-9:
        points = [(x, q / 100.0) for x, q in points]
    return tuple(check_cdf(points, path, where))


def read_cdf(path: str | Path) -> Cdf:
    """A CDF file (see the module doc); percent probabilities are scaled to [0, 1]."""
    p = str(Path(os.path.abspath(path)))
    try:
        info = os.stat(p, follow_symlinks=False)
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError:
        identity = (0, 0, 0, 0)  # the read names what is wrong
    return list(_read_cdf(p, identity))


def size_cdf(sizes: str, max_size: int | None = None) -> Cdf:
    """The named distribution or CDF file, cut at `max_size` bytes when given."""
    cdf = DISTRIBUTIONS[sizes] if sizes in DISTRIBUTIONS else read_cdf(sizes)
    return cut(cdf, max_size) if max_size else list(cdf)
