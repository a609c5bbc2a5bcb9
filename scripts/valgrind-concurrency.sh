#!/usr/bin/env bash
# Runs the concurrency tests (the `concurrency` module of the backends tests, reduced
# workload) under valgrind memcheck.
# Fails (exit 1) on any memcheck error: invalid reads/writes, uninitialised values, leaks
# of definitely-lost memory.
#
#   scripts/valgrind-concurrency.sh [test-name-filter]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; exit 1; }

# Build the test binary and find its path from cargo's JSON messages.
bin=$(cargo test --no-run --test backends --message-format=json 2>/dev/null |
    grep -o '"executable":"[^"]*backends-[^"]*"' | tail -1 | cut -d'"' -f4)
[ -x "$bin" ] || { echo "could not build the backends test binary" >&2; exit 1; }
echo "valgrind memcheck on $bin" >&2

DQ_CONCURRENCY_SMALL=1 valgrind --tool=memcheck --error-exitcode=1 \
    --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    --smc-check=all-non-file --fair-sched=yes \
    "$bin" --test-threads 1 "concurrency::${1:-}"
