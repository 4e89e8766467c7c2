"""pyflame.llm against transformers: tiny random Llama checkpoints written with save_pretrained
(single file and sharded; grouped-query heads; llama3 rope scaling; tied embeddings) give the same
logits and the same greedy tokens, on the CPU and, with the model moved by .to(device), the GPU."""

import json

import numpy as np
import pytest
import torch

import pyflame as pf
from pyflame import llm

transformers = pytest.importorskip("transformers")


def _placed(device):
    if device == "rocm" and not pf.rocm_is_available():
        pytest.skip(f"no usable GPU: {pf.rocm_unavailable_reason()}")
    return device


def _tiny(tmp_path, shards=False, **overrides):
    options = dict(vocab_size=96, hidden_size=64, intermediate_size=112, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, rms_norm_eps=1e-6, eos_token_id=None,
                   bos_token_id=None, pad_token_id=0)
    options.update(overrides)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**options)).eval()
    with torch.no_grad():  # norms away from 1, so that their weights matter
        for name, p in model.named_parameters():
            if "norm" in name:
                p.uniform_(0.5, 1.5)
    model.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="40KB" if shards else "5GB")
    return model


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("variant", ["plain", "sharded", "llama3_rope", "tied"])
def test_logits_and_greedy_tokens_match_transformers(tmp_path, device, variant):
    _placed(device)
    overrides = {"llama3_rope": dict(rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 16}),
                 "tied": dict(tie_word_embeddings=True)}.get(variant, {})
    reference = _tiny(tmp_path, shards=variant == "sharded", **overrides)
    if variant == "sharded":
        assert (tmp_path / "model.safetensors.index.json").exists()
    model = llm.LlamaForCausalLM.from_pretrained(str(tmp_path), device=device)
    ids = np.random.default_rng(1).integers(1, 96, size=(2, 12))
    with torch.no_grad():
        want = reference(torch.from_numpy(ids)).logits
        want_tokens = reference.generate(torch.from_numpy(ids), max_new_tokens=10, do_sample=False)
    got = model(pf.tensor(ids, device=device)).logits
    assert got.device.type == device
    np.testing.assert_allclose(got.to("cpu").detach().numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-4)
    tokens = model.generate(pf.tensor(ids, device=device), max_new_tokens=10)
    np.testing.assert_array_equal(tokens.to("cpu").detach().numpy(), want_tokens.detach().numpy())


@pytest.mark.parametrize("device", ["cpu", "rocm"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_apply_rotary_emb_is_transformers_rope(device, dtype):
    _placed(device)
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    rng = np.random.default_rng(4)
    q, k = (rng.standard_normal((2, 4, 7, 16)).astype(np.float32) for _ in range(2))
    angles = np.outer(np.arange(7), 1.0 / 10000 ** (np.arange(0, 16, 2) / 16))
    cos, sin = (np.concatenate([f(angles)] * 2, -1).astype(np.float32) for f in (np.cos, np.sin))
    tq, tk = apply_rotary_pos_emb(*(torch.from_numpy(a).to(getattr(torch, dtype)) for a in (q, k, cos, sin)),
                                  unsqueeze_dim=0)
    put = lambda a: pf.tensor(a, device=device).to(getattr(pf, dtype))  # noqa: E731
    tol = 1e-2 if dtype == "bfloat16" else 1e-6
    for got, want in ((pf.nn.functional.apply_rotary_emb(put(q), put(cos), put(sin)), tq),
                      (pf.nn.functional.apply_rotary_emb(put(k), put(cos), put(sin)), tk)):
        assert got.dtype == getattr(pf, dtype) and got.device.type == device
        np.testing.assert_allclose(got.float().to("cpu").detach().numpy(), want.float().detach().numpy(), rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="even"):
        pf.nn.functional.apply_rotary_emb(pf.ones(2, 3), pf.ones(2, 3), pf.ones(2, 3))


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_rotary_kv_cache_updates_the_caches_in_place(device):
    """F.rotary_kv_cache_ against apply_rotary_emb and slice writes: q rotated, the caches written where the
    position (on the device) says and nowhere else; a position past the cache raises IndexError and
    leaves the caches as they were."""
    _placed(device)
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 1, 8), (2, 2, 1, 8), (2, 2, 1, 8)))
    cos, sin = (rng.standard_normal((1, 8)).astype(np.float32) for _ in range(2))
    caches = [rng.standard_normal((2, 2, 6, 8)).astype(np.float32) for _ in range(2)]
    put = lambda a: pf.tensor(a, device=device)  # noqa: E731
    F = pf.nn.functional
    k_cache, v_cache = put(caches[0]), put(caches[1])
    got_q = F.rotary_kv_cache_(put(q), put(k), put(v), put(cos), put(sin), put(np.array([4])), k_cache, v_cache)
    assert got_q.device.type == device
    np.testing.assert_allclose(got_q.to("cpu").detach().numpy(), F.apply_rotary_emb(put(q), put(cos), put(sin)).to("cpu").detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    want_k, want_v = caches[0].copy(), caches[1].copy()
    want_k[:, :, 4:5] = F.apply_rotary_emb(pf.tensor(k), pf.tensor(cos), pf.tensor(sin)).detach().numpy()
    want_v[:, :, 4:5] = v
    np.testing.assert_allclose(k_cache.to("cpu").detach().numpy(), want_k, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(v_cache.to("cpu").detach().numpy(), want_v)
    with pytest.raises(IndexError, match="rotary_kv_cache: index 6 is out of bounds"):
        F.rotary_kv_cache_(put(q), put(k), put(v), put(cos), put(sin), put(np.array([6])), k_cache, v_cache)
        pf.synchronize()
    np.testing.assert_array_equal(v_cache.to("cpu").detach().numpy(), want_v)


def test_cached_decoding_equals_a_full_forward(tmp_path):
    """Prefill in two chunks, then steps through the cache: each position's logits are the full forward's."""
    _tiny(tmp_path)
    model = llm.LlamaForCausalLM.from_pretrained(str(tmp_path))
    ids = pf.tensor(np.random.default_rng(2).integers(1, 96, size=(1, 9)))
    full = model(ids).logits
    cache = model.new_cache(1, 9)
    parts = [model(ids[:, :4], cache, 0).logits, model(ids[:, 4:7], cache, 4).logits]
    parts += [model(ids[:, i:i + 1], cache, i).logits for i in (7, 8)]
    np.testing.assert_allclose(pf.cat(parts, 1).detach().numpy(), full.detach().numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="the cache holds 9 positions; positions 7..10 do not fit"):
        model(ids[:, :4], cache, 7)


def test_sampling_stops_and_streams(tmp_path):
    _tiny(tmp_path)
    model = llm.LlamaForCausalLM.from_pretrained(str(tmp_path))
    ids = pf.tensor([[5, 6, 7]])
    pf.manual_seed(3)
    a = model.generate(ids, max_new_tokens=6, do_sample=True, temperature=0.7, top_k=20, top_p=0.9)
    pf.manual_seed(3)
    b = model.generate(ids, max_new_tokens=6, do_sample=True, temperature=0.7, top_k=20, top_p=0.9)
    assert a.tolist() == b.tolist() and a.shape == (1, 9)
    greedy = model.generate(ids, max_new_tokens=6).tolist()[0]
    stop = greedy[4]  # the second new token as the end of sequence: generation stops there

    class Streamer:
        def __init__(self):
            self.seen = []

        def put(self, t):
            self.seen.append(t.tolist())

        def end(self):
            self.seen.append("end")

    streamer = Streamer()
    stopped = model.generate(ids, max_new_tokens=6, eos_token_id=stop, streamer=streamer).tolist()[0]
    assert stopped == greedy[:greedy.index(stop) + 1]
    assert streamer.seen[0] == [[5, 6, 7]] and streamer.seen[-1] == "end" and len(streamer.seen) == len(stopped) - 1
    with pytest.raises(ValueError, match="left"):
        model.generate(ids, attention_mask=pf.tensor([[1, 1, 0]]))
    with pytest.raises(ValueError, match="shape"):
        model.generate(ids, attention_mask=pf.tensor([[1, 1]]))


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_left_padded_batch_matches_transformers(tmp_path, device):
    """Prompts of three lengths padded on the left: the logits at the real tokens and the greedy tokens
    are transformers' (whose rotary positions also skip the padding)."""
    _placed(device)
    reference = _tiny(tmp_path)
    model = llm.LlamaForCausalLM.from_pretrained(str(tmp_path)).to(device)
    rng = np.random.default_rng(5)
    lengths = (7, 4, 1)
    ids = np.zeros((3, 7), dtype=np.int64)
    mask = np.zeros((3, 7), dtype=np.int64)
    for row, n in enumerate(lengths):
        ids[row, 7 - n:] = rng.integers(1, 96, size=n)
        mask[row, 7 - n:] = 1
    with torch.no_grad():
        want = reference(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits.detach().numpy()
        want_tokens = reference.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                                         max_new_tokens=8, do_sample=False)
    got = model(pf.tensor(ids, device=device), attention_mask=pf.tensor(mask, device=device)).logits
    real = mask.astype(bool)
    np.testing.assert_allclose(got.to("cpu").detach().numpy()[real], want[real], rtol=1e-4, atol=1e-4)
    tokens = model.generate(pf.tensor(ids, device=device), max_new_tokens=8,
                            attention_mask=pf.tensor(mask, device=device))
    np.testing.assert_array_equal(tokens.to("cpu").detach().numpy(), want_tokens.detach().numpy())


@pytest.mark.parametrize("device", ["cpu", "rocm"])
def test_generate_reuses_its_cache_and_decode_step(tmp_path, device):
    """A second generate of the same batch size that needs no more positions reuses the first's cache and
    compiled step (traced once); its tokens are transformers' though the cache holds the first call's
    keys past its prompt. A padded batch, a longer generation or a model converted to another dtype
    (Module.to) get their own, and the tokens stay right."""
    _placed(device)
    reference = _tiny(tmp_path)
    model = llm.LlamaForCausalLM.from_pretrained(str(tmp_path)).to(device)
    rng = np.random.default_rng(8)

    def check(ids, new, mask=None):
        with torch.no_grad():
            kwargs = {} if mask is None else dict(attention_mask=torch.from_numpy(mask))
            want = reference.to(torch.float64 if model.lm_head.weight.dtype == pf.float64 else torch.float32)
            want = want.generate(torch.from_numpy(ids), max_new_tokens=new, do_sample=False, **kwargs)
        got = model.generate(pf.tensor(ids, device=device), max_new_tokens=new,
                             attention_mask=None if mask is None else pf.tensor(mask, device=device))
        np.testing.assert_array_equal(got.to("cpu").detach().numpy(), want.detach().numpy())
        return model._generation[-1]

    step = check(rng.integers(1, 96, size=(2, 9)), 8)
    assert check(rng.integers(1, 96, size=(2, 5)), 6) is step and len(step.graphs()) == 1
    mask = np.ones((2, 5), dtype=np.int64)
    mask[1, :2] = 0
    padded = check(rng.integers(1, 96, size=(2, 5)), 4, mask)
    assert padded is not step and check(rng.integers(1, 96, size=(2, 5)), 4, mask) is padded
    assert check(rng.integers(1, 96, size=(2, 9)), 12) is not padded
    model.double()
    assert check(rng.integers(1, 96, size=(2, 9)), 4) is not step

def test_bad_checkpoints(tmp_path):
    _tiny(tmp_path, shards=True)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    missing = sorted(set(index["weight_map"].values()))[-1]
    (tmp_path / missing).unlink()
    with pytest.raises(FileNotFoundError, match="missing"):
        llm.LlamaForCausalLM.from_pretrained(str(tmp_path))
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(dict(config, model_type="gpt2", architectures=["GPT2LMHeadModel"])))
    with pytest.raises(ValueError, match="gpt2"):
        llm.LlamaForCausalLM.from_pretrained(str(tmp_path))


def test_estimate_memory_counts_weights_and_cache():
    c = llm.LlamaConfig(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                        num_attention_heads=32, num_key_value_heads=4)
    m = llm.estimate_memory(c, batch_size=1, seq_len=2048)
    params = 2 * 32000 * 2048 + 22 * (2048 * 64 * (2 * 32 + 2 * 4) + 3 * 2048 * 5632 + 2 * 2048) + 2048
    assert m["weights_bytes"] == 2 * params  # TinyLlama's 1.10B parameters in bfloat16
    assert m["kv_cache_bytes"] == 2 * 22 * 2048 * 4 * 64 * 2
    assert m["total_bytes"] == m["weights_bytes"] + m["kv_cache_bytes"]
    assert llm.estimate_memory(c, 1, 2048, weight_bits=4)["weights_bytes"] < m["weights_bytes"] / 3


def test_generate_command_streams_the_greedy_text(tmp_path):
    """python -m pyflame.llm.generate with a checkpoint and its tokenizer.json: the greedy tokens as text."""
    tokenizers = pytest.importorskip("tokenizers")
    import subprocess
    import sys

    _tiny(tmp_path)
    vocab = {f"w{i}": i for i in range(95)}
    vocab["[UNK]"] = 95
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    prompt = "w5 w6 w7"
    model = llm.LlamaForCausalLM.from_pretrained(str(tmp_path))
    new = model.generate(pf.tensor([tokenizer.encode(prompt).ids]), max_new_tokens=6).tolist()[0][3:]
    run = subprocess.run([sys.executable, "-m", "pyflame.llm.generate", "--model", str(tmp_path), "--prompt", prompt,
                          "--max-new-tokens", "6", "--device", "cpu"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == prompt + tokenizer.decode(new) + "\n"
    assert "prefill: 3 tokens" in run.stderr and "decode:" in run.stderr


def test_generate_refuses_a_cache_larger_than_the_gpu():
    """A key/value cache that cannot fit raises ROCmMemoryError saying what it needs, before allocating it."""
    _placed("rocm")
    config = llm.LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4)
    model = llm.LlamaForCausalLM(config).to("rocm")
    ids = pf.tensor([[1, 2]], device="rocm")
    before = pf.cuda.memory_allocated()
    with pytest.raises(pf.ROCmMemoryError, match=r"key/value cache for 1 x \d+ positions needs [\d.]+ GiB"):
        model.generate(ids, max_new_tokens=2 ** 31)
    assert pf.cuda.memory_allocated() == before
