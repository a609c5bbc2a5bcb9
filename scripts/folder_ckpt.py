"""Tiny quantized HuggingFace checkpoints for dq's folder output (issue 42), called by
make_folder_fixtures.py: an FP8 block-scaled one (`quant_method: "fp8"`,
`weight_block_size: [128, 128]`, transformers' FineGrainedFP8Config; f32 output) and a GPTQ one
(AutoGPTQ v1 format, 4 bits, group 32, symmetric, packed by make_hf_fixtures.py's
transcription of AutoGPTQ's `pack`; f16 output, the dtype gptqmodel dequantizes in).

Each is a random tiny Llama (2 layers, hidden 128, GQA 2/1 heads of 64, vocabulary
the llama fixture's sentencepiece one, whose tokenizer files sit beside the weights
with a generation_config.json), written to tests/fixtures/folder/<name>/. The script
records in <name>.expected.json what transformers loads from the quantized original
on CPU (`from_pretrained(dir, dtype=...)`; FP8 dequantizes itself there, GPTQ runs
gptqmodel 7.7's CPU kernel, whose weights are taken from its own `dequantize_weight`):
per tensor its dtype, shape and the FNV-1a 64 hash of its bytes, and the config.
With --dq, check.json says whether dq's folder (`dq convert DIR OUT --dtype f32|f16`)
loads with no missing or unexpected keys and those weights, whether its logits equal
the original's (GPTQ's kernel computes in its own order, so the max difference is
recorded too) and those of a plain model holding the original's float weights.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
IDS = [[1, 5, 9, 17, 33, 2, 40, 7]]


def fnv1a64(data: bytes) -> str:
    """FNV-1a 64 of `data`, as 16 hex digits (tests/cli/folder_ckpt.rs hashes the same)."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def tiny_config(vocab_size: int):
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=128,
        rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
    )


def write_checkpoint(path: Path, config, tensors: dict, quantization_config: dict, tokenizer: Path):
    from safetensors.torch import save_file

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    cfg = config.to_dict()
    cfg["quantization_config"] = quantization_config
    cfg["dtype"] = "bfloat16"
    cfg["architectures"] = ["LlamaForCausalLM"]
    (path / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
    for f in tokenizer.iterdir():
        shutil.copy(f, path / f.name)
    (path / "generation_config.json").write_text('{"bos_token_id": 1, "eos_token_id": 2}\n')


def fp8_blocks(w, block=128):
    """Per 128x128 block (partial at the edges): scale = amax / 448, codes = (w /
    scale) as float8_e4m3fn."""
    import torch

    n, k = w.shape
    scales = torch.empty((-(-n // block), -(-k // block)), dtype=torch.float32)
    codes = torch.empty((n, k), dtype=torch.float8_e4m3fn)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            b = w[i * block:(i + 1) * block, j * block:(j + 1) * block]
            s = (b.abs().max() / 448.0).clamp(min=1e-8)
            scales[i, j] = s
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = (b / s).to(torch.float8_e4m3fn)
    return codes, scales


def make_fp8(path: Path, vocab_size: int, tokenizer: Path):
    import torch
    from transformers import LlamaForCausalLM

    config = tiny_config(vocab_size)
    torch.manual_seed(1)
    model = LlamaForCausalLM(config)
    tensors = {}
    for name, p in model.state_dict().items():
        p = p.detach().float()
        if name.endswith("_proj.weight"):
            codes, scales = fp8_blocks(p)
            tensors[name] = codes
            tensors[name.removesuffix("weight") + "weight_scale_inv"] = scales
        else:
            tensors[name] = (p + 0.01 * torch.randn_like(p)).to(torch.bfloat16).contiguous()
    q = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128], "fmt": "e4m3"}
    write_checkpoint(path, config, tensors, q, tokenizer)


def make_gptq(path: Path, vocab_size: int, tokenizer: Path):
    import torch
    from transformers import LlamaForCausalLM

    import make_hf_fixtures as base

    config = tiny_config(vocab_size)
    torch.manual_seed(2)
    model = LlamaForCausalLM(config)
    rng = np.random.default_rng(7)
    tensors = {}
    for name, p in model.state_dict().items():
        if name.endswith("_proj.weight"):
            n, k = p.shape
            t, _ = base.gptq_linear(rng, k=k, n=n, bits=4, group_size=32, v1=True, act_order=False, sym=True)
            stem = name.removesuffix("weight")
            tensors[stem + "qweight"] = torch.from_numpy(t["qweight"])
            tensors[stem + "qzeros"] = torch.from_numpy(t["qzeros"])
            tensors[stem + "scales"] = torch.from_numpy(np.ascontiguousarray(t["scales"]))
            tensors[stem + "g_idx"] = torch.from_numpy(t["g_idx"])
        else:
            tensors[name] = (p.detach().float() + 0.01 * torch.randn_like(p)).to(torch.float16).contiguous()
    q = base.gptq_config(4, 32, False, True, "gptq")
    write_checkpoint(path, config, tensors, q, tokenizer)


# The dtype each checkpoint is loaded and converted in: FP8 dequantizes into the
# model's dtype (f32 here); GPTQ's dequantize computes in the scales' f16.
DTYPES = {"fp8": ("float32", "f32"), "gptq": ("float16", "f16")}


def hashes(sd: dict) -> dict:
    """Per tensor: dtype, shape, FNV-1a 64 of its bytes (little-endian, row-major)."""
    import torch

    out = {}
    for k, v in sd.items():
        v = v.detach().to("cpu").contiguous()
        raw = v.view(torch.uint8).numpy().tobytes()
        out[k] = {"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape), "fnv1a64": fnv1a64(raw)}
    return out


def load(path: Path, dtype: str):
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(
        str(path), dtype=getattr(torch, dtype), device_map="cpu", output_loading_info=True
    )


def float_state(model) -> dict:
    """The model's weights as float tensors under nn.Linear names: GPTQ linears through
    gptqmodel's own `dequantize_weight` (its CPU dequantize path), the rest as loaded."""
    sd = {}
    for name, m in model.named_modules():
        if hasattr(m, "qweight"):
            w = m.dequantize_weight().T  # [in, out] there
            assert tuple(w.shape) == (m.out_features, m.in_features), name
            sd[f"{name}.weight"] = w.contiguous()
    for k, v in model.state_dict().items():
        stem = k.rsplit(".", 1)[0]
        if f"{stem}.weight" not in sd or k == f"{stem}.weight":
            if not any(k.endswith(x) for x in ("qweight", "qzeros", "scales", "g_idx")):
                sd.setdefault(k, v)
    return sd


def reference(path: Path, expected: Path):
    """What transformers loads from the quantized original on CPU, recorded (the float
    weights, the config dq must write); the model and its float weights."""
    dtype = DTYPES[path.name][0]
    model, info = load(path, dtype)
    model.eval()
    weights = float_state(model)
    config = json.loads((path / "config.json").read_text())
    config.pop("quantization_config")
    config["dtype"] = dtype
    record = {"loading": {k: sorted(map(str, v)) for k, v in info.items() if v}, "tensors": hashes(weights), "config": config}
    expected.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return model, weights


def check(path: Path, dq: str, original, weights) -> dict:
    """dq's folder against transformers' loading of the original: keys, weights, and
    logits (against the original, and against a float model holding the original's
    float weights: for GPTQ gptqmodel's kernel does its own arithmetic)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype, flag = DTYPES[path.name]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        run = subprocess.run([dq, "convert", str(path), str(out), "--dtype", flag], capture_output=True, text=True)
        if run.returncode != 0:
            return {"dq_convert": run.stderr.strip()}
        model, info = load(out, dtype)
        model.eval()
        plain = AutoModelForCausalLM.from_config(model.config, dtype=getattr(torch, dtype)).eval()
        plain.load_state_dict(weights, strict=True)
        ids = torch.tensor(IDS)
        with torch.no_grad():
            a = original(ids).logits
            b = model(ids).logits
            c = plain(ids).logits
        return {
            "missing_keys": sorted(info["missing_keys"]),
            "unexpected_keys": sorted(info["unexpected_keys"]),
            "weights_equal": hashes(model.state_dict()) == hashes(weights),
            "logits_equal": bool(torch.equal(a, b)),
            "logits_max_abs_diff": float((a.float() - b.float()).abs().max()),
            "logits_equal_float_reference": bool(torch.equal(b, c)),
            "files": sorted(p.name for p in out.iterdir()),
        }
