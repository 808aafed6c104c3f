"""A plan spread over several machines: shards, their shared results folder, Slurm.

estimate  expected duration of a run (pure)
shards    the deterministic partition of a plan into N shards, `--shard I/N` (pure)
planfile  plan.json written by several shards at once (a lock, a merge)
tracking  per-run "running" markers and per-shard progress files
status    what `pathdiv status DIR` says about a folder
slurm     the job array and the dependent analysis job for sbatch
"""
