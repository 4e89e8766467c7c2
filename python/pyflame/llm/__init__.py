"""pyflame.llm: Llama-family language models for inference (docs/llm.md).

A model is ordinary pf.nn modules over the library's ops (linear, rms_norm,
silu, scaled_dot_product_attention with grouped-query heads), named as Hugging
Face's LlamaForCausalLM names its weights, so a checkpoint's state dict loads
as it is. Generation keeps a key/value cache per layer, allocated once for the
prompt plus the new tokens and written in place at each step. After the
prompt, each step computes only the new position, with that position held in a
tensor on the device: every step then has the same shapes, so pf.compile traces
it once and, on a GPU, replays it as one captured device graph.

Rotary embeddings follow Hugging Face's rotate_half convention: the frequencies
pair dimension i with i + head_dim / 2. `rope_theta` and the llama3 frequency
scaling are read from `rope_parameters` (transformers >= 5) or the older
top-level keys. Nothing here imports transformers; the tests compare with it.
"""

import json
import math
import os
from dataclasses import dataclass, field, fields

import numpy as np

import pyflame as pf

from ..nn import Embedding, Linear, Module, ModuleList, Parameter
from ..nn import functional as F
from ..serialization import load as _load_safetensors

__all__ = ["LlamaConfig", "LlamaForCausalLM", "estimate_memory"]

_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass
class LlamaConfig:
    """The fields of a Hugging Face Llama config.json that the model reads (others are ignored)."""

    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 11008
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = None  # None: num_attention_heads (no grouped-query attention)
    head_dim: int = None  # None: hidden_size // num_attention_heads
    max_position_embeddings: int = 2048
    rms_norm_eps: float = 1e-6
    rope_parameters: dict = field(default_factory=lambda: {"rope_type": "default", "rope_theta": 10000.0})
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    bos_token_id: int = None
    eos_token_id: object = None  # an int or a list of ints
    pad_token_id: int = None
    dtype: str = None  # the checkpoint's dtype name, where config.json gives it

    def __post_init__(self):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"LlamaConfig: num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                             f"num_key_value_heads ({self.num_key_value_heads})")
        if self.hidden_act != "silu":
            raise pf.NotSupportedError(f"LlamaConfig: hidden_act {self.hidden_act!r}; Llama models use 'silu'")

    @classmethod
    def from_dict(cls, d):
        """From a config.json's dict: transformers >= 5's rope_parameters, or the older rope_theta and
        rope_scaling keys."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known and v is not None}
        if "rope_parameters" not in d or d["rope_parameters"] is None:
            rope = dict(d.get("rope_scaling") or {"rope_type": "default"})
            rope.setdefault("rope_type", rope.pop("type", "default"))
            rope["rope_theta"] = d.get("rope_theta", 10000.0)
            kwargs["rope_parameters"] = rope
        if "torch_dtype" in d and "dtype" not in kwargs and d["torch_dtype"] is not None:
            kwargs["dtype"] = d["torch_dtype"]
        return cls(**kwargs)

    @property
    def eos_token_ids(self):
        e = self.eos_token_id
        return [] if e is None else list(e) if isinstance(e, (list, tuple)) else [e]


def _inverse_frequencies(config):
    """The rotary frequencies theta^(-2i/d), with llama3's scaling of the long wavelengths where asked."""
    rope = config.rope_parameters
    dim = config.head_dim
    inv = 1.0 / (rope.get("rope_theta", 10000.0) ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    kind = rope.get("rope_type", "default")
    if kind == "default":
        return inv
    if kind != "llama3":
        raise pf.NotSupportedError(f"pyflame.llm: rope_type {kind!r} (supported: 'default', 'llama3')")
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old = rope["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


class LlamaAttention(Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=c.attention_bias)
        self.k_proj = Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=c.attention_bias)
        self.v_proj = Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=c.attention_bias)
        self.o_proj = Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=c.attention_bias)

    def forward(self, x, cos, sin, cache, start, mask):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        decode = cache is not None and isinstance(start, pf.Tensor)  # one token at the position `start`
        if decode and not (pf.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)):
            # A graph's decode step: the rotary embeddings and the cache writes in one kernel;
            # attention reads the whole cache, `mask` hiding the positions after it.
            k_cache, v_cache = cache
            q = F.rotary_kv_cache_(q, k, v, cos, sin, start, k_cache, v_cache)
            k, v = k_cache, v_cache
        else:
            q, k = F.apply_rotary_emb(q, cos, sin), F.apply_rotary_emb(k, cos, sin)
            if cache is not None:  # written in place; attention reads the filled part (all of it decoding)
                k_cache, v_cache = cache
                where = start if decode else slice(start, start + t)
                k_cache[:, :, where] = k
                v_cache[:, :, where] = v
                k, v = (k_cache, v_cache) if decode else (k_cache[:, :, :start + t], v_cache[:, :, :start + t])
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None and t > 1,
                                             enable_gqa=self.kv_heads != self.heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class LlamaMLP(Module):
    def __init__(self, config):
        super().__init__()
        c = config
        self.gate_proj = Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.up_proj = Linear(c.hidden_size, c.intermediate_size, bias=c.mlp_bias)
        self.down_proj = Linear(c.intermediate_size, c.hidden_size, bias=c.mlp_bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaRMSNorm(Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = Parameter(pf.ones(size))
        self.eps = eps

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class LlamaDecoderLayer(Module):
    def __init__(self, config):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config)
        self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x, cos, sin, cache, start, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, start, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(Module):
    def __init__(self, config):
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size)
        self.layers = ModuleList([LlamaDecoderLayer(config) for _ in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLMOutput:
    """What a forward returns: `.logits` [batch, tokens, vocab]."""

    def __init__(self, logits):
        self.logits = logits


class LlamaForCausalLM(Module):
    """A Llama decoder with its language-model head, Hugging Face's weight names and layout."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self._inv_freq = _inverse_frequencies(config)
        self._rope_tables = {}  # (device, dtype) -> cos, sin for positions 0..n-1, made on first use
        self._generation = None  # the last generate call's cache and compiled decode step (_generation_state)

    # ------------------------------------------------------------------ loading

    @classmethod
    def from_pretrained(cls, path, dtype=None, device=None):
        """A model from a Hugging Face directory: config.json and model.safetensors, or the shards a
        model.safetensors.index.json lists. Every weight is checked present before any is assigned.
        `dtype` converts the weights (default: as stored); `device` places the model."""
        with open(os.path.join(path, "config.json")) as f:
            raw = json.load(f)
        archs = raw.get("architectures") or []
        if raw.get("model_type") != "llama" and "LlamaForCausalLM" not in archs:
            raise ValueError(f"pyflame.llm: {path} holds a {raw.get('model_type')!r} model "
                             f"({', '.join(archs) or 'no architectures'}); LlamaForCausalLM loads Llama checkpoints")
        config = LlamaConfig.from_dict(raw)
        index = os.path.join(path, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = ["model.safetensors"]
        state = {}
        for name in files:
            file = os.path.join(path, name)
            if not os.path.exists(file):
                raise FileNotFoundError(f"pyflame.llm: {path}: the checkpoint file {name} is missing")
            state.update(_load_safetensors(file))
        model = cls(config)
        expected = set(model.state_dict())
        missing, unexpected = sorted(expected - set(state)), sorted(set(state) - expected)
        if config.tie_word_embeddings:
            missing = [k for k in missing if k != "lm_head.weight"]
            unexpected = [k for k in unexpected if k != "lm_head.weight"]
        if missing or unexpected:
            raise ValueError(f"pyflame.llm: {path} does not match LlamaForCausalLM: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")
        if config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
            state["lm_head.weight"] = state["model.embed_tokens.weight"]
        model.load_state_dict(state)
        if dtype is not None:
            model.to(dtype)
        elif state:
            model.to(next(iter(state.values())).dtype)
        return model.to(device) if device is not None else model

    # ------------------------------------------------------------------ forward

    def _rope_table(self, device, dtype, length):
        """cos and sin [n, head_dim] for positions 0..n-1, n >= length, kept on the device: made in float64
        on the host once, for max(max_position_embeddings, length) positions or more."""
        key = (str(device), dtype)
        table = self._rope_tables.get(key)
        if table is None or table[0].shape[0] < length:
            freqs = np.outer(np.arange(max(length, self.config.max_position_embeddings), dtype=np.float64),
                             self._inv_freq)
            emb = np.concatenate([freqs, freqs], axis=-1)
            table = self._rope_tables[key] = tuple(pf.tensor(f(emb).astype(np.float32), device=device).to(dtype)
                                                   for f in (np.cos, np.sin))
        return table

    def forward(self, input_ids, cache=None, start=0, attention_mask=None):
        """Logits [batch, tokens, vocab] for input_ids [batch, tokens] at positions start, start + 1, ...;
        `cache` (from new_cache) gets the keys and values written at those positions. `start` may be a
        one-element int64 tensor on the model's device (one token per row, a decode step whose position
        lives on the device, as a captured graph needs): attention then reads the whole cache, masked
        past that position. `attention_mask` [batch, start + tokens] (with a tensor `start`: the cache's
        length), as transformers': 0 marks padding on the left of a prompt, which no token attends to
        and which does not count in the rotary positions."""
        h = self.model.embed_tokens(input_ids)
        b, t = input_ids.shape
        dev = h.device
        decode = isinstance(start, pf.Tensor)
        if decode and (cache is None or t != 1):
            raise ValueError("LlamaForCausalLM: a tensor `start` takes one token per row and a cache")
        length = cache[0][0].shape[2] if decode else start + t  # the keys attended to
        if cache is not None and length > cache[0][0].shape[2]:
            raise ValueError(f"LlamaForCausalLM: the cache holds {cache[0][0].shape[2]} positions; positions "
                             f"{start}..{length - 1} do not fit (new_cache(batch, max_length) with a larger max_length)")
        cos, sin = self._rope_table(dev, h.dtype, length)
        mask = None
        if decode:
            mask = pf.arange(length, device=dev) <= start
        elif start > 0 or attention_mask is not None:  # query i sees keys up to start + i
            mask = pf.arange(length, device=dev).unsqueeze(0) <= (pf.arange(t, device=dev).unsqueeze(1) + start)
        if attention_mask is None:
            cos, sin = ((cos.index_select(0, start), sin.index_select(0, start)) if decode
                        else (cos[start:start + t], sin[start:start + t]))
        else:
            if tuple(attention_mask.shape) != (b, length):
                raise ValueError(f"LlamaForCausalLM: attention_mask must be [batch, {length}] (the positions "
                                 f"attended to), got {tuple(attention_mask.shape)}")
            valid = attention_mask.to(dev) != 0
            counted = (valid.long().cumsum(-1) - 1).clamp(min=0)  # each token's rotary position
            positions = counted.index_select(1, start) if decode else counted[:, start:]
            cos, sin = cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)  # [batch, 1, tokens, head_dim]
            mask = (mask.unsqueeze(0) & valid.unsqueeze(1)).unsqueeze(1)  # [batch, 1, tokens or 1, keys]
        for i, layer in enumerate(self.model.layers):
            h = layer(h, cos, sin, cache[i] if cache is not None else None, start, mask)
        return CausalLMOutput(self.lm_head(self.model.norm(h)))

    def quantize(self, bits=8, group_size=128):
        """Weight-only int8 or int4 in place: every linear layer (the projections, and lm_head unless it is
        the embedding's tied weight) becomes a pyflame.quant.QuantizedLinear with groups of group_size
        input columns. Returns the model."""
        from ..quant import QuantizedLinear

        for parent in list(self.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, Linear) and not (child is self.lm_head and self.config.tie_word_embeddings):
                    setattr(parent, name, QuantizedLinear.from_linear(child, bits, group_size))
        return self

    def new_cache(self, batch_size, max_length):
        """Per layer, (keys, values) [batch, kv_heads, max_length, head_dim] in the model's dtype and device."""
        c, w = self.config, self.model.embed_tokens.weight
        shape = (batch_size, c.num_key_value_heads, max_length, c.head_dim)
        return [(pf.zeros(shape, dtype=w.dtype, device=w.device), pf.zeros(shape, dtype=w.dtype, device=w.device))
                for _ in range(c.num_hidden_layers)]

    def generate(self, input_ids, max_new_tokens=20, do_sample=False, temperature=1.0, top_k=None, top_p=None,
                 eos_token_id=None, attention_mask=None, streamer=None):
        """The prompt followed by up to max_new_tokens tokens per row, as transformers' generate: greedy, or
        sampled (temperature, then top_k, then top_p). A row that produced an end-of-sequence token gets
        it repeated until every row has one or the length is reached. `streamer` (transformers' interface:
        put(ids), end()) receives the prompt, then each step's tokens. Prompts of different lengths are
        padded on the left, `attention_mask` [batch, prompt length] holding 0 at the padding (as
        transformers with padding_side="left"). The cache and the compiled decode step stay for the next
        call: one with the same batch size, device, dtype and padding (with or without) that needs no more
        positions reuses them, without tracing and capturing its step again."""
        if max_new_tokens <= 0:
            return input_ids
        eos = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id or self.config.eos_token_ids)
        batch, length = input_ids.shape
        device = input_ids.device
        valid = None
        if attention_mask is not None:
            valid = (attention_mask != 0).to(device)
            if tuple(valid.shape) != (batch, length):
                raise ValueError(f"generate: attention_mask must have input_ids' shape {(batch, length)}, "
                                 f"got {tuple(attention_mask.shape)}")
            if length > 1 and bool((valid[:, :-1] & ~valid[:, 1:]).any()):
                raise ValueError("generate: a prompt's padding must be on the left (padding_side='left'): "
                                 "attention_mask has a 0 after a 1")
            if bool(valid.all()):
                valid = None
        cache, position, mask, step = self._generation_state(batch, length + max_new_tokens, device, valid)
        position.fill_(length)
        tokens = input_ids
        done = pf.zeros(batch, dtype=pf.bool, device=device)
        if streamer is not None:
            streamer.put(input_ids.to("cpu"))
        with pf.no_grad():
            prompt_mask = mask[:, :length] if mask is not None else None
            logits = self(input_ids, cache, attention_mask=prompt_mask).logits[:, -1].float()
            for i in range(max_new_tokens):
                nxt = _sample(logits, temperature, top_k, top_p) if do_sample else logits.argmax(-1)
                if eos:
                    nxt = pf.where(done, eos[0], nxt)
                    for e in eos:
                        done = done | (nxt == e)
                tokens = pf.cat([tokens, nxt.unsqueeze(1)], 1)
                if streamer is not None:
                    streamer.put(nxt.to("cpu"))
                if (eos and bool(done.all())) or i + 1 == max_new_tokens:
                    break
                logits = step(nxt.unsqueeze(1))
        if streamer is not None:
            streamer.end()
        return tokens

    def _check_cache_fits(self, batch, length, device):
        """Raises pf.ROCmMemoryError, before anything is allocated, where a GPU's free memory (the driver's and
        the caching allocator's cached blocks) cannot hold the key/value cache of batch x length positions."""
        if device.type == "cpu":
            return
        w = self.model.embed_tokens.weight
        needed = estimate_memory(self.config, batch, length, w.dtype)["kv_cache_bytes"]
        index = device.index or 0
        free = pf.rocm_get_device_info(index)["free_memory"]
        free += pf.cuda.memory_reserved(index) - pf.cuda.memory_allocated(index)
        if needed > free:
            raise pf.ROCmMemoryError(
                f"LlamaForCausalLM.generate: the key/value cache for {batch} x {length} positions needs "
                f"{needed / 2**30:.2f} GiB; {free / 2**30:.2f} GiB of {device} are free (fewer new tokens or a "
                "smaller batch fit; llm.estimate_memory tells the sizes)")

    def _generation_state(self, batch, needed, device, padding):
        """(cache, position, mask, step) for a generation of `batch` rows over `needed` positions: the key/value
        cache; the position tensor the step reads and advances; the padding mask over the cache (None without
        padding), set from `padding` [batch, prompt length] with the positions after the prompt visible; the
        compiled decode step. The last call's where its batch, device, dtype and padding (or none) match and
        its cache holds `needed` positions (positions past a step's are masked, so a longer cache is
        right); else new ones, the old cache let go before the new one is checked and made."""
        key = (batch, str(device), self.model.embed_tokens.weight.dtype, padding is not None)
        state = self._generation
        if state is None or state[0] != key or state[1][0][0].shape[2] < needed:
            self._generation = None
            self._check_cache_fits(batch, needed, device)
            cache = self.new_cache(batch, needed)
            position = pf.zeros(1, dtype=pf.int64, device=device)
            mask = pf.ones(batch, needed, dtype=pf.bool, device=device) if padding is not None else None
            state = self._generation = (key, cache, position, mask, self._decode_step(cache, position, mask))
        _, cache, position, mask, step = state
        if mask is not None:
            mask.fill_(True)
            mask[:, :padding.shape[1]].copy_(padding)
        return cache, position, mask, step

    def _decode_step(self, cache, position, attention_mask=None):
        """One decode step as a compiled function of the new tokens [batch, 1] -> the last logits in float32.
        The cache, the position (advanced by the step itself) and the padding mask over the cache are
        tensors the graph reads from outside its arguments, so every step has the same signature: traced
        once, then replayed; on a GPU one captured device graph per step instead of a launch per op
        (pf.compile's reduce-overhead)."""
        def decode_step(ids):
            logits = self(ids, cache, position, attention_mask).logits[:, -1].float()
            position.add_(1)
            return logits

        return pf.compile(decode_step, mode="reduce-overhead")


def _sample(logits, temperature, top_k, top_p):
    """One token per row from softmax(logits / temperature), restricted to the top_k most likely and
    to the smallest set whose probability reaches top_p."""
    logits = logits / temperature
    if top_k is not None:
        kth = pf.topk(logits, min(top_k, logits.shape[-1]), -1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        sorted_logits, order = pf.sort(logits, -1, descending=True)
        cumulative = F.softmax(sorted_logits, -1).cumsum(-1)
        drop = cumulative - F.softmax(sorted_logits, -1) >= top_p  # the most likely token always stays
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return pf.multinomial(F.softmax(logits, -1), 1).squeeze(-1)


def estimate_memory(config, batch_size, seq_len, dtype="bfloat16", weight_bits=16):
    """Bytes a model of `config` needs: its weights (the linear layers' at weight_bits, the embeddings
    and norms at dtype) and a key/value cache of batch_size x seq_len positions in dtype."""
    c = config if isinstance(config, LlamaConfig) else LlamaConfig.from_dict(dict(config))
    size = _DTYPE_BYTES[str(dtype).replace("pyflame.", "")]
    attn = c.hidden_size * c.head_dim * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
    mlp = 3 * c.hidden_size * c.intermediate_size
    linear = c.num_hidden_layers * (attn + mlp) + (0 if c.tie_word_embeddings else c.vocab_size * c.hidden_size)
    other = c.vocab_size * c.hidden_size + (2 * c.num_hidden_layers + 1) * c.hidden_size
    weights = linear * (size if weight_bits == 16 else weight_bits / 8) + other * size
    kv = 2 * c.num_hidden_layers * batch_size * seq_len * c.num_key_value_heads * c.head_dim * size
    return {"weights_bytes": int(weights), "kv_cache_bytes": int(kv), "total_bytes": int(weights + kv)}
