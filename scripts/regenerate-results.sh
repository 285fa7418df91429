#!/usr/bin/env bash
# Regenerates every table in benches/results/ at one commit, which each file names in its
# header. Run it on an idle machine from a clean tree (it refuses uncommitted source changes),
# then commit the results:
#   scripts/regenerate-results.sh            # everything, about 40 minutes on 2 cores
#   scripts/regenerate-results.sh bench op_host_time   # some of them
# The bench programs build in the dev profile (the benches at opt-level 2, see Cargo.toml);
# the all-reduce and host-time benchmarks and the CLI in release (the host time of an op is
# firemesh's own code, which the dev profile leaves at opt-level 0).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! git diff --quiet HEAD -- crates models datasets benches/src examples scripts Cargo.toml Cargo.lock; then
    echo "regenerate-results: commit the source first; the tables must name the commit they ran at" >&2
    exit 1
fi
commit=$(git rev-parse --short HEAD)
all=(allreduce sharded_step learner_step op_host_time simulate_check simulate_firemesh bench zoo)
wanted=("$@")
[ ${#wanted[@]} -eq 0 ] && wanted=("${all[@]}")
for w in "${wanted[@]}"; do
    [[ " ${all[*]} " == *" $w "* ]] || { echo "regenerate-results: unknown table $w (one of: ${all[*]})" >&2; exit 1; }
done
wants() { [[ " ${wanted[*]} " == *" $1 "* ]]; }

echo "== building at $commit"
cargo build --release -p firemesh-cli
# One feature set for both release benchmarks, so that neither rebuilds Burn for the other.
release_bins=()
wants allreduce && release_bins+=(--bin allreduce)
wants op_host_time && release_bins+=(--bin op_host_time)
[ ${#release_bins[@]} -gt 0 ] && cargo build --release -p firemesh-benches --features burn-collective "${release_bins[@]}"
cargo build -p firemesh-benches --bins

run() { # name, command...
    local name=$1
    shift
    echo "== $name: $*"
    local start=$SECONDS
    "$@"
    echo "== $name: $((SECONDS - start)) s"
}
wants allreduce && run allreduce target/release/allreduce --max-mib 64
wants sharded_step && run sharded_step target/debug/sharded_step
wants learner_step && run learner_step target/debug/learner_step
wants op_host_time && run op_host_time target/release/op_host_time
wants simulate_check && run simulate_check target/debug/simulate_check
if wants simulate_firemesh; then
    run simulate_firemesh target/release/firemesh simulate --firemesh --out benches/results/simulate_firemesh
    run simulate_firemesh target/release/firemesh simulate --firemesh --rank-threads --out benches/results/simulate_firemesh_threads
fi
wants bench && run bench target/release/firemesh bench --runtimes cpu
wants zoo && run zoo scripts/zoo-throughput.sh target/release/firemesh
echo "== done: benches/results/ at $commit; check the tables, then commit them"
