"""Published studies this tool reproduces, one YAML file per study: every figure and
stated direction as a claim (pathdiv.analysis.stats.claims for the format,
pathdiv.analysis.stats.agreement for the marks)."""
