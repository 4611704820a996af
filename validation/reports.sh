#!/usr/bin/env bash
# Every validation report and benchmark of the front end, printed (not
# gated: these VMs are shared and noisy; run it on a quiet machine for
# figures worth quoting): accuracy against hand-written loops, instruction
# agreement, the anchors (perf bench, hackbench, lmbench), the start-up time
# of opcost itself, the front end kept off the measuring CPU, the front end's
# cost as runs grow, store concurrency, the HTML report at scale and the
# fleet. About 10 minutes on a quiet 2-CPU VM. CI runs the short subset in
# .ci/run; `bash validation/reports.sh` runs them all (after ./test.sh, which
# installs what they need).
set -euo pipefail
cd "$(dirname "$0")/.."
bash validation/anchors/install.sh
echo "--- accuracy against hand-written loops (report only) ---"
python3 validation/overhead/run.py --rounds 3
echo "--- instructions against hand-written loops (report only) ---"
python3 validation/instructions/run.py --rounds 3
echo "--- anchors: perf bench, hackbench, lmbench (report only) ---"
# 190 s of measuring (140 s the lmbench rows) plus start-up; each rerun of a
# disturbed pair repeats it, so at most one rerun here bounds a busy VM to
# about twice that (289 s on the shared 2-CPU VM). --ops picks rows (e.g.
# --ops perf,hackbench).
python3 validation/anchors/run.py --runs 2 --retries 1
python3 benchmarks/startup.py 10
echo "--- front end kept off the measuring CPUs, against not (report only) ---"
python3 validation/quiet/run.py --reps 4
echo "--- front end: per-process cost as runs grow (report only) ---"
python3 benchmarks/frontend_scaling.py 2
echo "--- 8 writers x 100 runs at once: SQLite, then PostgreSQL (a local server; report only) ---"
python3 benchmarks/store_concurrency.py --pg-server 8 100
echo "--- HTML report over 1,000 runs / 1,000,000 samples: time, memory (report only) ---"
python3 benchmarks/report_scale.py
echo "--- fleet: three sshd hosts at once against the slowest alone (report only) ---"
python3 benchmarks/fleet_parallel.py 3
