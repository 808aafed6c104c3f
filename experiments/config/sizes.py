"""A flow-size CDF file the user names (`workload.sizes: FILE`), read and checked.

A CDF file holds lines `<bytes> <cumulative probability>` (comma or space separated,
'#' comments; probabilities in [0, 1] or percent), non-decreasing in both columns and
ending at 1. The arrivals that draw from it are `pathdiv.experiments.plan.arrivals`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

from pathdiv.experiments.config.files import ConfigFileError, read_config_file

Cdf = list[tuple[float, float]]


class CdfError(ValueError):
    """A size distribution that cannot be used (bad file, not a CDF)."""


def check_cdf(points: Sequence[tuple[float, float]], source: str) -> Cdf:
    cdf = [(float(x), float(p)) for x, p in points]
    if len(cdf) < 2:
        raise CdfError(f"{source}: a CDF needs at least 2 points, got {len(cdf)}")
    for (x0, p0), (x1, p1) in itertools.pairwise(cdf):
        if x1 < x0 or p1 < p0:
            raise CdfError(f"{source}: sizes and probabilities must not decrease "
                           f"({x0:g}, {p0:g}) -> ({x1:g}, {p1:g})")
    if cdf[0][0] < 0 or cdf[0][1] < 0 or abs(cdf[-1][1] - 1.0) > 1e-9:
        raise CdfError(f"{source}: sizes must be >= 0 and the last probability 1 "
                       f"(got {cdf[-1][1]:g})")
    return cdf


def read_cdf(path: str | Path) -> Cdf:
    """A CDF file (see the module doc); percent probabilities are scaled to [0, 1]."""
    p = Path(path)
    try:
        lines = read_config_file(p).splitlines()
    except ConfigFileError as exc:
        raise CdfError(str(exc)) from None
    points = []
    for n, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].replace(",", " ").split()
        if not text:
            continue
        try:
            x, q = float(text[0]), float(text[1])
        except (ValueError, IndexError):
            # the line itself is not shown: the file may not be the author's to read
            raise CdfError(f"{p}:{n}: expected '<bytes> <probability>' (two numbers)") \
                from None
        if not (math.isfinite(x) and math.isfinite(q)):
            raise CdfError(f"{p}:{n}: sizes and probabilities must be finite numbers")
        points.append((x, q))
    if points and points[-1][1] > 1.0 + 1e-9:
        points = [(x, q / 100.0) for x, q in points]
    return check_cdf(points, str(p))
