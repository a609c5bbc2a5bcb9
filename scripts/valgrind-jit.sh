#!/usr/bin/env bash
# Runs a subset of the JIT tests (the `jit` module of the backends tests) under
# valgrind memcheck; exits non-zero on any error.
# Usage: scripts/valgrind-jit.sh [test-name-filter]   (default: a fast subset)
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
bin=$(cargo test --test backends --no-run --message-format=json 2>/dev/null \
  | grep -o '"executable":"[^"]*/deps/backends-[^"]*"' | sed 's/"executable":"\(.*\)"/\1/' | tail -n 1)
[ -x "$bin" ] || { echo "could not build the backends test binary" >&2; exit 2; }
tests=(strided_4bit_src_and_odd_offsets static_op_with_extreme_zero_points
       eviction_frees_code_and_kernels_in_use_stay_valid racing_threads_compile_once
       a_kernel_refuses_another_plans_job large_shapes_match_reference axes_form_every_dtype
       f16_and_bf16_rounding_over_many_bit_patterns bf16_nan_rule_holds_for_pass_through_and_nan_literals)
[ -n "$filter" ] && tests=("$filter")
for t in "${tests[@]}"; do
  echo "== valgrind: $t"
  valgrind --error-exitcode=1 --leak-check=no --quiet \
    "$bin" --exact "jit::$t" --test-threads=1
done
echo "valgrind: no errors"
