"""LLM inference (the LLM issue's targets): pyflame.llm next to transformers + PyTorch, one run.

    python benchmarks/llm_benchmark.py [--device rocm|cpu] [--small] [--new-tokens 128] [--json out.json]

A TinyLlama-shaped random model (hidden 2048, 22 layers, 32 heads, 4 key/value heads,
intermediate 5632, vocab 32000: 1.10B parameters) in bfloat16, built by each library on the
device (random weights: speed does not depend on them). Measured:

- the device's copy bandwidth (x.clone() of 1 GiB: read and written), the bound of decode;
- decode, batch 1 and batch 32: tokens per second of greedy generation after a 16-token prompt,
  (generate N+3 tokens) - (generate 3 tokens) over N, so the prompt and the first steps' work
  (pyflame: the decode step's trace and capture) are left out; for batch 1 also the weights'
  bytes per second as a share of the copy bandwidth (the issue's target: >= 75%);
- prefill: one forward over a 512-token prompt, in ms;
- weight-only int8 and int4 (groups of 128, pyflame only): decode at batch 1 beside transformers'
  bf16, with the bytes of codes, scales and zero points read per token as a share of the copy
  bandwidth, and the int4 GEMV of the shape below in us beside torch's bf16 one;
- kernels: a decode GEMV (bf16 [1, 4096] x [14336, 4096]^T) in GB/s, and decode attention
  (scaled_dot_product_attention, 32 heads, one query over 4096 keys, head dim 128) in GB/s
  of the keys and values read; 100 calls back to back before one wait, as a decode step runs
  its kernels (one call and a wait also timed the launch and the wait: 30-50% more).

transformers runs eagerly (its default DynamicCache), as users call generate. --small
shrinks the model to 2 layers x 256 (a smoke run on a CPU).
"""

import argparse
import json
import platform
import time

import torch

import pyflame as pf
from pyflame import llm
from bench_util import git_commit

TINYLLAMA = dict(vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                 num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048, rms_norm_eps=1e-5)
SMALL = dict(TINYLLAMA, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8,
             num_key_value_heads=2, vocab_size=4096)


def seconds(fn, sync, repeat=5):
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def per_call(fn, sync, calls=100, repeat=3):
    """Seconds per call of `calls` calls in a row, then one wait (best of `repeat`)."""
    fn()
    sync()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def decode_tok_s(generate, batch, new_tokens, sync):
    """Tokens per second of the decode steps alone: generating new_tokens + 3 less generating 3 (the
    prompt, and pyflame's trace and capture of its decode step in the first two steps, left out)."""
    few = seconds(lambda: generate(batch, 3), sync, repeat=3)
    many = seconds(lambda: generate(batch, new_tokens + 3), sync, repeat=3)
    return batch * new_tokens / (many - few)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="rocm", choices=["rocm", "cpu"])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--json")
    args = ap.parse_args()
    from transformers import LlamaConfig, LlamaForCausalLM

    dev, tdev = args.device, ("cuda" if args.device == "rocm" else "cpu")
    shape = SMALL if args.small else TINYLLAMA
    pf_sync = (lambda: pf.synchronize()) if dev == "rocm" else (lambda: None)
    t_sync = (lambda: torch.cuda.synchronize()) if tdev == "cuda" else (lambda: None)
    results = {"device": dev, "commit": git_commit(), "torch": torch.__version__, "host": platform.node()}
    print(f"device {dev}; torch {torch.__version__} on {tdev}; commit {results['commit']}")

    x = pf.empty(512 * 2**20, dtype=pf.bfloat16, device=dev).fill_(1.0)
    copy_gbs = 2 * x.numel() * 2 / seconds(lambda: x.clone(), pf_sync) / 1e9
    del x
    results["copy_GBps"] = copy_gbs
    print(f"copy bandwidth (clone of 1 GiB)         {copy_gbs:8.0f} GB/s")

    with torch.device(tdev):
        ref = LlamaForCausalLM(LlamaConfig(**shape, tie_word_embeddings=False)).to(torch.bfloat16).eval()
    ref.generation_config.eos_token_id = None
    ref.generation_config.pad_token_id = 0
    pf.set_device(dev)  # the pyflame model's parameters are made (initialised) on the device
    model = llm.LlamaForCausalLM(llm.LlamaConfig(**shape)).to(pf.bfloat16).to(dev)
    pf.set_device("cpu")
    weight_bytes = sum(p.numel() for p in model.parameters()) * 2 - shape["vocab_size"] * shape["hidden_size"] * 2
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e9:.2f}B parameters, bf16; "
          f"decode reads {weight_bytes / 1e9:.2f} GB of weights per token (the embedding: one row)")

    def pf_generate(batch, n):
        ids = pf.tensor([[1 + i % 100 for i in range(16)]] * batch, device=dev)
        return model.generate(ids, max_new_tokens=n)  # the config has no end-of-sequence token

    def torch_generate(batch, n):
        ids = torch.tensor([[1 + i % 100 for i in range(16)]] * batch, device=tdev)
        with torch.no_grad():
            return ref.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)

    rows = []
    for batch in (1, 32):
        t = decode_tok_s(torch_generate, batch, args.new_tokens, t_sync)
        p = decode_tok_s(pf_generate, batch, args.new_tokens, pf_sync)
        extra = ""
        if batch == 1:
            share = p * weight_bytes / 1e9 / copy_gbs
            extra = f"  {p * weight_bytes / 1e9:6.0f} GB/s of weights, {100 * share:.1f}% of copy"
            results["decode_b1_copy_share"] = share
        rows.append((f"decode batch {batch} (tok/s)", t, p, p / t, extra))

    prompt = [[1 + i % 100 for i in range(512)]]
    pids, tids = pf.tensor(prompt, device=dev), torch.tensor(prompt, device=tdev)
    with torch.no_grad():
        t = seconds(lambda: ref(tids), t_sync) * 1e3
    with pf.no_grad():
        p = seconds(lambda: model(pids), pf_sync) * 1e3
    rows.append(("prefill 512 tokens (ms)", t, p, t / p, ""))

    d_in, d_out = (4096, 14336) if not args.small else (256, 512)
    px, pw = pf.randn(1, d_in, device=dev).to(pf.bfloat16), pf.randn(d_out, d_in, device=dev).to(pf.bfloat16)
    tx, tw = torch.randn(1, d_in, device=tdev, dtype=torch.bfloat16), torch.randn(d_out, d_in, device=tdev,
                                                                                    dtype=torch.bfloat16)
    gemv_bytes = d_in * d_out * 2
    with pf.no_grad():
        p = gemv_bytes / per_call(lambda: pf.nn.functional.linear(px, pw), pf_sync) / 1e9
    t = gemv_bytes / per_call(lambda: torch.nn.functional.linear(tx, tw), t_sync) / 1e9
    rows.append((f"GEMV bf16 {d_in}x{d_out} (GB/s)", t, p, p / t, ""))
    t_gemv_us = gemv_bytes / t / 1e3

    heads, keys, dim = (32, 4096, 128) if not args.small else (8, 256, 32)
    pq, pk, pv = (pf.randn(1, heads, n, dim, device=dev).to(pf.bfloat16) for n in (1, keys, keys))
    tq, tk, tv = (torch.randn(1, heads, n, dim, device=tdev, dtype=torch.bfloat16) for n in (1, keys, keys))
    kv_bytes = 2 * heads * keys * dim * 2
    with pf.no_grad():
        p = kv_bytes / per_call(lambda: pf.nn.functional.scaled_dot_product_attention(pq, pk, pv), pf_sync) / 1e9
    t = kv_bytes / per_call(lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv), t_sync) / 1e9
    rows.append((f"SDPA decode {heads}h x {keys} keys d{dim} (GB/s)", t, p, p / t, ""))

    # Weight-only int8 and int4 (groups of 128): the same decode, after the bf16 cases (quantize works in
    # place), against transformers' bf16 decode above; and the int4 GEMV alone, in GB/s of the codes,
    # scales and zero points it reads.
    torch_b1 = rows[0][1]
    for bits in (8, 4):
        if bits == 4:
            del model
            pf.set_device(dev)
            model = llm.LlamaForCausalLM(llm.LlamaConfig(**shape)).to(pf.bfloat16).to(dev)
            pf.set_device("cpu")
        model.quantize(bits, 128)
        q_bytes = sum(b.numel() * b.element_size() for n, b in model.named_buffers()
                      if n.rsplit(".", 1)[-1] in ("qweight", "scales", "zeros"))
        q_bytes += sum(p.numel() * 2 for n, p in model.named_parameters() if "norm" in n)
        p = decode_tok_s(pf_generate, 1, args.new_tokens, pf_sync)
        share = p * q_bytes / 1e9 / copy_gbs
        rows.append((f"decode batch 1 int{bits} (tok/s; torch: bf16)", torch_b1, p, p / torch_b1,
                     f"  {p * q_bytes / 1e9:6.0f} GB/s of weights, {100 * share:.1f}% of copy"))
        results[f"decode_b1_int{bits}_copy_share"] = share
    from pyflame import quant
    qw = quant.quantize_weight(pw, 4, 128)
    q_gemv_bytes = qw.codes.numel() + qw.scales.numel() * 2 + qw.zeros.numel()
    with pf.no_grad():
        p = per_call(lambda: pf.quantized_linear(px, qw.codes, qw.scales, qw.zeros, None, 4, 128), pf_sync)
    rows.append((f"GEMV int4 {d_in}x{d_out} (us; torch: bf16)", t_gemv_us, p * 1e6, t_gemv_us / (p * 1e6),
                 f"  {q_gemv_bytes / p / 1e9:6.0f} GB/s, {100 * q_gemv_bytes / p / 1e9 / copy_gbs:.0f}% of copy"))

    print(f"{'case':46s} {'torch':>10s} {'pyflame':>10s}  ratio")
    for name, t, p, ratio, extra in rows:
        print(f"{name:46s} {t:10.1f} {p:10.1f}  {ratio:5.2f}x{extra}")
        results[name] = {"torch": t, "pyflame": p, "ratio": ratio}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
