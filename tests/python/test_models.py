"""Model files from Python: kvrt.plan(model=...) and Runtime.cache(model=...)
give the numbers `kvrt plan --model FILE --json` gives, for every example
in examples/models/, with the tool's options as keywords."""
import os
import subprocess

import torch

import kvrt
from common import as_python, cli, raises

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "models")
REFUSED = {"minimax-m1.json": "attn_type_list[0]"}
GIB = 1 << 30


def examples():
    return sorted(f for f in os.listdir(MODELS) if f.endswith(".json"))


def cli_error(*args):
    """The tool's exit status and error line for args."""
    out = subprocess.run([os.environ["KVRT_CLI"]] + list(args), capture_output=True, text=True)
    return out.returncode, out.stderr.strip()


def test_plan_model_equal_cli():
    """kvrt.plan(model=X) == kvrt plan --model X --json for every example, at one block, blocks and 24 GiB"""
    checked = 0
    for name in examples():
        path = os.path.join(MODELS, name)
        if name in REFUSED:
            continue
        assert kvrt.plan(model=path) == cli("plan", "--json", "--model", path), name
        assert kvrt.plan(model=path, blocks=3, layout="BLHNC") == \
            as_python(cli("plan", "--json", "--model", path, "--blocks", "3", "--layout", "BLHNC")), name
        assert kvrt.plan(model=path, memory=24 * GIB) == \
            cli("plan", "--json", "--model", path, "--memory", "24GiB"), name
        checked += 1
    assert checked >= 10, "only %d examples" % checked


def test_plan_model_options_equal_cli():
    """kv_cache_dtype, block_size, attention_backend, max_model_len, max_num_batched_tokens as the tool's options"""
    cases = [
        ("deepseek-v3.json", dict(kv_cache_dtype="fp8", memory=24 * GIB),
         ["--kv-cache-dtype", "fp8", "--memory", "24GiB"]),
        ("deepseek-v3.json", dict(attention_backend="TRITON_MLA", block_size=32),
         ["--attention-backend", "TRITON_MLA", "--block-size", "32"]),
        ("deepseek-v3.2-exp.json", dict(kv_cache_dtype="fp8", memory=24 * GIB),
         ["--kv-cache-dtype", "fp8", "--memory", "24GiB"]),
        ("kimi-linear-48b-a3b-instruct.json", dict(block_size=64, memory=24 * GIB, max_model_len=65536),
         ["--block-size", "64", "--memory", "24GiB", "--max-model-len", "65536"]),
        ("gpt-oss-20b.json", dict(memory=8 * GIB, max_num_batched_tokens=2048, layout="HND"),
         ["--memory", "8GiB", "--max-num-batched-tokens", "2048", "--layout", "HND"]),
        ("llama-3.1-8b.json", dict(kv_cache_dtype="fp8_e4m3", blocks=2, kernel_block_size=8),
         ["--kv-cache-dtype", "fp8_e4m3", "--blocks", "2", "--kernel-block-size", "8"]),
        ("qwen3-next-80b-a3b.json", dict(kv_cache_dtype="fp8_e4m3", blocks=2),
         ["--kv-cache-dtype", "fp8_e4m3", "--blocks", "2"]),
    ]
    for name, kw, args in cases:
        path = os.path.join(MODELS, name)
        assert kvrt.plan(model=path, **kw) == as_python(cli("plan", "--json", "--model", path, *args)), (name, args)
    # The published Kimi-Linear config, as vLLM sizes it on Hopper.
    kimi = kvrt.plan(model=os.path.join(MODELS, "kimi-linear-48b-a3b-instruct.json"), memory=24 * GIB)
    assert kimi["bytes_per_block"] == 15224832 and kimi["num_blocks"] == 1692
    assert kimi["model"]["groups"][3]["spec"]["block_size"] == 1888


def test_plan_model_refusals_equal_cli():
    """a refused model or option raises kvrt.InvalidArgumentError with the message the tool prints"""
    cases = [
        ("minimax-m1.json", {}, []),
        ("deepseek-v3.json", dict(attention_backend="CUTLASS_MLA"), ["--attention-backend", "CUTLASS_MLA"]),
        ("deepseek-v3.json", dict(block_size=8), ["--block-size", "8"]),
        ("deepseek-v3.2-exp.json", dict(kv_cache_dtype="fp16"), ["--kv-cache-dtype", "fp16"]),
        ("llama-3.1-8b.json", dict(attention_backend="FLASHMLA"), ["--attention-backend", "FLASHMLA"]),
    ]
    for name, kw, args in cases:
        path = os.path.join(MODELS, name)
        e = raises(kvrt.InvalidArgumentError, kvrt.plan, model=path, **kw)
        rc, line = cli_error("plan", "--json", "--model", path, *args)
        assert rc == 2 and line == "kvrt: error: " + str(e), (line, str(e))
    e = raises(kvrt.InvalidArgumentError, kvrt.plan, model=os.path.join(MODELS, "llama-3.1-8b.json"),
               attention_backend="XFORMERS")
    assert "XFORMERS" in str(e) and "FLASH_ATTN_MLA" in str(e)
    e = raises(kvrt.InvalidArgumentError, kvrt.plan, model=os.path.join(MODELS, "llama-3.1-8b.json"), kv_heads=8)
    assert "kv_heads" in str(e)
    e = raises(kvrt.InvalidArgumentError, kvrt.plan, layers=2, blocks=2, head_size=8, kv_heads=1,
               kv_cache_dtype="fp8")
    assert "kv_cache_dtype" in str(e)
    e = raises(kvrt.InvalidArgumentError, kvrt.plan, model=os.path.join(MODELS, "llama-3.1-8b.json"), block_size=-1)
    assert "block_size" in str(e)


def test_cache_model_matches_plan():
    """Runtime.cache(model=X) on cpu has the blocks, layers and bytes of kvrt plan --model X"""
    budget = 96 << 20
    with kvrt.Runtime() as rt:
        for name in examples():
            path = os.path.join(MODELS, name)
            if name in REFUSED:
                e = raises(kvrt.InvalidArgumentError, rt.cache, model=path, blocks=1, backend="cpu")
                assert REFUSED[name] in str(e)
                continue
            with rt.cache(model=path, memory=budget, backend="cpu") as c:
                plan = kvrt.plan(model=path, memory=budget, layout=c.layout)
                assert c.num_blocks == plan["num_blocks"], name
                names = [n for g in plan["model"]["groups"] for n in g["layers"]]
                assert sorted(c.layer_names) == sorted(names), name
                # Every layer's view starts where the plan's set puts it and
                # steps from block to block by the set's block stride.
                base = None
                for s in plan["sets"]:
                    for i, layer in enumerate(s["layers"]):
                        t = torch.from_dlpack(c.layer(layer))
                        where = s["offset"] + i * s["layer_stride"]
                        base = t.data_ptr() - where if base is None else base
                        assert t.data_ptr() - base == where, (name, layer)
                        assert t.stride(0) * t.element_size() == s["block_stride"], (name, layer)
        # A config's options reach the cache: fp8 DeepSeek-V3 is FLASHMLA's 64-token pages of 576 bytes.
        path = os.path.join(MODELS, "deepseek-v3.json")
        with rt.cache(model=path, blocks=2, backend="cpu", kv_cache_dtype="fp8") as c:
            plan = kvrt.plan(model=path, blocks=2, layout=c.layout, kv_cache_dtype="fp8")
            assert plan["model"]["groups"][0]["spec"]["page_bytes"] == 64 * 576
            assert c.num_blocks == 2
        e = raises(kvrt.InvalidArgumentError, rt.cache, model={"layers": 2, "kv_heads": 1, "head_size": 8},
                   blocks=2, backend="cpu", kv_cache_dtype="fp8")
        assert "kv_cache_dtype" in str(e)
