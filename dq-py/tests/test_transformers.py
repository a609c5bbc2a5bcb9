"""The drop-in on a real transformers GGUF load of committed tiny models: the same
state dict, bit for bit, with gguf-py's dequantize replaced by dq's.

Needs transformers and torch (not in CI's venv: the test then skips and says so; the
pure gguf-py check, test_gguf.py::test_patch_replaces_gguf_py_where_code_finds_it,
always runs)."""

from __future__ import annotations

import pytest

import dq
from conftest import FIXTURES

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
torch = pytest.importorskip("torch", reason="torch is not installed")

MODELS = ["llama", "qwen2", "gemma3"]


def load(name):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(FIXTURES / "folder"), gguf_file=f"{name}.gguf", dtype=torch.float32)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", MODELS)
def test_patched_load_equals_gguf_py_load(name, monkeypatch):
    want = load(name)
    calls = []
    native = dq.gguf.gguf_dequantize

    def counting(*args):
        calls.append(args[1])
        return native(*args)

    monkeypatch.setattr(dq.gguf, "gguf_dequantize", counting)
    dq.gguf.patch()
    try:
        got = load(name)
    finally:
        dq.gguf.unpatch()
    assert calls, "transformers did not call dq"
    assert got.keys() == want.keys()
    for k in want:
        assert torch.equal(got[k].view(torch.int32), want[k].view(torch.int32)), k
