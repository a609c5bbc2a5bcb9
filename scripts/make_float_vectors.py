#!/usr/bin/env python3
"""Writes tests/conformance_float/: the SPEC 10 float-src conformance vectors and
ml_dtypes' decode of every code (decode.txt).

Vectors come from ONNX Runtime's DequantizeLinear where this ORT runs the case
(float8 e4m3fn / e5m2 with f32 scales; float4e2m1 and e8m0 scales are tried
and, if ORT refuses them, computed by the formula below); the others by the
SPEC 10 formula with ml_dtypes: x = exact value as float32, s = scale as
float32, y = x * s (one float32 multiply), then rounded to the dst type.

Each case folder has case.json (the tests/conformance format, plus
"scales_type"), src.bin (4-bit: packed low nibble first), scales.bin, dst.bin.

    python3 -m venv venv && venv/bin/pip install -r scripts/requirements-fixtures.txt
    venv/bin/python scripts/make_float_vectors.py
"""
import json
import os
import sys

import ml_dtypes
import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "conformance_float")

TYPES = {
    "f8_e4m3": ml_dtypes.float8_e4m3fn,
    "f8_e5m2": ml_dtypes.float8_e5m2,
    "f4_e2m1": ml_dtypes.float4_e2m1fn,
    "e8m0": ml_dtypes.float8_e8m0fnu,
}
DST = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def decode(name, codes):
    """float32 values of uint8 codes of type `name` (ml_dtypes)."""
    return np.asarray(codes, np.uint8).view(TYPES[name]).astype(np.float32)


def write_decode():
    with open(os.path.join(OUT, "decode.txt"), "w") as f:
        f.write(f"# ml_dtypes {ml_dtypes.__version__}: dtype code f32-bits\n")
        for name in TYPES:
            n = 16 if name == "f4_e2m1" else 256
            vals = decode(name, np.arange(n)).view(np.uint32)
            for c, v in enumerate(vals):
                f.write(f"{name} {c} {int(v):08x}\n")


def pack4(codes):
    codes = list(codes) + ([0] if len(codes) % 2 else [])
    return bytes(codes[i] | (codes[i + 1] << 4) for i in range(0, len(codes), 2))


def formula(src_t, codes, scales_f32, scale_index, dst_t):
    x = decode(src_t, codes.reshape(-1)).reshape(codes.shape)
    s = scales_f32.reshape(-1)[scale_index]
    with np.errstate(all="ignore"):
        y = (x * s).astype(np.float32)
    return y.astype(DST[dst_t])


def ort_dequantize(src_t, codes, scales, axis, block, dst_t, scales_t):
    """ORT DequantizeLinear, or None where this ORT does not run the case."""
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    x_type = {
        "f8_e4m3": TensorProto.FLOAT8E4M3FN,
        "f8_e5m2": TensorProto.FLOAT8E5M2,
        "f4_e2m1": TensorProto.FLOAT4E2M1,
    }[src_t]
    s_type = {"f32": TensorProto.FLOAT, "e8m0": TensorProto.FLOAT8E8M0}[scales_t]
    y_type = {"f32": TensorProto.FLOAT}[dst_t]
    opset = 24 if scales_t == "e8m0" else (23 if src_t == "f4_e2m1" else 21)
    attrs = {"axis": axis} if axis is not None else {}
    if block:
        attrs["block_size"] = block
    if scales_t == "e8m0":
        attrs["output_dtype"] = y_type
    # Inputs are fed as initializers of raw codes.
    xt = onnx.TensorProto()
    xt.name, xt.data_type = "x", x_type
    xt.dims.extend(codes.shape)
    xt.raw_data = pack4(codes.reshape(-1)) if src_t == "f4_e2m1" else codes.astype(np.uint8).tobytes()
    st = onnx.TensorProto()
    st.name, st.data_type = "s", s_type
    st.dims.extend(scales.shape)
    st.raw_data = scales.tobytes()
    node = helper.make_node("DequantizeLinear", ["x", "s"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", y_type, None)],
                              initializer=[xt, st])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 11 if opset >= 23 else 10
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, {})[0]
    except Exception as e:  # noqa: BLE001 - any refusal means "not run by ORT"
        print(f"  ORT does not run {src_t}/{scales_t}: {str(e).splitlines()[0][:120]}", file=sys.stderr)
        return None


def case(name, src_t, dst_t, scales_t, codes, scales, qtype, axis=None, group=None):
    """Writes one vector; scales are uint8 codes (e8m0) or float32."""
    shape = codes.shape
    idx = np.zeros(shape, np.int64)
    if qtype == "per_channel":
        idx = np.broadcast_to(
            np.arange(shape[axis]).reshape([-1 if d == axis else 1 for d in range(len(shape))]), shape)
    elif qtype == "per_group":
        sshape = [(d + g - 1) // g for d, g in zip(shape, group)]
        grid = np.indices(shape)
        idx = np.ravel_multi_index([grid[d] // group[d] for d in range(len(shape))], sshape)
    # The scale as stored (e8m0 codes, or the dst dtype), then exactly as float32.
    if scales_t == "e8m0":
        s32 = decode("e8m0", scales)
    else:
        s32 = scales.astype(DST[dst_t]).astype(np.float32)
    want = formula(src_t, codes, s32, idx, dst_t)
    source = f"ml_dtypes-{ml_dtypes.__version__} formula"
    if dst_t == "f32":
        block = group[-1] if qtype == "per_group" else None
        ort_axis = axis if qtype == "per_channel" else (len(shape) - 1 if block else None)
        got = ort_dequantize(src_t, codes, scales, ort_axis, block, dst_t, scales_t)
        if got is not None:
            import onnxruntime
            nan = np.isnan(got) & np.isnan(want.astype(np.float32))
            same = (got.view(np.uint32) == want.view(np.uint32)) | nan
            if not same.all():
                sys.exit(f"{name}: ORT and the formula disagree at {np.argwhere(~same)[:5]}")
            want = got.astype(np.float32)
            source = f"onnxruntime-{onnxruntime.__version__} DequantizeLinear"
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    flat = codes.reshape(-1).astype(np.uint8)
    with open(os.path.join(d, "src.bin"), "wb") as f:
        f.write(pack4(flat) if src_t == "f4_e2m1" else flat.tobytes())
    with open(os.path.join(d, "scales.bin"), "wb") as f:
        f.write(scales.astype(np.uint8 if scales_t == "e8m0" else DST[dst_t]).tobytes())
    with open(os.path.join(d, "dst.bin"), "wb") as f:
        f.write(want.tobytes())
    j = {"op": "dynamic", "src_type": src_t, "dst_type": dst_t,
         "scales_type": dst_t if scales_t != "e8m0" else "e8m0",
         "shape": list(shape), "qtype": qtype, "zps_type": None, "source": source}
    if axis is not None:
        j["axis"] = axis
    if group is not None:
        j["group_shape"] = list(group)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(j, f, indent=2)
    print(f"{name}: {source}")


def main():
    os.makedirs(OUT, exist_ok=True)
    write_decode()
    rng = np.random.default_rng(16)
    every8 = np.arange(256, dtype=np.uint8)
    f32 = lambda *v: np.array(v, np.float32)  # noqa: E731
    e8 = np.array([0, 1, 100, 120, 126, 127, 128, 140, 200, 254, 255, 127], np.uint8)
    case("001-f8_e4m3-f32-per_tensor", "f8_e4m3", "f32", "f32", every8, f32(0.37), "per_tensor")
    case("002-f8_e5m2-f32-per_channel", "f8_e5m2", "f32", "f32", every8.reshape(4, 64),
         f32(1.5, -0.25, 3e-3, 1e30), "per_channel", axis=0)
    case("003-f8_e4m3-f32-per_group", "f8_e4m3", "f32", "f32", every8.reshape(4, 64),
         rng.standard_normal((4, 2)).astype(np.float32), "per_group", group=(1, 32))
    f4 = rng.integers(0, 16, (4, 65), dtype=np.uint8)
    case("004-f4_e2m1-f32-per_group", "f4_e2m1", "f32", "f32", f4,
         rng.standard_normal((4, 3)).astype(np.float32), "per_group", group=(1, 32))
    case("005-f4_e2m1-bf16-e8m0-per_group", "f4_e2m1", "bf16", "e8m0", f4,
         np.resize(e8, (4, 3)), "per_group", group=(1, 32))
    case("006-f8_e4m3-f32-e8m0-per_channel", "f8_e4m3", "f32", "e8m0", every8.reshape(4, 64),
         e8[[0, 5, 9, 10]], "per_channel", axis=0)
    case("007-f8_e5m2-f16-per_tensor", "f8_e5m2", "f16", "f16", every8, f32(0.1), "per_tensor")
    case("008-f8_e4m3-bf16-e8m0-per_group", "f8_e4m3", "bf16", "e8m0", every8.reshape(8, 32),
         e8[:8].reshape(8, 1), "per_group", group=(1, 32))
    case("009-f4_e2m1-f16-per_channel", "f4_e2m1", "f16", "f16",
         np.arange(16, dtype=np.uint8).repeat(3).reshape(16, 3), f32(*([0.5, -2.0, 7e-5] * 1)),
         "per_channel", axis=1)


if __name__ == "__main__":
    main()
