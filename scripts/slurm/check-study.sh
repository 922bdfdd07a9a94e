#!/usr/bin/env bash
# The real SLURM check, never a mock: a one-machine cluster from Debian's packages (cluster.sh), the
# `tiny` study through snakemake-executor-plugin-slurm (profiles/slurm: one group job per exploration half), then:
# every non-local job ran in a SLURM job that COMPLETED (sacct) and the merged study equals a local run of the same
# study; then one point through the farm profile (every measuring job its own SLURM job holding the GRES board),
# the measuring process of a running SLURM job killed mid-run (SIGKILL, as the OOM killer or a node fault would;
# the job ends FAILED), and the rerun resumes from the measurement cache (no configuration measured twice). The
# daemons stop at the end, also on failure.
#
# Not `scancel`: plugin 2.8.0 reads sacct's "CANCELLED by <uid>" as still running and waits forever (README).
#
#   scripts/slurm/check-study.sh            (as root; installs the packages and pip extra `cluster` if missing)
#
# Not run by CI (it takes about 10 minutes on 2 cores, beyond the fast suite's budget); README says so.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cluster="$repo/scripts/slurm/cluster.sh"
py=${PYTHON:-python3}
study="[study=tiny,benchmark.sample_size=200]"

"$py" -c "import snakemake_executor_plugin_slurm" 2>/dev/null || "$py" -m pip install --quiet -e "$repo[cluster]"
"$cluster" install
"$cluster" start
trap '"$cluster" stop' EXIT
eval "$("$cluster" env)"

work=$(mktemp -d /tmp/dse-slurm-check.XXXXXX)
workdir() {  # a fresh working directory that sees the repository's workflow
  mkdir -p "$work/$1"
  for n in Snakefile workflow config profiles; do ln -s "$repo/$n" "$work/$1/$n"; done
  echo "$work/$1"
}

echo "== local run"
local_wd=$(workdir local)
(cd "$local_wd" && "$py" -m snakemake --cores 2 study --config overrides="$study" > run.log 2>&1)

echo "== SLURM run"
slurm_wd=$(workdir slurm)
start=$(date +%s)
(cd "$slurm_wd" && "$py" -m snakemake study --workflow-profile profiles/slurm --config overrides="$study" \
  > run.log 2>&1) || { tail -50 "$slurm_wd/run.log"; exit 1; }
echo "SLURM study: $(( $(date +%s) - start )) s"

echo "== checks"
"$py" - "$local_wd" "$slurm_wd" <<'EOF'
import re, subprocess, sys
from pathlib import Path
import pandas as pd

local, slurm = map(Path, sys.argv[1:])
log = (slurm / "run.log").read_text()
ids = re.findall(r"Job (\S+) has been submitted with SLURM jobid (\d+)", log)
done = int(re.search(r"(\d+) of \1 steps \(100%\) done", log)[1])
local_jobs = len(re.findall(r"^localrule \w+:", log, re.M))
remote_jobs = len(re.findall(r"^\s*rule \w+:", log, re.M))   # scheduled through the executor (slurm)
assert ids, "no job was submitted to SLURM"
assert remote_jobs + local_jobs == done, f"{done} jobs: {remote_jobs} through SLURM, {local_jobs} local"
out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(j for _, j in ids), "--format=JobID,JobName,State,AllocTRES"],
                     check=True, capture_output=True, text=True).stdout
rows = {r.split("|")[0]: r.split("|") for r in out.strip().splitlines()}
assert set(rows) == {j for _, j in ids}, f"sacct knows {len(rows)} of {len(ids)} jobs"
bad = [r for r in rows.values() if r[2] != "COMPLETED"]
assert not bad, f"jobs not COMPLETED: {bad}"
print(f"{remote_jobs} jobs in {len(ids)} SLURM jobs, all COMPLETED; {local_jobs} local rules")

cols = ["benchmark", "precision", "input_size", "batch", "seed", "option", "cuts", "streams", "buffers",
        "pre_threads", "post_threads", "fps", "base_g_fps", "energy_j_per_frame", "tuples", "measurements"]
a = pd.read_parquet(local / "results/studies/tiny/study.parquet")[cols]
b = pd.read_parquet(slurm / "results/studies/tiny/study.parquet")[cols]
assert a.equals(b), f"SLURM study differs from the local one:\n{a.compare(b)}"
print(f"study.parquet equal to the local run ({len(a)} points)")
EOF

echo "== a SLURM job killed mid-run, then resumed"
kill_wd=$(workdir killed)
one="[study=tiny,study.grid.benchmarks=[tiny-residual],study.grid.input_sizes=[64],benchmark.sample_size=200]"
fast=(--slurm-init-seconds-before-status-checks 2)
(cd "$kill_wd" && "$py" -m snakemake study --workflow-profile profiles/slurm-farm "${fast[@]}" --retries 0 \
  --config overrides="$one" > run1.log 2>&1) &
runner=$!
killed=""
for _ in $(seq 600); do  # once an exploration job has measured something, kill its process inside the SLURM job
  if compgen -G "$kill_wd/results/studies/tiny/s0/*/*/*/cache/explore-*.parquet" > /dev/null; then
    pkill -KILL -f -- "-m dse workflow explore results/studies/tiny/" && { killed=1; break; }
  fi
  sleep 0.5
done
[ -n "$killed" ] || { echo "no exploration job was running to kill"; exit 1; }
wait "$runner" && { echo "the run survived the killed job"; exit 1; }
(cd "$kill_wd" && "$py" -m snakemake study --workflow-profile profiles/slurm-farm "${fast[@]}" --rerun-incomplete \
  --config overrides="$one" > run2.log 2>&1) || { tail -50 "$kill_wd/run2.log"; exit 1; }
"$py" - "$kill_wd" <<'EOF'
import re, subprocess, sys
from pathlib import Path
import pandas as pd

wd = Path(sys.argv[1])
ids = re.findall(r"has been submitted with SLURM jobid (\d+)", (wd / "run1.log").read_text() + (wd / "run2.log").read_text())
out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids), "--format=JobID,JobName,State,AllocTRES"],
                     check=True, capture_output=True, text=True).stdout.strip().splitlines()
states = [r.split("|")[2] for r in out]
assert "FAILED" in states, f"no job failed: {states}"
board = sum("gres/board=1" in r for r in out)
assert board, "no measuring job held gres/board (AllocTRES)"
print(f"farm profile: {len(ids)} SLURM jobs, {board} holding gres/board=1, {states.count('COMPLETED')} completed, "
      f"{states.count('FAILED')} failed (killed)")

runs = list(wd.glob("results/studies/tiny/s0/*/*/*/measurements.parquet"))
frame = pd.concat(pd.read_parquet(p) for p in runs)
ok = frame[frame["status"] != "error"]
twice = ok.groupby(["context", "config_hash", "repeat"]).size()
assert (twice == 1).all(), f"measured twice: {twice[twice > 1]}"
print(f"resumed: {len(ok)} measurements, none repeated")
EOF
echo "SLURM check passed"
