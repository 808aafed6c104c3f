"""Shared model plumbing: safe column aliases and the sum-to-zero factorial formula.

Metric and factor names such as `fct_s` or `switching` are fine for patsy, but level
values (`ecmp-mptcp`) and arbitrary user columns may not be, so every fit works on a
copy whose columns are renamed to `y0..yN` (dependent) and `A`, `B` (factors).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

FACTOR_ALIASES = ("A", "B")


@dataclass(frozen=True)
class ModelFrame:
    """A renamed copy of one cluster's data plus the maps back to user names."""

    data: pd.DataFrame
    factors: dict[str, str]  # alias -> user name
    dvs: dict[str, str]  # alias -> user name

    def rhs(self) -> str:
        """Right-hand side with sum-to-zero (deviation) coding and full interaction."""
        return " * ".join(f"C({alias}, Sum)" for alias in self.factors)

    def effect_name(self, term: str) -> str:
        """Turn a patsy term like `C(A, Sum):C(B, Sum)` into `switching:host`."""
        if term == "Intercept":
            return "Intercept"
        parts = []
        for piece in term.split(":"):
            alias = piece.removeprefix("C(").split(",")[0].strip()
            parts.append(self.factors.get(alias, piece))
        return ":".join(parts)


def model_frame(data: pd.DataFrame, ivs: Sequence[str], dvs: Sequence[str]) -> ModelFrame:
    if len(ivs) > len(FACTOR_ALIASES):
        raise ValueError(
            f"got {len(ivs)} independent variables {list(ivs)}; the model takes at most "
            f"{len(FACTOR_ALIASES)}"
        )
    factors = {FACTOR_ALIASES[i]: name for i, name in enumerate(ivs)}
    dv_aliases = {f"y{i}": name for i, name in enumerate(dvs)}
    frame = pd.DataFrame(
        {alias: data[name].astype(str).to_numpy() for alias, name in factors.items()}
    )
    for alias, name in dv_aliases.items():
        frame[alias] = pd.to_numeric(data[name], errors="coerce").to_numpy(dtype=float)
    return ModelFrame(data=frame, factors=factors, dvs=dv_aliases)
