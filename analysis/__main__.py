"""`python -m pathdiv.analysis DIR`: `pathdiv analyze DIR` with only the analysis installed.

Reads a results folder (metrics from its captures, or its metrics.csv with --stats-only)
and writes stats.json and the report; imports nothing of the emulation (Mininet, the
lab kernel, the runner), so it runs where only pathdiv's analysis dependencies are.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import yaml

from pathdiv.analysis.report.analyze import analyze_folder, spec_from_config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pathdiv.analysis",
                                 description="recompute metrics, statistics and report "
                                             "from a results folder")
    ap.add_argument("folder", type=Path)
    ap.add_argument("--stats-only", action="store_true",
                    help="skip the captures: statistics and report from metrics.csv")
    ap.add_argument("--include-invalid", action="store_true",
                    help="keep runs whose fidelity verdict is invalid")
    ap.add_argument("--design", type=Path, metavar="CONFIG",
                    help="analyse as this config's analysis and factor scopes say "
                         "(for a folder run before the config scoped its levels)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        spec = design = None
        if args.design:  # read as plain YAML: `pathdiv check` validates configs
            spec = spec_from_config(yaml.safe_load(args.design.read_text()))
            design = str(args.design)
        report = analyze_folder(args.folder, stats_only=args.stats_only,
                                include_invalid=args.include_invalid, spec=spec,
                                design=design)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        print(f"pathdiv analyze: {exc}", file=sys.stderr)
        return 2
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
