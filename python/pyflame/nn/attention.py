"""MultiheadAttention, as torch.nn.MultiheadAttention (parameters, masks, need_weights, batch_first, kdim/vdim,
add_bias_kv, add_zero_attn), composed of linear, matmul, softmax and dropout.

With need_weights=True the weights are computed explicitly (softmax(q k^T / sqrt(d) + mask)), as PyTorch's
reference path does; with need_weights=False the heads go through F.scaled_dot_product_attention.
Boolean masks mark positions that may NOT be attended (True = masked), float masks are added to the
scores, as in PyTorch.
"""

import math

from .. import _C, _creation
from . import functional as F
from . import init
from .linear import Linear
from .module import Module
from .parameter import Parameter


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for MultiheadAttention.out_proj (a Linear), kept so that repr() matches."""


def _float_mask(mask, dtype, name):
    """A bool mask (True = masked) as an additive float mask (-inf there); a float mask as it is."""
    if mask is None:
        return None
    if mask.dtype == _C.dtype.bool:
        return _creation.zeros(*mask.shape, dtype=dtype, device=mask).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise TypeError(f"only bool and floating types of {name} are supported")
    return mask


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise _C.InvalidArgumentError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                                          f"and num_heads={num_heads} instead")
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise _C.InvalidArgumentError("embed_dim must be divisible by num_heads")
        empty = lambda *shape: Parameter(_creation.empty(*shape, dtype=dtype, device=device))  # noqa: E731
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = empty(embed_dim, embed_dim)
            self.k_proj_weight = empty(embed_dim, self.kdim)
            self.v_proj_weight = empty(embed_dim, self.vdim)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = empty(3 * embed_dim, embed_dim)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = empty(3 * embed_dim)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        if add_bias_kv:
            self.bias_k = empty(1, 1, embed_dim)
            self.bias_v = empty(1, 1, embed_dim)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        # As PyTorch: xavier-uniform input projections, zero biases, out_proj's weight keeps Linear's init.
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _projections(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        b_q, b_k, b_v = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one projection, as PyTorch
                return F.linear(query, w, b).chunk(3, -1)
            w_q, w_k, w_v = w[:E], w[E:2 * E], w[2 * E:]
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, w_q, b_q), F.linear(key, w_k, b_k), F.linear(value, w_v, b_v)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        """(attn_output, attn_weights): inputs (L, N, E) ((N, L, E) with batch_first) or unbatched (L, E);
        key_padding_mask (N, S), attn_mask (L, S) or (N * num_heads, L, S). The weights are averaged
        over the heads ((N, L, S)) unless average_attn_weights=False ((N, num_heads, L, S)); None when
        need_weights=False. is_causal is a hint that attn_mask is the causal mask (which must be given)."""
        if query.dim() not in (2, 3):
            raise _C.InvalidArgumentError("query should be unbatched 2D or batched 3D tensor but received "
                                          f"{query.dim()}-D query tensor")
        batched = query.dim() == 3
        if key.dim() != query.dim() or value.dim() != query.dim():
            raise _C.InvalidArgumentError(f"For {'batched (3-D)' if batched else 'unbatched (2-D)'} `query`, expected "
                                          f"`key` and `value` to be {query.dim()}-D but found {key.dim()}-D and "
                                          f"{value.dim()}-D tensors respectively")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                               "method `generate_square_subsequent_mask` to create this mask.")
        if batched and self.batch_first:
            # Transposing keeps `query is key` (self-attention), as PyTorch's code does.
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = query.transpose(1, 0), key.transpose(1, 0)
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        if not batched:
            same_kv = key is value
            same_qk = query is key
            query = query.unsqueeze(1)
            key = query if same_qk else key.unsqueeze(1)
            value = key if same_kv else value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        out, weights = self._attention(query, key, value, key_padding_mask, need_weights, attn_mask,
                                       average_attn_weights)
        if not batched:
            out = out.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(1, 0)
        return out, weights

    def _attention(self, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights):
        tgt_len, bsz, embed_dim = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        if embed_dim != self.embed_dim:
            raise _C.InvalidArgumentError(f"was expecting embedding dimension of {self.embed_dim}, but got {embed_dim}")
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise _C.InvalidArgumentError(f"key shape {tuple(key.shape)} does not match value shape "
                                          f"{tuple(value.shape)}")
        key_padding_mask = _float_mask(key_padding_mask, query.dtype, "key_padding_mask")
        attn_mask = _float_mask(attn_mask, query.dtype, "attn_mask")
        q, k, v = self._projections(query, key, value)
        if attn_mask is not None:
            src_len = key.shape[0]
            if attn_mask.dim() == 2:
                if tuple(attn_mask.shape) != (tgt_len, src_len):
                    raise _C.InvalidArgumentError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but "
                                                  f"should be {(tgt_len, src_len)}.")
                attn_mask = attn_mask.unsqueeze(0)
            elif attn_mask.dim() == 3:
                if tuple(attn_mask.shape) != (bsz * heads, tgt_len, src_len):
                    raise _C.InvalidArgumentError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but "
                                                  f"should be {(bsz * heads, tgt_len, src_len)}.")
            else:
                raise _C.InvalidArgumentError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
        if self.bias_k is not None:
            k = _C.cat([k, self.bias_k.expand(1, bsz, embed_dim)])
            v = _C.cat([v, self.bias_v.expand(1, bsz, embed_dim)])
            attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
        # (L, N, E) -> (N * heads, L, head_dim)
        q = q.reshape(tgt_len, bsz * heads, head_dim).transpose(0, 1)
        k = k.reshape(k.shape[0], bsz * heads, head_dim).transpose(0, 1)
        v = v.reshape(v.shape[0], bsz * heads, head_dim).transpose(0, 1)
        if self.add_zero_attn:
            k = _C.cat([k, _creation.zeros(bsz * heads, 1, head_dim, dtype=k.dtype, device=k)], 1)
            v = _C.cat([v, _creation.zeros(bsz * heads, 1, head_dim, dtype=v.dtype, device=v)], 1)
            attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
            key_padding_mask = None if key_padding_mask is None else F.pad(key_padding_mask, (0, 1))
        src_len = k.shape[1]
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (bsz, src_len):
                raise _C.InvalidArgumentError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                              f"{tuple(key_padding_mask.shape)}")
            kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, heads, 1, src_len)
            kpm = kpm.reshape(bsz * heads, 1, src_len)
            attn_mask = kpm if attn_mask is None else attn_mask + kpm
        dropout_p = self.dropout if self.training else 0.0
        if need_weights:
            scores = (q * math.sqrt(1.0 / head_dim)) @ k.transpose(-2, -1)
            if attn_mask is not None:
                scores = scores + attn_mask
            weights = F.softmax(scores, -1)
            if dropout_p > 0.0:
                weights = F.dropout(weights, dropout_p, True)
            out = weights @ v  # (N * heads, L, head_dim)
            out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
            out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(tgt_len, bsz, embed_dim)
            weights = weights.reshape(bsz, heads, tgt_len, src_len)
            if average_attn_weights:
                weights = weights.mean(1)
            return out, weights
        if attn_mask is not None:
            attn_mask = (attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1
                         else attn_mask.reshape(bsz, heads, -1, src_len))
        q = q.reshape(bsz, heads, tgt_len, head_dim)
        k = k.reshape(bsz, heads, src_len, head_dim)
        v = v.reshape(bsz, heads, src_len, head_dim)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p)
        out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias).reshape(tgt_len, bsz, embed_dim)
        return out, None
