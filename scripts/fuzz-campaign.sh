#!/usr/bin/env bash
# A long local fuzzing campaign: the differential, validation and (when the CLI is
# built) CLI property tests with many cases, repeated with fresh random seeds until
# the time budget is spent. Prints the number of cases and the time taken.
#
#   scripts/fuzz-campaign.sh [minutes (default 10)] [cases per property per round (default 20000)]
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
cases=${2:-20000}
tests=(--test differential --test validation_props)
[ -f tests/cli_fuzz.rs ] && tests+=(--test cli_fuzz)

# The dev profile (dependencies at opt-level 2): no second full build, checks on.
cargo test --no-run "${tests[@]}" >&2

start=$(date +%s)
deadline=$((start + minutes * 60))
rounds=0
total=0
log=$(mktemp)
while [ "$(date +%s)" -lt "$deadline" ]; do
    rounds=$((rounds + 1))
    # proptest seeds each run from the OS, so every round tries new inputs.
    if ! DQ_PROPTEST_CASES=$cases DQ_CLI_FUZZ_CASES=$((cases / 50)) \
        cargo test "${tests[@]}" >"$log" 2>&1; then
        cat "$log"
        echo "FAILED in round $rounds after $(($(date +%s) - start)) s" >&2
        exit 1
    fi
    # Each `proptest!` property ran $cases cases; count them from the test list.
    props=$(grep -c '_never_panic \.\.\. ok\|_matches_reference \.\.\. ok' "$log" || true)
    total=$((total + props * cases))
    echo "round $rounds ok: $props properties x $cases cases ($(($(date +%s) - start)) s)" >&2
done
echo "campaign: $rounds rounds, $total property cases (+ CLI cases), $(($(date +%s) - start)) s"
