"""Side-by-side dequantization benchmark: dq vs oneDNN, ONNX Runtime and NumPy.

For each case it generates deterministic inputs, runs every implementation, checks each
output bit for bit against dq's (or, when dq's CLI is not available, against the SPEC
formula computed in NumPy), times them, and writes out/results.json, out/chart.png and a
markdown table. Run it through run.sh, which sets up the venv and the oneDNN driver.
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

# dtype name -> numpy storage dtype of one (unpacked) element
NP_DTYPE = {
    "s8": np.int8, "u8": np.uint8, "s4": np.int8, "u4": np.uint8, "s32": np.int32,
    "s64": np.int64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    # SPEC 10 float src (codes as ml_dtypes types; f4_e2m1 unpacked here, packed on disk)
    "f8_e4m3": ml_dtypes.float8_e4m3fn, "f8_e5m2": ml_dtypes.float8_e5m2,
    "f4_e2m1": ml_dtypes.float4_e2m1fn,
}
FLOAT_SRC = ("f8_e4m3", "f8_e5m2", "f4_e2m1")
INT_RANGE = {"s8": (-128, 127), "u8": (0, 255), "s4": (-8, 7), "u4": (0, 15)}
IMPLS = ["memcpy", "dq-generated", "dq-jit", "oneDNN", "ORT", "NumPy"]
PEERS = ["oneDNN", "ORT", "NumPy"]


# ----------------------------------------------------------------------------- cases

@dataclass
class Case:
    name: str
    op: str                 # "dequantize" (static, scales/zps attributes) or "dynamic"
    src: str
    dst: str
    qtype: str
    shape: tuple = (4096, 4096)
    axis: int | None = None
    group_shape: tuple | None = None
    zps: str | None = None  # zero-point dtype; "s64" for the static op, None = no zps
    # The group map of SPEC section 3, in this 2-D benchmark: g[d] per dimension.
    groups: tuple = field(init=False)

    def __post_init__(self):
        d0, d1 = self.shape
        if self.qtype == "per_tensor":
            self.groups = (d0, d1)
        elif self.qtype == "per_channel":
            self.groups = (1, d1) if self.axis == 0 else (d0, 1)
        else:
            self.groups = tuple(self.group_shape)

    @property
    def scales_shape(self):
        return tuple(-(-d // g) for d, g in zip(self.shape, self.groups))

    @property
    def numel(self):
        return self.shape[0] * self.shape[1]

    def nbytes(self, dtype, n):
        if dtype in ("s4", "u4", "f4_e2m1"):
            return (n + 1) // 2
        return n * np.dtype(NP_DTYPE[dtype]).itemsize

    @property
    def src_bytes(self):
        return self.nbytes(self.src, self.numel)

    @property
    def dst_bytes(self):
        return self.nbytes(self.dst, self.numel)


CASES = [
    Case("s8-f32-channel", "dequantize", "s8", "f32", "per_channel", axis=0),
    Case("s8-f32-channel-zp", "dequantize", "s8", "f32", "per_channel", axis=0, zps="s64"),
    Case("u8-f32-tensor-zp", "dequantize", "u8", "f32", "per_tensor", zps="s64"),
    Case("s4-f32-group1x128", "dynamic", "s4", "f32", "per_group", group_shape=(1, 128)),
    Case("s4-f32-group128x1", "dynamic", "s4", "f32", "per_group", group_shape=(128, 1)),
    Case("u4-bf16-group1x128-zp", "dynamic", "u4", "bf16", "per_group", group_shape=(1, 128), zps="u4"),
    Case("u4-f16-group1x128", "dynamic", "u4", "f16", "per_group", group_shape=(1, 128)),
    Case("s4-bf16-group1x128", "dynamic", "s4", "bf16", "per_group", group_shape=(1, 128)),
    Case("s4-f16-group1x128", "dynamic", "s4", "f16", "per_group", group_shape=(1, 128)),
    Case("s8-f32-channel-256", "dequantize", "s8", "f32", "per_channel", shape=(256, 256), axis=0),
    # SPEC 10: float8 per channel (ORT runs these with f32 and f16 output), MXFP4-shaped
    # e2m1 groups of 32 (ORT 1.32 has no float4e2m1 DequantizeLinear kernel).
    Case("f8e4m3-f32-channel", "dynamic", "f8_e4m3", "f32", "per_channel", axis=0),
    Case("f8e4m3-bf16-channel", "dynamic", "f8_e4m3", "bf16", "per_channel", axis=0),
    Case("f8e5m2-f16-channel", "dynamic", "f8_e5m2", "f16", "per_channel", axis=0),
    Case("f4e2m1-bf16-group1x32", "dynamic", "f4_e2m1", "bf16", "per_group", group_shape=(1, 32)),
]


# ----------------------------------------------------------------------------- data

def pack4(values):
    """Pack 4-bit values (any int dtype) two per byte, element 2k in the low nibble."""
    v = (values.reshape(-1).astype(np.int16) & 0xF).astype(np.uint8)
    if v.size % 2:
        v = np.append(v, np.uint8(0))
    return v[0::2] | (v[1::2] << 4)


def unpack4(packed, n, signed):
    """Inverse of pack4: n elements, sign-extended for s4."""
    out = np.empty(packed.size * 2, np.uint8)
    out[0::2] = packed & 0x0F
    out[1::2] = packed >> 4
    out = out[:n]
    return ((out ^ 8).view(np.int8) - 8) if signed else out


def zp_storage_type(case):
    """Numpy dtype peers use for zero points: the src dtype (as ONNX requires)."""
    return NP_DTYPE[case.src] if case.zps == "s64" else NP_DTYPE[case.zps]


def generate(case):
    """Deterministic inputs. Scales have random sign, so q == z gives -0 (SPEC 5)."""
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    if case.src in FLOAT_SRC:
        # Every code, NaN codes included (a NaN src gives NaN).
        codes = rng.integers(0, 16 if case.src == "f4_e2m1" else 256, case.shape, dtype=np.uint8)
        q = codes.view(NP_DTYPE[case.src])
    else:
        lo, hi = INT_RANGE[case.src]
        q = rng.integers(lo, hi + 1, case.shape).astype(NP_DTYPE[case.src])
    mag = np.exp2(rng.uniform(-12, -4, case.scales_shape))
    sign = np.where(rng.random(case.scales_shape) < 0.5, -1.0, 1.0)
    scale_type = np.float32 if case.op == "dequantize" else NP_DTYPE[case.dst]
    scales = (mag * sign).astype(np.float32).astype(scale_type)
    zps = None
    if case.zps:
        zlo, zhi = (-16, 16) if case.src == "s8" else INT_RANGE[case.src if case.zps == "s64" else case.zps]
        zps = rng.integers(zlo, zhi + 1, case.scales_shape).astype(zp_storage_type(case))
    return {"q": q, "scales": scales, "zps": zps}


def write_inputs(case, data, folder):
    """Raw little-endian files, as the oneDNN driver and `dq run` read them."""
    folder.mkdir(parents=True, exist_ok=True)
    q = data["q"]
    if case.src == "f4_e2m1":
        src = pack4(q.view(np.uint8))
    else:
        src = pack4(q) if case.src in ("s4", "u4") else q
    src.tofile(folder / "src.bin")
    data["src_raw"] = np.ascontiguousarray(src).view(np.uint8).reshape(-1)
    data["scales"].tofile(folder / "scales.bin")  # f32 for the static op, else dst dtype
    if data["zps"] is not None:
        z = data["zps"]
        if case.zps == "s64":
            z = z.astype(np.int64)
        elif case.zps in ("s4", "u4"):
            z = pack4(z)
        z.tofile(folder / "zps.bin")


# ----------------------------------------------------------------------------- arithmetic

def grouped(case, x):
    """View a src-shaped array as [S0, g0, S1, g1] so a scales-shaped [S0,1,S1,1] broadcasts.
    (The 4096/256 shapes divide evenly by every group size used here.)"""
    (d0, d1), (g0, g1) = case.shape, case.groups
    return x.reshape(d0 // g0, g0, d1 // g1, g1)


def per_group(case, p):
    s0, s1 = case.scales_shape
    return p.reshape(s0, 1, s1, 1)


def spec_formula(case, data):
    """SPEC section 5, literally: exact integer q - z, RNE to f32, one f32 multiply, RNE to dst
    (SPEC 10: a float src's exact value, times the scale)."""
    if case.src in FLOAT_SRC:
        x = grouped(case, data["q"].astype(np.float32))
        y = x * per_group(case, data["scales"].astype(np.float32))
        return y.astype(NP_DTYPE[case.dst]).reshape(case.shape)
    d = grouped(case, data["q"].astype(np.int64))
    if data["zps"] is not None:
        d = d - per_group(case, data["zps"].astype(np.int64))
    y = d.astype(np.float32) * per_group(case, data["scales"].astype(np.float32))
    return y.astype(NP_DTYPE[case.dst]).reshape(case.shape)


def numpy_idiomatic(case, data):
    """The expression users write: (src.astype(np.float32) - zp) * scale, broadcasting.
    4-bit inputs start packed, so unpacking is part of the work (and of the timing)."""
    src = data["src_raw"]
    if case.src in ("s4", "u4"):
        q = unpack4(src, case.numel, case.src == "s4")
    elif case.src == "f4_e2m1":
        q = unpack4(src, case.numel, False).view(ml_dtypes.float4_e2m1fn)
    else:
        q = src.view(NP_DTYPE[case.src])
    x = grouped(case, q).astype(np.float32)
    if data["zps"] is not None:
        x = x - per_group(case, data["zps"])
    scale = data["scales"]
    if scale.dtype != np.float32:
        scale = scale.astype(np.float32)
    y = x * per_group(case, scale)
    if case.dst != "f32":
        y = y.astype(NP_DTYPE[case.dst])
    return y.reshape(case.shape)


# ----------------------------------------------------------------------------- timing

@dataclass
class TimingRule:
    min_reps: int = 10
    min_time: float = 1.0
    max_time: float = 3.0  # slow cases stop here once they have 3 reps

    def time(self, fn):
        """Median seconds of fn(): until (reps >= min_reps and total >= min_time),
        or (reps >= 3 and total >= max_time) for very slow implementations."""
        times, total = [], 0.0
        while True:
            t0 = time.perf_counter()
            measured = fn()  # fn may return its own measured duration (see run_memcpy)
            dt = measured if isinstance(measured, float) else time.perf_counter() - t0
            times.append(dt)
            total += dt
            n = len(times)
            if (n >= self.min_reps and total >= self.min_time) or (n >= 3 and total >= self.max_time):
                return float(np.median(times)), n


def result(status, median_s=None, reps=None, output=None, note=None, **extra):
    r = {"status": status, "median_s": median_s, "reps": reps, "note": note, **extra}
    r["_output"] = output  # popped before writing JSON
    return r


# ----------------------------------------------------------------------------- peers

def run_memcpy(nbytes, threads, rule):
    """Yardstick: np.copyto of a dst-sized buffer. With 2 threads each copies one half
    (copyto releases the GIL); the time is from the first start to the last end, measured
    inside persistent workers so thread start-up is not counted (it would swamp the
    cache-resident 256 KiB case)."""
    a = np.ones(nbytes, np.uint8)
    b = np.empty_like(a)
    if threads == 1:
        def copy():
            np.copyto(b, a)
    else:
        cuts = np.linspace(0, nbytes, threads + 1).astype(int)
        barrier = threading.Barrier(threads)
        pool = ThreadPoolExecutor(threads)

        def part(lo, hi):
            barrier.wait()
            t0 = time.perf_counter()
            np.copyto(b[lo:hi], a[lo:hi])
            return t0, time.perf_counter()

        def copy():
            spans = list(pool.map(part, cuts[:-1], cuts[1:]))
            return max(e for _, e in spans) - min(s for s, _ in spans)

    copy()
    med, reps = rule.time(copy)
    if threads != 1:
        pool.shutdown()
    return result("ok", med, reps, gbps=2 * nbytes / med / 1e9)


def run_numpy(case, data, threads, rule):
    if threads != 1:
        return result("n/a", note="NumPy is single-threaded")
    out = numpy_idiomatic(case, data)
    med, reps = rule.time(lambda: numpy_idiomatic(case, data))
    return result("ok", med, reps, output=out)


def onednn_args(case, folder, threads):
    args = ["--op", case.op, "--src-type", case.src, "--dst-type", case.dst,
            "--shape", "x".join(map(str, case.shape)), "--qtype", case.qtype,
            "--input", str(folder / "src.bin"), "--scales", str(folder / "scales.bin"),
            "--threads", str(threads)]
    if case.axis is not None:
        args += ["--axis", str(case.axis)]
    if case.group_shape:
        args += ["--group-shape", "x".join(map(str, case.group_shape))]
    if case.op == "dynamic":
        args += ["--scales-shape", "x".join(map(str, case.scales_shape))]
    if case.zps:
        args += ["--zps", str(folder / "zps.bin"), "--zps-type", case.zps]
    return args


def onednn_reason(cmd):
    """Rerun a rejected case with ONEDNN_VERBOSE=all and return its first 'create:check'
    reason (e.g. 'Reorder primitive does not support zero points ...')."""
    env = dict(os.environ, ONEDNN_VERBOSE="all")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    for line in (p.stdout + p.stderr).splitlines():
        fields = line.split(",")
        if len(fields) > 5 and fields[3] == "create:check":
            return fields[5]
    return None


def run_onednn(case, data, threads, rule, driver, folder):
    if not driver or not Path(driver).exists():
        return result("error", note="oneDNN driver not built")
    out_file = folder / f"onednn_{threads}T.bin"
    cmd = [driver] + onednn_args(case, folder, threads) + [
        "--output", str(out_file), "--min-reps", str(rule.min_reps),
        "--min-time", str(rule.min_time), "--max-time", str(rule.max_time)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    text = p.stdout.strip()
    if p.returncode == 3 or text.startswith("unsupported"):
        reason = onednn_reason(cmd) or text.removeprefix("unsupported:").strip()
        return result("unsupported", note=reason)
    if p.returncode != 0:
        return result("error", note=(p.stderr or text).strip()[-300:])
    info = json.loads(text.splitlines()[-1])
    output = np.fromfile(out_file, NP_DTYPE[case.dst]).reshape(case.shape)
    out_file.unlink()
    return result("ok", info["median_s"], info["reps"], output=output,
                  compile_s=info.get("compile_s"))


def ort_model(case):
    """DequantizeLinear (opset 21) with the quantized tensor, scales and zps as graph inputs
    (an initializer would be constant-folded away)."""
    from onnx import TensorProto as TP, helper
    onnx_t = {"s8": TP.INT8, "u8": TP.UINT8, "s4": TP.INT4, "u4": TP.UINT4,
              "f32": TP.FLOAT, "f16": TP.FLOAT16, "bf16": TP.BFLOAT16,
              "f8_e4m3": TP.FLOAT8E4M3FN, "f8_e5m2": TP.FLOAT8E5M2, "f4_e2m1": TP.FLOAT4E2M1}
    scale_t = onnx_t["f32" if case.op == "dequantize" else case.dst]
    sshape = [] if case.qtype == "per_tensor" else list(case.scales_shape)
    attrs = {}
    if case.qtype == "per_channel":
        sshape = [case.shape[case.axis]]
        attrs["axis"] = case.axis
    elif case.qtype == "per_group":
        # ONNX blocks along one axis only: the axis whose group size is > 1.
        axis = 1 if case.groups[1] > 1 else 0
        attrs.update(axis=axis, block_size=case.groups[axis])
    inputs = [helper.make_tensor_value_info("x", onnx_t[case.src], list(case.shape)),
              helper.make_tensor_value_info("scale", scale_t, sshape)]
    if case.zps:
        inputs.append(helper.make_tensor_value_info("zp", onnx_t[case.src], sshape))
    y = helper.make_tensor_value_info("y", onnx_t[case.dst], list(case.shape))
    node = helper.make_node("DequantizeLinear", [i.name for i in inputs], ["y"], **attrs)
    model = helper.make_model(helper.make_graph([node], "dq", inputs, [y]),
                              opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model.SerializeToString(), [onnx_t[case.src], scale_t, onnx_t[case.src]], sshape


def run_ort(case, data, threads, rule):
    import onnxruntime as ort
    if case.dst == "bf16":
        return result("unsupported", note="ORT CPU DequantizeLinear has no bf16 output (NOT_IMPLEMENTED)")
    model, types, sshape = ort_model(case)
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    try:
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - report whatever ORT says
        return result("unsupported", note=str(e).splitlines()[0][:300])
    if case.src == "f4_e2m1":
        return result("unsupported", note="ORT CPU has no float4e2m1 DequantizeLinear (NOT_IMPLEMENTED)")
    # Zero points in the src dtype; 4-bit tensors are passed packed, as ONNX stores them.
    arrays = [data["src_raw"], np.ascontiguousarray(data["scales"])]
    if case.zps:
        z = data["zps"].astype(NP_DTYPE[case.src])
        arrays.append(pack4(z) if case.src in ("s4", "u4") else np.ascontiguousarray(z))
    shapes = [list(case.shape), sshape, sshape]
    out = np.empty(case.shape, NP_DTYPE[case.dst])
    b = sess.io_binding()
    for name, arr, t, shp in zip(["x", "scale", "zp"], arrays, types, shapes):
        b.bind_input(name, "cpu", 0, t, shp, arr.ctypes.data)
    b.bind_output("y", "cpu", 0, out.dtype.type, list(case.shape), out.ctypes.data)
    try:
        sess.run_with_iobinding(b)
    except Exception as e:  # noqa: BLE001
        return result("unsupported", note=str(e).splitlines()[0][:300])
    first = out.copy()
    med, reps = rule.time(lambda: sess.run_with_iobinding(b))
    return result("ok", med, reps, output=first)


# ----------------------------------------------------------------------------- dq CLI

def dq_case_flags(case):
    flags = ["--op", case.op, "--src-type", case.src, "--dst-type", case.dst,
             "--shape", "x".join(map(str, case.shape)), "--qtype", case.qtype]
    if case.axis is not None:
        flags += ["--axis", str(case.axis)]
    if case.group_shape:
        flags += ["--group-shape", "x".join(map(str, case.group_shape))]
    return flags


def f32_list(values):
    """Comma list of shortest round-trip f32 decimals (exact after parsing as f32)."""
    return ",".join(np.format_float_scientific(np.float32(v), unique=True) for v in values.ravel())


def dq_param_flags(case, data, folder):
    """--scales/--zps: lists for the static op, files (dst dtype / zps dtype) otherwise."""
    if case.op == "dequantize":
        flags = ["--scales", f32_list(data["scales"])]
        if case.zps:
            flags += ["--zps", ",".join(str(int(z)) for z in data["zps"].ravel())]
        return flags
    flags = ["--scales", str(folder / "scales.bin")]
    if case.zps:
        flags += ["--zps", str(folder / "zps.bin"), "--zps-type", case.zps]
    return flags


def dq_available(dq):
    """True when `dq run` and `dq bench` exist and know the flags this script passes."""
    if not dq or not Path(dq).exists():
        return False
    for sub, flag in (("run", "--src-type"), ("bench", "--json")):
        p = subprocess.run([dq, sub, "--help"], capture_output=True, text=True)
        if p.returncode != 0 or flag not in p.stdout + p.stderr:
            return False
    return True


def run_dq_output(case, data, threads, dq, folder):
    out_file = folder / f"dq_{threads}T.bin"
    cmd = [dq, "run"] + dq_case_flags(case) + dq_param_flags(case, data, folder) + [
        "--input", str(folder / "src.bin"), "--backend", "auto",
        "--threads", str(threads), "--output", str(out_file)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not out_file.exists():
        return None, (p.stderr or p.stdout).strip()[-300:]
    out = np.fromfile(out_file, NP_DTYPE[case.dst])
    out_file.unlink()
    if out.size != case.numel:
        return None, f"dq run wrote {out.size} elements, expected {case.numel}"
    return out.reshape(case.shape), None


def run_dq_bench(case, data, threads, dq, backend):
    """`dq bench ... --json`: returns the backend entries (dq generates its own data)."""
    flags = dq_case_flags(case)
    if case.zps:
        # The static op's zero points are s64 attributes; dq bench generates them.
        flags += ["--zps-type", "s64" if case.op == "dequantize" else case.zps]
    # --no-memcpy: each implementation times itself alone, back to back (as the oneDNN
    # driver and ORT do); this script's memcpy column is its own yardstick.
    cmd = [dq, "bench"] + flags + ["--backend", backend, "--threads", str(threads), "--json",
                                   "--no-memcpy"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        return None, (p.stderr or p.stdout).strip()[-300:]
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            return json.loads(line), None
        except json.JSONDecodeError:
            continue
    try:
        return json.loads(p.stdout), None
    except json.JSONDecodeError:
        return None, "dq bench --json printed no JSON"


def run_dq(case, data, threads, dq, folder):
    """dq-generated and dq-jit timings from `dq bench`; dq's output from `dq run`."""
    res = {}
    output, err = run_dq_output(case, data, threads, dq, folder)
    for backend in ("generated", "jit"):
        js, berr = run_dq_bench(case, data, threads, dq, backend)
        name = "dq-" + backend
        entry = next((b for b in (js or {}).get("backends", []) if b.get("backend") == backend), None)
        if entry is None:
            res[name] = result("error", note=berr or f"no '{backend}' entry in dq bench output")
            continue
        res[name] = result("ok", entry["median_s"], entry.get("reps"),
                           dq_gbps=entry.get("gbps"), jit_compile_us=js.get("jit_compile_us"))
        mem = next((b for b in js.get("backends", []) if b.get("backend") == "memcpy"), None)
        if mem:
            res["dq-memcpy"] = result("ok", mem["median_s"], mem.get("reps"), dq_gbps=mem.get("gbps"))
    return output, err, res


# ----------------------------------------------------------------------------- exactness

def compare(ref, got):
    """Bit comparison (NaN == NaN). Returns mismatch count, first index, and which of the
    peers' known deviations (PEERS.md, SPEC section 9) explain the mismatches."""
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return {"exact": False, "mismatches": None, "detail": f"shape/dtype {got.shape} {got.dtype}"}
    ut = np.uint32 if ref.dtype.itemsize == 4 else np.uint16
    rb, gb = ref.view(ut).ravel(), got.view(ut).ravel()
    both_nan = np.isnan(ref.astype(np.float32)).ravel() & np.isnan(got.astype(np.float32)).ravel()
    bad = np.flatnonzero((rb != gb) & ~both_nan)
    if bad.size == 0:
        return {"exact": True, "mismatches": 0}
    i = int(bad[0])
    return {"exact": False, "mismatches": int(bad.size), "first_index": i,
            "ref": f"{float(ref.ravel()[i])!r} (0x{int(rb[i]):x})",
            "got": f"{float(got.ravel()[i])!r} (0x{int(gb[i]):x})",
            "explained": explain(ref.ravel()[bad], got.ravel()[bad], rb[bad], gb[bad])}


def explain(ref, got, rb, gb):
    """Classify mismatching elements by the known deviations; the rest are 'unexplained'."""
    sign_bit = 1 << (8 * rb.dtype.itemsize - 1)
    neg_zero = (rb == sign_bit) & (gb == 0)
    r32 = ref.astype(np.float32)
    tiny = np.finfo(ref.dtype).tiny if ref.dtype != ml_dtypes.bfloat16 else np.float32(2.0 ** -126)
    flushed = (r32 != 0) & (np.abs(r32) < tiny) & ((gb & (sign_bit - 1)) == 0)
    counts = {"-0 returned as +0": int(neg_zero.sum()), "subnormal flushed to zero": int(flushed.sum()),
              "unexplained": int((~neg_zero & ~flushed).sum())}
    return {k: v for k, v in counts.items() if v}


KNOWN = {  # PEERS.md / SPEC section 9: where a peer's arithmetic departs from the contract
    "-0 returned as +0": "oneDNN's generic 8-bit path adds +0.0 (8-bit per-group, 8-bit -> f16/bf16)",
    "subnormal flushed to zero": "oneDNN flushes f32 subnormals when converting to bf16",
}


def mismatch_note(be):
    parts = [f"{n} x {k}" + (f" ({KNOWN[k]})" if k in KNOWN else ": not a known difference, investigate")
             for k, n in be.get("explained", {"unexplained": be["mismatches"]}).items()]
    return f"{be['mismatches']} of the elements differ from the reference, first at {be['first_index']} " \
           f"(ref {be['ref']}, got {be['got']}): " + "; ".join(parts)


# ----------------------------------------------------------------------------- report

def gbps(case, r):
    return (case.src_bytes + case.dst_bytes) / r["median_s"] / 1e9


def prepare(case):
    """A case's inputs (written to its folder for the oneDNN driver and `dq run`) and
    its SPEC formula output: once per case, whatever the thread counts and rounds."""
    data = generate(case)
    write_inputs(case, data, OUT / case.name)
    return data, spec_formula(case, data)


def run_case(case, threads, args, rule, dq_ok, inputs):
    folder = OUT / case.name
    data, formula = inputs
    row = {"case": case.name, "threads": threads, "shape": list(case.shape), "op": case.op,
           "src": case.src, "dst": case.dst, "qtype": case.qtype, "axis": case.axis,
           "group_shape": list(case.group_shape) if case.group_shape else None,
           "zps": case.zps, "src_bytes": case.src_bytes, "dst_bytes": case.dst_bytes, "impls": {}}
    impls = row["impls"]

    # The yardstick is measured beside the others, each round.
    impls["memcpy"] = run_memcpy(case.dst_bytes, threads, rule)

    reference, ref_name = formula, "SPEC formula (NumPy)"
    if dq_ok:
        dq_out, err, dq_res = run_dq(case, data, threads, args.dq, folder)
        impls.update(dq_res)
        if dq_out is not None:
            row["dq_vs_formula"] = compare(formula, dq_out)
            reference, ref_name = dq_out, "dq run --backend auto"
        else:
            row["dq_run_error"] = err
    row["reference"] = ref_name

    impls["oneDNN"] = run_onednn(case, data, threads, rule, args.driver, folder)
    impls["ORT"] = run_ort(case, data, threads, rule)
    impls["NumPy"] = run_numpy(case, data, threads, rule)

    for name, r in impls.items():
        out = r.pop("_output", None)
        if r["status"] == "ok" and name != "memcpy" and "gbps" not in r:
            r["gbps"] = gbps(case, r)
        if r["status"] == "ok":
            r["us_per_call"] = r["median_s"] * 1e6
        if out is not None:
            r["bitexact"] = compare(reference, out)
            if not r["bitexact"]["exact"]:
                r["note"] = mismatch_note(r["bitexact"])
    return row


def median_round(rounds):
    """One row from the rounds of a case: each implementation's round with the median
    time (the lower middle of an even count), its per-round times kept in `rounds_s`."""
    row = rounds[0]
    for name in row["impls"]:
        ok = [r["impls"][name] for r in rounds if r["impls"].get(name, {}).get("status") == "ok"]
        if not ok:
            continue
        ok.sort(key=lambda r: r["median_s"])
        best = dict(ok[(len(ok) - 1) // 2])
        best["rounds_s"] = [r["median_s"] for r in ok]
        row["impls"][name] = best
    return row


def fmt_cell(row, name):
    r = row["impls"].get(name)
    if not r:
        return ""
    if r["status"] != "ok":
        return r["status"]
    s = f"{r['gbps']:.2f}"
    if row["src_bytes"] + row["dst_bytes"] < 4 << 20:  # cache-resident: also µs per call
        s += f" ({r['us_per_call']:.1f} µs)"
    return s


def exact_cell(row):
    parts = []
    for name in ["dq-generated", "oneDNN", "ORT", "NumPy"]:
        r = row["impls"].get(name, {})
        be = r.get("bitexact")
        if be is None:
            continue
        parts.append(f"{name} ✓" if be["exact"] else
                     f"{name} ✗ {be['mismatches']} diffs @{be.get('first_index')}")
    if "dq_vs_formula" in row:
        be = row["dq_vs_formula"]
        parts.append("dq=formula ✓" if be["exact"] else f"dq≠formula {be['mismatches']} diffs")
    return ", ".join(parts) + f" (vs {'dq' if row['reference'].startswith('dq') else 'formula'})"


def markdown(rows):
    names = [n for n in IMPLS if any(n in r["impls"] for r in rows)]
    lines = ["| case | threads | " + " | ".join(names) + " | bit-exact |",
             "|---|---|" + "---|" * len(names) + "---|"]
    for r in rows:
        cells = [fmt_cell(r, n) for n in names]
        lines.append(f"| {r['case']} | {r['threads']} | " + " | ".join(cells) + f" | {exact_cell(r)} |")
    notes = sorted({f"- {r['case']} / {n}: {v['status']}: {v['note']}"
                    for r in rows for n, v in r["impls"].items() if v.get("note") and v["status"] != "n/a"})
    notes += [f"- {r['case']} {r['threads']}T / dq vs SPEC formula: {mismatch_note(r['dq_vs_formula'])}"
              for r in rows if not r.get("dq_vs_formula", {"exact": True})["exact"]]
    notes += [f"- {r['case']} {r['threads']}T / dq run failed: {r['dq_run_error']}"
              for r in rows if r.get("dq_run_error")]
    notes.append("- NumPy is single-threaded (n/a at 2 threads). GB/s = (src + dst bytes) / median "
                 "time; memcpy = np.copyto of a dst-sized buffer, read + write bytes. Each "
                 "implementation is timed alone, back to back (dq: `dq bench --no-memcpy`).")
    return "\n".join(lines + ([""] + ["Notes:"] + notes if notes else []))


def chart(rows, path, cpu):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n in IMPLS if any(r["impls"].get(n, {}).get("status") == "ok" for r in rows)]
    labels = [f"{r['case']}\n{r['threads']}T" for r in rows]
    fig, ax = plt.subplots(figsize=(max(10, 1.1 * len(rows)), 6))
    width = 0.8 / max(1, len(names))
    for k, n in enumerate(names):
        ys = [r["impls"].get(n, {}).get("gbps") if r["impls"].get(n, {}).get("status") == "ok" else 0
              for r in rows]
        ax.bar([i + (k - (len(names) - 1) / 2) * width for i in range(len(rows))],
               [y or 0 for y in ys], width, label=n)
    ax.set_yscale("log")
    ax.set_ylabel("GB/s (src + dst bytes / median time), log scale")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_title(f"Dequantization throughput: dq vs peers (missing bar = unsupported / n.a.)\n{cpu}",
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def cpu_model():
    """The CPU as /proc/cpuinfo names it, with family/model and the ISA extensions that matter
    here, e.g. 'AMD EPYC (family 26 model 2; avx512f avx512bw avx512_bf16 avx512vbmi)'."""
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            if not line.strip():
                break  # the first processor's block is enough
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    except OSError:
        return platform.processor() or platform.machine()
    wanted = ["avx2", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16",
              "avx512vbmi", "amx_tile"]
    flags = set(fields.get("flags", "").split())
    isa = " ".join(f for f in wanted if f in flags)
    return (f"{fields.get('model name', platform.machine())} (family {fields.get('cpu family', '?')} "
            f"model {fields.get('model', '?')}; {isa})")


def machine_info():
    cpu = cpu_model()
    import onnxruntime
    return {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "onnxruntime": onnxruntime.__version__,
            "onednn_wheel": "onednn==2026.1.0 (oneDNN 3.13.2)",
            "loadavg_at_start": os.getloadavg()}  # other processes make 2-thread rows noisy


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--driver", help="path of the compiled oneDNN driver")
    ap.add_argument("--dq", help="path of target/release/dq")
    ap.add_argument("--cases", help="comma list of case names (default: all)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--min-reps", type=int, default=10)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--max-time", type=float, default=3.0)
    ap.add_argument("--keep-inputs", action="store_true", help="keep out/<case>/*.bin")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every case this many times, rounds interleaved (each "
                         "implementation's median round is kept: a noisy machine then "
                         "favours no one by the order they run in)")
    args = ap.parse_args()

    rule = TimingRule(args.min_reps, args.min_time, args.max_time)
    cases = CASES if not args.cases else [c for c in CASES if c.name in args.cases.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    dq_ok = dq_available(args.dq)
    if not dq_ok:
        print("dq: not available (target/release/dq has no run/bench yet); "
              "checking peers against the SPEC formula in NumPy", file=sys.stderr)

    OUT.mkdir(exist_ok=True)
    info = machine_info()
    rows, t_start = [], time.time()
    for case in cases:
        inputs = prepare(case)
        for t in threads:
            rounds = []
            for r in range(max(1, args.rounds)):
                print(f"[peers] {case.name} {t}T round {r + 1} ...", file=sys.stderr, flush=True)
                rounds.append(run_case(case, t, args, rule, dq_ok, inputs))
            rows.append(median_round(rounds))
        if not args.keep_inputs:
            shutil.rmtree(OUT / case.name, ignore_errors=True)

    results = {"machine": info, "dq_available": dq_ok,
               "timing": vars(rule) | {"gbps": "(src bytes + dst bytes) / median seconds; "
                                               "memcpy: read + write bytes"},
               "wall_s": time.time() - t_start, "loadavg_at_end": os.getloadavg(), "rows": rows}
    (OUT / "results.json").write_text(json.dumps(results, indent=1))
    table = f"Measured on: {info['cpu']}, {info['cpus']} CPUs\n\n" + markdown(rows)
    (OUT / "table.md").write_text(table + "\n")
    chart(rows, OUT / "chart.png", info["cpu"])
    print(table)
    print(f"\nload average at start / end: {results['machine']['loadavg_at_start'][0]:.2f} / "
          f"{results['loadavg_at_end'][0]:.2f} on {os.cpu_count()} CPUs (a busy machine skews 2-thread rows)")
    print(f"\nwrote {OUT / 'results.json'}, {OUT / 'table.md'}, {OUT / 'chart.png'} "
          f"in {results['wall_s']:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
