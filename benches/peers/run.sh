#!/usr/bin/env bash
# Side-by-side benchmark of dq against its peers (oneDNN, ONNX Runtime, NumPy).
# Run from the repo root:   bash benches/peers/run.sh [peers.py options]
# Every step is idempotent: a second run skips what is already in place.
# Results: benches/peers/out/results.json, out/chart.png, and a markdown table on stdout.
#
# GGUF block types against candle-core 0.11 (its own crate, benches/peers/candle):
#   bash benches/peers/run.sh --gguf [--json] [--min-time S]
# NumPy's unpack-and-dequantize of GPTQ/AWQ 4-bit linears (checkpoints_numpy.py):
#   bash benches/peers/run.sh --checkpoints [--k K] [--n N] [--group G] [--json]
# Each checkpoint family's reference library on CPU (bitsandbytes, mlx, torch ports,
# compressed-tensors, transformers) against dq on the same tensor (checkpoints_ref.py;
# PYTHON: the environment holding the libraries; families it lacks are left out):
#   PYTHON=VENV/bin/python bash benches/peers/run.sh --checkpoints-ref [--families a,b] [--json]
# gguf-py 0.19.0's NumPy `gguf.quants.dequantize` beside `dq model` (ggufpy.py; gguf 0.19.0
# and numpy 2.4.6, the fixtures' pins, in their own venv):
#   bash benches/peers/run.sh --ggufpy [--types IQ2_XXS,Q4_K] [--elements N] [--threads T] [--json]
# anamnesis 0.7.10 (its own crate, benches/peers/anamnesis; `amn` installed under build/):
#   bash benches/peers/run.sh --anamnesis [--json] [--min-time S] [dq-peer-anamnesis --help]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="$HERE/.venv"
BUILD="$HERE/build"
PY="${PYTHON:-python3}"

# Pinned peers (PEERS.md). intel-cmplr-lib-ur is only used for one file, see below.
PACKAGES="onednn==2026.1.0 onednn-devel==2026.1.0 tbb-devel==2023.2.0 onnxruntime numpy ml-dtypes onnx matplotlib safetensors"
UR_WHEEL="intel-cmplr-lib-ur==2026.1.0"

log() { echo "[peers] $*" >&2; }

setup_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating virtualenv $VENV"
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.peers-installed"
    if [ "$(cat "$stamp" 2>/dev/null)" != "$PACKAGES" ]; then
        log "installing peers: $PACKAGES"
        "$VENV/bin/pip" install --quiet --disable-pip-version-check $PACKAGES
        echo "$PACKAGES" > "$stamp"
    fi
}

# onednn 2026.1.0 pulls intel-cmplr-lib-ur 2026.2.0, which lacks the OpenCL adapter;
# without it SYCL finds no CPU device. Take that one library from the 2026.1.0 wheel
# (same UR interface version).
fix_ur_adapter() {
    [ -e "$VENV/lib/libur_adapter_opencl.so.0" ] && return 0
    log "adding libur_adapter_opencl.so from $UR_WHEEL"
    mkdir -p "$BUILD/wheels"
    "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps "$UR_WHEEL" -d "$BUILD/wheels"
    "$VENV/bin/python" - "$BUILD/wheels" "$VENV/lib" <<'EOF'
import glob, os, sys, zipfile
wheels, lib = sys.argv[1], sys.argv[2]
whl = sorted(glob.glob(os.path.join(wheels, "intel_cmplr_lib_ur-2026.1.0-*.whl")))[-1]
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if os.path.basename(name).startswith("libur_adapter_opencl.so"):
            with open(os.path.join(lib, os.path.basename(name)), "wb") as f:
                f.write(z.read(name))
EOF
}

build_driver() {
    local src="$HERE/onednn_driver.cpp" bin="$BUILD/onednn_driver"
    mkdir -p "$BUILD"
    if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
        log "compiling $bin"
        # --disable-new-dtags makes it an RPATH (not RUNPATH), so libdnnl's own
        # dependencies also resolve from the venv's lib.
        g++ -O2 -std=c++17 -o "$bin" "$src" -I"$VENV/include" -L"$VENV/lib" \
            -ldnnl -ltbb -Wl,--disable-new-dtags,-rpath,"$VENV/lib"
    fi
}

build_dq() {
    log "building dq (cargo build --release -p dq)"
    if ! (cd "$ROOT" && cargo build --release -p dq >&2); then
        log "dq build failed: continuing without dq"
    fi
}

# `--gguf`: the candle-core peer measures candle and dq on the same block bytes.
if [ "${1:-}" = "--gguf" ]; then
    shift
    log "building the candle peer (benches/peers/candle, release)"
    cargo build --release --manifest-path "$HERE/candle/Cargo.toml" >&2
    exec "$HERE/candle/target/release/dq-peer-candle" "$@"
fi

# `--anamnesis`: the anamnesis peer: GGUF types, GPTQ/AWQ linears, whole files.
# Builds honour CARGO_TARGET_DIR (the binaries are looked up there).
if [ "${1:-}" = "--anamnesis" ]; then
    shift
    if [ -n "${CARGO_TARGET_DIR:-}" ]; then
        export CARGO_TARGET_DIR="$(realpath -m "$CARGO_TARGET_DIR")"
    fi
    AMN_ROOT="$BUILD/anamnesis-0.7.10"
    if [ ! -x "$AMN_ROOT/bin/amn" ]; then
        log "installing amn (anamnesis 0.7.10, features cli,gguf, its own lock file) into $AMN_ROOT"
        cargo install anamnesis --version =0.7.10 --features cli,gguf --locked --root "$AMN_ROOT" >&2
    fi
    log "building dq (release) and the anamnesis peer (benches/peers/anamnesis, release)"
    (cd "$ROOT" && cargo build --release -p dq >&2)
    cargo build --release --manifest-path "$HERE/anamnesis/Cargo.toml" >&2
    DQ_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/dq"
    PEER_BIN="${CARGO_TARGET_DIR:-$HERE/anamnesis/target}/release/dq-peer-anamnesis"
    exec "$PEER_BIN" --amn "$AMN_ROOT/bin/amn" --dq "$DQ_BIN" "$@"
fi

# `--checkpoints-ref`: runs in the caller's environment (PYTHON), not the peers venv.
if [ "${1:-}" = "--checkpoints-ref" ]; then
    shift
    log "building dq's timer (cargo build --release --example time_checkpoint)"
    (cd "$ROOT" && cargo build --release --example time_checkpoint >&2)
    exec "$PY" "$HERE/checkpoints_ref.py" "$@"
fi

# `--ggufpy`: gguf-py beside dq on the same blocks (its own venv: gguf 0.19.0 pins numpy).
if [ "${1:-}" = "--ggufpy" ]; then
    shift
    GVENV="$HERE/.venv-ggufpy"
    if [ ! -x "$GVENV/bin/python" ]; then
        log "creating virtualenv $GVENV (gguf==0.19.0 numpy==2.4.6)"
        "$PY" -m venv "$GVENV"
        "$GVENV/bin/pip" install --quiet --disable-pip-version-check gguf==0.19.0 numpy==2.4.6
    fi
    if [ -n "${CARGO_TARGET_DIR:-}" ]; then
        export CARGO_TARGET_DIR="$(realpath -m "$CARGO_TARGET_DIR")"
    fi
    log "building dq (release)"
    (cd "$ROOT" && cargo build --release -p dq >&2)
    exec "$GVENV/bin/python" "$HERE/ggufpy.py" --dq "${CARGO_TARGET_DIR:-$ROOT/target}/release/dq" "$@"
fi

setup_venv
if [ "${1:-}" = "--checkpoints" ]; then
    shift
    exec "$VENV/bin/python" "$HERE/checkpoints_numpy.py" "$@"
fi
fix_ur_adapter
build_driver
build_dq

# Runtime environment for the oneDNN driver (SYCL CPU device through Intel's OpenCL CPU runtime).
export OCL_ICD_FILENAMES="$VENV/lib/libintelocl.so"
export LD_LIBRARY_PATH="$VENV/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

cd "$ROOT"
exec "$VENV/bin/python" "$HERE/peers.py" --driver "$BUILD/onednn_driver" --dq "$ROOT/target/release/dq" "$@"
