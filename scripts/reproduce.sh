#!/usr/bin/env bash
# Run a reference config to the end and copy its compact results (metrics.csv,
# stats.json, reference.json, fidelity.csv: each run's fidelity figures, report.md/html,
# plots/, config.yaml, plan.json, run.txt: wall time, machine, commit) into docs/reproduction/<name>/, and write summary.md there
# (per cluster MANOVA and between-subjects effects, Table IV beside ours, every direction
# of the study with our p-value). docs/reproduction.md says what to read there.
#
#   scripts/reproduce.sh configs/noisy.yaml             # the reproduction (lab kernel)
#   scripts/reproduce.sh configs/noisy.yaml --preview   # a preview on this machine's kernel
#
# --preview runs a reduced plan that any machine can run in minutes: hosts.kernel host,
# the switching factor only (the RB scheduler needs the lab kernel), query and short
# flows (PREVIEW_FLOWS="long" picks others), one iteration, PREVIEW_REPS repetitions (3:
# every cell then has more observations than dependent variables + 1); it lands in
# docs/reproduction/preview-<name>/ (preview-<name>-<flows> for other flow types).
# A folder interrupted half way is resumed by running the same command again.
#
# `pathdiv run` runs the lab kernel's virtual-clock runs on every core by default (one
# lab kernel per core, as RAM allows; JOBS=N passes --jobs N). SHARDS=N instead runs the
# plan as N separate `pathdiv run --shard I/N` processes at once (one lab-kernel boot
# each, logs in the results folder's shard-I.log), then analyses the whole folder, as a
# Slurm array would. On the virtual clock a run's results do not depend on the others'
# load (docs/reproduction.md).
set -euo pipefail
config=${1:?usage: scripts/reproduce.sh CONFIG [--preview]}
mode=${2:-}
shards=${SHARDS:-1}
if ! [[ "$shards" =~ ^[1-9][0-9]*$ ]]; then
    echo "reproduce: SHARDS=$shards: expected a whole number >= 1 (e.g. SHARDS=$(nproc))" >&2
    exit 2
fi
jobs=()
if [[ -n "${JOBS:-}" ]]; then
    if ! [[ "$JOBS" =~ ^[1-9][0-9]*$ ]]; then
        echo "reproduce: JOBS=$JOBS: expected a whole number >= 1 (lab kernels at once)" >&2
        exit 2
    fi
    jobs=(--jobs "$JOBS")
fi
root=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-$root/.venv/bin/python}
name=$(basename "$config" .yaml)
flows=${PREVIEW_FLOWS:-query short}
if [[ "$mode" == --preview ]]; then
    name=preview-$name
    if [[ "$flows" != "query short" ]]; then name=$name-${flows// /-}; fi
fi
work=${WORK:-$root/results/reproduction/$name}
dest=$root/docs/reproduction/$name
mkdir -p "$work"
# the folder is pathdiv's from the start: check.txt and the shards' logs land in it before
# any run does, and `pathdiv run` refuses a non-empty folder without this marker
touch "$work/.pathdiv-results"
run_config=$config
if [[ "$mode" == --preview ]]; then
    run_config=$work.yaml
    "$py" - "$config" "$run_config" "${PREVIEW_REPS:-3}" "$name" "$flows" <<'PY'
import sys, yaml
source, target, reps, name, flows = sys.argv[1:6]
reps, flows = int(reps), flows.split()
cfg = yaml.safe_load(open(source))
cfg["name"] = name
cfg["repetitions"] = reps
cfg["hosts"]["kernel"] = "host"
cfg["factors"] = {"switching": cfg["factors"]["switching"]}
cfg["workload"]["flow_types"] = {k: v for k, v in cfg["workload"]["flow_types"].items()
                                 if k in flows}
cfg["workload"]["iterations"] = 1
cfg["analysis"]["ivs"] = ["switching"]
yaml.safe_dump(cfg, open(target, "w"), sort_keys=False)
PY
fi
# checked before anything runs; written into the folder only once `run` has made it a
# results folder (run refuses a non-empty folder that holds no results)
checked=$("$py" -m pathdiv.experiments.cli check "$run_config")
start=$(date +%s)
if (( shards == 1 )); then
    "$py" -m pathdiv.experiments.cli run "$run_config" --out "$work" "${jobs[@]}"
else
    pids=()
    shard_jobs=("${jobs[@]}")  # a shard per core: one lab kernel each unless JOBS says
    if (( ${#shard_jobs[@]} == 0 )); then shard_jobs=(--jobs 1); fi
    stop_shards() {
        # each shard treats SIGTERM as Ctrl-C: it tears its network down, and its
        # unfinished run stays pending for the next invocation
        kill -TERM "${pids[@]}" 2>/dev/null || true
        wait
        echo "reproduce: interrupted; run the same command again to resume $work" >&2
        exit 130
    }
    trap stop_shards INT TERM
    for ((i = 0; i < shards; i++)); do
        "$py" -m pathdiv.experiments.cli run "$run_config" --out "$work" \
            --shard "$i/$shards" "${shard_jobs[@]}" > "$work/shard-$i.log" 2>&1 &
        pids+=($!)
    done
    echo "reproduce: $shards shards running into $work (logs: $work/shard-*.log)" >&2
    ticks=0
    while kill -0 "${pids[@]}" 2>/dev/null; do  # true while any shard runs
        sleep 5 & wait $!
        if (( ++ticks % 12 == 0 )); then
            # sed reads to the end: `head -1` would leave `status` writing into a closed pipe
            echo "reproduce: $(date +%T) $("$py" -m pathdiv.experiments.cli status "$work" \
                | sed -n 1p)" >&2
        fi
    done
    failed=0
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    trap - INT TERM
    if (( failed )); then
        tail -n 3 "$work"/shard-*.log >&2
        echo "reproduce: a shard did not finish every run (see above and $work/plan.json);" \
            "run the same command again to redo what is not complete" >&2
        exit 1
    fi
    "$py" -m pathdiv.experiments.cli analyze "$work"
fi
end=$(date +%s)
printf '%s\n' "$checked" > "$work/check.txt"
mkdir -p "$dest"
rm -rf "$dest/plots"
cp "$work"/{metrics.csv,stats.json,report.md,report.html,config.yaml,plan.json} "$dest/"
for extra in reference.json fidelity.csv; do
    if [[ -f "$work/$extra" ]]; then cp "$work/$extra" "$dest/"; fi
done
cp -r "$work/plots" "$dest/plots"
{
    echo "config: $config${mode:+ ($mode)}"
    echo "command: ${SHARDS:+SHARDS=$SHARDS }${JOBS:+JOBS=$JOBS }scripts/reproduce.sh $config $mode"
    echo "commit: $(git -C "$root" rev-parse HEAD)$(git -C "$root" diff --quiet || echo ' (with local changes)')"
    echo "wall time: $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s (this invocation, runs and analysis)"
    echo "run wall time: $("$py" -c 'import json, sys, pathlib; print(round(sum(e.get("wall_s", 0) for e in json.loads((pathlib.Path(sys.argv[1]) / "plan.json").read_text())["runs"]) / 60, 1))' "$work") min (all runs, the host's clock, from plan.json; shards run at once)"
    echo "run time: $("$py" -c 'import json, sys, pathlib; print(round(sum(json.loads(p.read_text())["timings"].get("total_s", 0) for p in pathlib.Path(sys.argv[1]).glob("runs/*/manifest.json")) / 60, 1))' "$work") min (all runs, from their manifests: the guest's clock for lab-kernel runs)"
    echo "machine: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "runs: $(grep -c '"status": "complete"' "$work/plan.json" || true) complete"
    echo "rows in metrics.csv: $(( $(wc -l < "$work/metrics.csv") - 1 ))"
} > "$dest/run.txt"
"$py" -m pathdiv.analysis.report.reproduction "$dest"
echo "reproduce: results in $dest (see docs/reproduction.md)"
