"""Published figures this tool reproduces, one YAML file per study (see
pathdiv.analysis.stats.reference for the format and the comparison)."""
