#!/usr/bin/env bash
# Cross-builds dq for aarch64 and runs a test subset under qemu-user: the portable
# generated kernels and the Cranelift JIT's aarch64 backend, bit for bit against
# the reference and the conformance vectors. Arguments go to the test binaries
# (e.g. `--skip ui`).
#
# Needs (Debian): apt-get install qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross
# and: rustup target add aarch64-unknown-linux-gnu
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
cargo test --target aarch64-unknown-linux-gnu -p dq-runtime -p dq-jit
cargo test --target aarch64-unknown-linux-gnu --test ops --test backends -- \
    conformance:: generated:: reference:: jit:: user_kernel:: "$@"
