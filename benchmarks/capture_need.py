"""Captured packets per link against the capture-budget model, for a results folder.

For every complete run it prints the packets each link's capture file holds next to the
model's need for that link (pathdiv.experiments.plan.budget), the largest measured /
modelled ratio of any link and the run's total (packets x hops) against the model. A
ratio above 1.0 means the model undersizes a cap and a capture could be cut.

With --snaplen N it also truncates every capture to N bytes per packet (as a smaller
capture.snaplen would have written it), recomputes metrics.csv from the truncated copy
and prints the largest difference per metric column: 0 everywhere means the metrics do
not read the bytes beyond N.

    python benchmarks/capture_need.py RESULTS_DIR [--snaplen 96]
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from pathdiv.analysis.metrics.table import compute_metrics
from pathdiv.experiments.config.load import validate
from pathdiv.experiments.plan.budget import run_need
from pathdiv.experiments.plan.runs import expand

GLOBAL_HEADER, RECORD_HEADER = 24, 16


def records(path: Path) -> list[tuple[bytes, bytes]]:
    """(record header, packet bytes) of every record of a little-endian pcap file."""
    buf = path.read_bytes()
    out, off = [], GLOBAL_HEADER
    while off + RECORD_HEADER <= len(buf):
        incl = struct.unpack_from("<I", buf, off + 8)[0]
        out.append((buf[off:off + RECORD_HEADER], buf[off + RECORD_HEADER:off + RECORD_HEADER
                                                       + incl]))
        off += RECORD_HEADER + incl
    return out


def truncate(src: Path, dst: Path, snaplen: int) -> None:
    buf = src.read_bytes()
    header = bytearray(buf[:GLOBAL_HEADER])
    struct.pack_into("<I", header, 16, snaplen)
    parts = [bytes(header)]
    for head, data in records(src):
        ts_s, ts_us, _, orig = struct.unpack("<IIII", head)
        kept = data[:snaplen]
        parts += [struct.pack("<IIII", ts_s, ts_us, len(kept), orig), kept]
    dst.write_bytes(b"".join(parts))


def packet_ratios(folder: Path) -> None:
    print(f"{'run':<28} {'worst link':<10} {'measured':>9} {'model':>9} {'ratio':>6} "
          f"{'total meas.':>11} {'total model':>11} {'ratio':>6}")
    for mpath in sorted(folder.glob("runs/*/manifest.json")):
        manifest = json.loads(mpath.read_text())
        if manifest.get("status") != "complete":
            continue
        cfg = validate(manifest["config"])
        run = next(r for r in expand(cfg, repetitions=manifest["repetition"])
                   if r.run_id == manifest["run_id"])
        need = run_need(run.config, run.flow_type, run.workload_seed)
        measured = {p.stem: len(records(p)) for p in (mpath.parent / "captures").glob("*.pcap")}
        worst = max(need.link_packets, key=lambda i: measured.get(i, 0) /
                    max(need.link_packets[i], 1))
        total = sum(measured.values())
        print(f"{run.run_id:<28} {worst:<10} {measured.get(worst, 0):>9} "
              f"{need.link_packets[worst]:>9} "
              f"{measured.get(worst, 0) / max(need.link_packets[worst], 1):>6.2f} "
              f"{total:>11} {need.total_packets:>11} {total / need.total_packets:>6.2f}")


def snaplen_effect(folder: Path, snaplen: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pathdiv-snaplen-") as tmp:
        copy = Path(tmp) / folder.name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("lab", "plots"))
        for pcap in copy.glob("runs/*/captures/*.pcap"):
            truncate(pcap, pcap, snaplen)
        full = pd.read_csv(compute_metrics(folder))
        cut = pd.read_csv(compute_metrics(copy))
    numeric = [c for c in full.columns if pd.api.types.is_numeric_dtype(full[c])]
    print(f"metrics at snaplen {snaplen} vs as captured ({len(full)} rows):")
    for column in numeric:
        a, b = full[column].to_numpy(float), cut[column].to_numpy(float)
        same_nan = np.isnan(a) == np.isnan(b)
        diff = np.nanmax(np.abs(a - b)) if np.isfinite(a).any() else 0.0
        print(f"  {column:<18} max |difference| {diff:.6g}"
              f"{'' if same_nan.all() else '  (missing values differ!)'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--snaplen", type=int, help="also compare metrics at this snaplen")
    args = parser.parse_args()
    packet_ratios(args.folder)
    if args.snaplen:
        snaplen_effect(args.folder, args.snaplen)


if __name__ == "__main__":
    main()
