"""Generate text with a Llama checkpoint, streaming it, and report prefill and decode speeds.

    python -m pyflame.llm.generate [--model DIR] [--prompt "..."] [--max-new-tokens 64]
                                   [--device rocm|cpu] [--dtype bfloat16|float16|float32]
                                   [--sample --temperature 0.8 --top-k 50 --top-p 0.95]

DIR is a Hugging Face directory (config.json, model.safetensors or shards). Its tokenizer.json
encodes the prompt and decodes the output through the `tokenizers` package where both exist;
otherwise the prompt is read as UTF-8 bytes (token id = byte value) and token ids are printed.
Without --model, a small random Llama is built (it says so): the text is noise, the speeds are
real. Nothing is downloaded.
"""

import argparse
import os
import sys
import time

import pyflame as pf

from . import LlamaConfig, LlamaForCausalLM

# The model made without --model: TinyLlama's layer shapes, 4 layers, a byte-sized vocabulary.
RANDOM_MODEL = dict(vocab_size=512, hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                    num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048)


class _Text:
    """Token ids to text: a tokenizers.Tokenizer, or the ids themselves."""

    def __init__(self, model_dir):
        self.tokenizer = None
        path = os.path.join(model_dir, "tokenizer.json") if model_dir else None
        if path and os.path.exists(path):
            try:
                from tokenizers import Tokenizer
            except ImportError:
                print("pyflame.llm.generate: tokenizer.json found but the `tokenizers` package is not installed; "
                      "reading the prompt as bytes and printing token ids", file=sys.stderr)
            else:
                self.tokenizer = Tokenizer.from_file(path)

    def encode(self, prompt):
        return self.tokenizer.encode(prompt).ids if self.tokenizer else list(prompt.encode("utf-8"))

    def decode(self, ids):
        return self.tokenizer.decode(ids) if self.tokenizer else " ".join(map(str, ids)) + " "


class _Streamer:
    """transformers' streamer interface: prints the new text as each step's token arrives and keeps the
    times of the first and the last token (put() receives tensors already on the host: the times
    are the device's)."""

    def __init__(self, text):
        self.text, self.ids, self.shown, self.times = text, [], "", []

    def put(self, ids):
        if not self.times:  # the prompt
            self.times.append(time.perf_counter())
            return
        self.ids += ids.tolist()
        self.times.append(time.perf_counter())
        text = self.text.decode(self.ids)
        print(text[len(self.shown):], end="", flush=True)
        self.shown = text

    def end(self):
        print(flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a Hugging Face Llama directory (default: a small random model)")
    ap.add_argument("--prompt", default="The quick brown fox")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--device", default="rocm" if pf.rocm_is_available() else "cpu")
    ap.add_argument("--dtype", choices=["bfloat16", "float16", "float32"],
                    help="default: bfloat16 on a GPU, float32 on the CPU")
    ap.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--top-k", type=int)
    ap.add_argument("--top-p", type=float)
    args = ap.parse_args(argv)
    dtype = getattr(pf, args.dtype or ("bfloat16" if args.device != "cpu" else "float32"))

    t0 = time.perf_counter()
    if args.model:
        model = LlamaForCausalLM.from_pretrained(args.model, dtype=dtype, device=args.device)
        what = args.model
    else:
        model = LlamaForCausalLM(LlamaConfig(**RANDOM_MODEL)).to(dtype).to(args.device)
        what = "a random Llama (no --model given: the text is noise, the speeds are real)"
    params = sum(p.numel() for p in model.parameters())
    print(f"pyflame.llm.generate: {what}; {params / 1e9:.2f}B parameters, {dtype}, on "
          f"{args.device} (loaded in {time.perf_counter() - t0:.1f} s)", file=sys.stderr)

    text = _Text(args.model)
    ids = text.encode(args.prompt)
    if not ids:
        ap.error("the prompt encodes to no tokens")
    if max(ids) >= model.config.vocab_size:
        ap.error(f"the prompt has token ids up to {max(ids)}, past the model's vocabulary ({model.config.vocab_size})")
    streamer = _Streamer(text)
    print(args.prompt, end="", flush=True)
    model.generate(pf.tensor([ids], device=args.device), max_new_tokens=args.max_new_tokens, do_sample=args.sample,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, streamer=streamer)
    # times: the prompt's put, then each new token's. The first decode step traces the step and the
    # second captures it: the decode rate is the steps after them.
    t = streamer.times
    prefill = t[1] - t[0]
    line = f"prefill: {len(ids)} tokens in {prefill * 1e3:.1f} ms (with the first new token)"
    if len(t) > 4:
        line += f"; decode: {(len(t) - 4) / (t[-1] - t[3]):.1f} tok/s over the last {len(t) - 4} tokens"
    print(line, file=sys.stderr)

if __name__ == "__main__":
    main()
