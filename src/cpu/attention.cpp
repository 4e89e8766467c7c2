// CPU kernels of flash_attention, its backward and decode_attention (nn_ops.h
// has the ops). A block of query rows meets a chunk of keys at a time through
// OpenBLAS: the block's scores live in a small buffer (64 x 256 floats stays in
// L2), an online softmax carries each row's max and sum across chunks, and the
// backward recomputes the probabilities from the saved logsumexp. Nothing of
// size (L, S) is made, which is what made the composite (matmul, softmax,
// matmul) slower than PyTorch's fused CPU attention: its scores and
// probabilities were written, zeroed by the kernel as fresh pages, and read
// again. 16-bit operands are converted to float a block at a time (the BLAS
// has no 16-bit products); everything accumulates in float.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/blas.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "kernels/math.h"
#include "pyflame/error.h"

namespace pyflame::cpu {
namespace {

// A (N, H, rows, E) operand: element strides of batch, head and row; columns are contiguous.
template <class T> struct Heads {
  const T* p;
  int64_t batch, head, row;
  explicit Heads(const Tensor& t) : p(t.data<T>()), batch(t.strides()[0]), head(t.strides()[1]), row(t.strides()[2]) {}
  const T* at(int64_t n, int64_t h, int64_t i) const { return p + n * batch + h * head + i * row; }
};

template <class T> float dot(const T* a, const T* b, int64_t e) {
  float s = 0;
  for (int64_t c = 0; c < e; ++c) s += static_cast<float>(a[c]) * static_cast<float>(b[c]);
  return s;
}

// `rows` rows of `e` floats at `p` (row stride `stride`): the memory itself for float (ld = stride), else a
// float copy in `buf` (ld = e), times `scale`.
template <class T> const float* as_float(const T* p, int64_t stride, int64_t rows, int64_t e, std::vector<float>& buf,
                                         int64_t& ld, float scale = 1.0f) {
  if constexpr (std::is_same_v<T, float>) {
    if (scale == 1.0f) {
      ld = stride;
      return p;
    }
  }
  buf.resize(rows * e);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < e; ++c) buf[r * e + c] = static_cast<float>(p[r * stride + c]) * scale;
  ld = e;
  return buf.data();
}

constexpr int64_t kQueryBlock = 64;
constexpr int64_t kKeyChunk = 256;
constexpr float kNone = -std::numeric_limits<float>::infinity();

struct Dims {
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim;
  float scale;
  bool causal;
  Dims(const OpCall& call, const Tensor& q, const Tensor& k)
      : batch(q.size(0)), heads(q.size(1)), kv_heads(k.size(1)), q_len(q.size(2)), kv_len(k.size(2)),
        head_dim(q.size(3)), scale(static_cast<float>(call.attr<AttentionAttrs>().scale)),
        causal(call.attr<AttentionAttrs>().is_causal) {}
  int64_t keys_seen(int64_t i) const { return causal ? std::min(kv_len, i + 1) : kv_len; }
};

// decode_attention's key mask (N, S), any strides; no mask: every key.
struct KeyMask {
  const bool* p = nullptr;
  int64_t batch = 0, key = 0;
  explicit KeyMask(const Tensor& m) {
    if (m.defined()) p = m.data<bool>(), batch = m.strides()[0], key = m.strides()[1];
  }
  bool sees(int64_t n, int64_t j) const { return !p || p[n * batch + j * key]; }
};

// Sets the scores of a (rows x keys) block that a row may not see to -inf: causal (row i sees
// keys up to i) or masked keys.
void hide_scores(float* s, int64_t ld, int64_t i0, int64_t rows, int64_t j0, int64_t keys, const Dims& d,
                 const KeyMask& mask, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * ld;
    if (d.causal) std::fill(row + std::clamp<int64_t>(i0 + r + 1 - j0, 0, keys), row + keys, kNone);
    if (mask.p)
      for (int64_t j = 0; j < keys; ++j)
        if (!mask.sees(n, j0 + j)) row[j] = kNone;
  }
}

// A chunk of keys and values of one (batch, key/value head) as float (kf, vf and their row
// strides), and the scores of a block of query rows (qs: scaled) against it, with what a row may
// not see at -inf, into s (rows x kKeyChunk).
struct KeyChunk {
  std::vector<float> kbuf, vbuf;
  const float *kf = nullptr, *vf = nullptr;
  int64_t ldk = 0, ldv = 0;

  template <class T>
  void scores(const Dims& d, const Heads<T>& k, const Heads<T>& v, int64_t n, int64_t hk, int64_t j0, int64_t keys,
              const float* qs, int64_t ldq, int64_t i0, int64_t rows, const KeyMask& mask, float* s) {
    kf = as_float(k.at(n, hk, j0), k.row, keys, d.head_dim, kbuf, ldk);
    vf = as_float(v.at(n, hk, j0), v.row, keys, d.head_dim, vbuf, ldv);
    gemm_serial(false, true, rows, keys, d.head_dim, qs, ldq, kf, ldk, s, kKeyChunk, 0.0f);
    hide_scores(s, kKeyChunk, i0, rows, j0, keys, d, mask, n);
  }
};

// s[j] = exp(s[j] - mx) for n floats; returns their sum.
float exp_in_place(float* s, int64_t n, float mx) {
  return lanes_sum<float>(n, [&](int64_t j) { return s[j] = math::exp(s[j] - mx); });
}

// flash_attention (its logsumexp in `lse`) and decode_attention (key mask, no logsumexp; a row
// that sees no key gets zeros). A task is one block of query rows of one (batch, head).
template <class T> void attention_forward(OpCall& call, const KeyMask& mask, float* lse) {
  const Dims d(call, call.inputs[0], call.inputs[1]);
  const Heads<T> q(call.inputs[0]), k(call.inputs[1]), v(call.inputs[2]);
  T* out = call.outputs[0].data<T>();
  const int64_t group = d.heads / d.kv_heads, e = d.head_dim;
  const int64_t blocks = (d.q_len + kQueryBlock - 1) / kQueryBlock;
  parallel_for(d.batch * d.heads * blocks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> qbuf, scores(kQueryBlock * kKeyChunk), acc(kQueryBlock * e);
    KeyChunk chunk;
    std::vector<float> m(kQueryBlock), l(kQueryBlock);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t n = t / (d.heads * blocks), h = t / blocks % d.heads, hk = h / group;
      const int64_t i0 = t % blocks * kQueryBlock, rows = std::min(kQueryBlock, d.q_len - i0);
      int64_t ldq;
      const float* qs = as_float(q.at(n, h, i0), q.row, rows, e, qbuf, ldq, d.scale);  // scaled once: L x E products
      std::fill(m.begin(), m.end(), kNone);
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t keys_end = d.keys_seen(i0 + rows - 1);
      for (int64_t j0 = 0; j0 < keys_end; j0 += kKeyChunk) {
        const int64_t keys = std::min(kKeyChunk, keys_end - j0);
        chunk.scores(d, k, v, n, hk, j0, keys, qs, ldq, i0, rows, mask, scores.data());
        for (int64_t r = 0; r < rows; ++r) {
          float* s = scores.data() + r * kKeyChunk;
          const float mx = lanes_max<float>(keys, m[r], [&](int64_t j) { return s[j]; });
          if (mx == kNone) {  // nothing seen yet: the row's probabilities are 0
            std::fill(s, s + keys, 0.0f);
            continue;
          }
          const float sum = exp_in_place(s, keys, mx);
          const float carry = math::exp(m[r] - mx);  // the earlier chunks' terms, rescaled to the new max
          l[r] = l[r] * carry + sum;
          m[r] = mx;
          if (carry != 1.0f)
            for (int64_t c = 0; c < e; ++c) acc[r * e + c] *= carry;
        }
        gemm_serial(false, false, rows, e, keys, scores.data(), kKeyChunk, chunk.vf, chunk.ldv, acc.data(), e, 1.0f);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t row = (n * d.heads + h) * d.q_len + i0 + r;
        const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
        for (int64_t c = 0; c < e; ++c) out[row * e + c] = static_cast<T>(acc[r * e + c] * inv);
        if (lse) lse[row] = m[r] + std::log(l[r]);
      }
    }
  });
}

// Per (batch, key/value head): its keys' gradients gather over every query
// head that shares them, so planes are independent and need no atomics. For a
// block of query rows and a chunk of keys, with P recomputed from logsumexp:
// dV += P^T dO, dS = P (dO V^T - rowsum(dO O)), dQ += dS K, dK += dS Q (the
// scale folded into Q once and into dQ at the end).
template <class T> void attention_backward(OpCall& call) {
  const Dims d(call, call.inputs[1], call.inputs[2]);
  const Heads<T> g(call.inputs[0]), q(call.inputs[1]), k(call.inputs[2]), v(call.inputs[3]), o(call.inputs[4]);
  const float* lse = call.inputs[5].data<float>();
  T *grad_q = call.outputs[0].data<T>(), *grad_k = call.outputs[1].data<T>(), *grad_v = call.outputs[2].data<T>();
  const int64_t group = d.heads / d.kv_heads, e = d.head_dim;
  parallel_for(d.batch * d.kv_heads, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> dk(d.kv_len * e), dv(d.kv_len * e), dq(kQueryBlock * e), delta(kQueryBlock);
    std::vector<float> qbuf, gbuf, p(kQueryBlock * kKeyChunk), ds(kQueryBlock * kKeyChunk);
    KeyChunk chunk;
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t n = plane / d.kv_heads, hk = plane % d.kv_heads;
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        for (int64_t i0 = 0; i0 < d.q_len; i0 += kQueryBlock) {
          const int64_t rows = std::min(kQueryBlock, d.q_len - i0), first = (n * d.heads + h) * d.q_len + i0;
          int64_t ldq, ldg;
          const float* qs = as_float(q.at(n, h, i0), q.row, rows, e, qbuf, ldq, d.scale);
          const float* gf = as_float(g.at(n, h, i0), g.row, rows, e, gbuf, ldg);
          for (int64_t r = 0; r < rows; ++r) delta[r] = dot(g.at(n, h, i0 + r), o.at(n, h, i0 + r), e);
          std::fill(dq.begin(), dq.end(), 0.0f);
          const int64_t keys_end = d.keys_seen(i0 + rows - 1);
          for (int64_t j0 = 0; j0 < keys_end; j0 += kKeyChunk) {
            const int64_t keys = std::min(kKeyChunk, keys_end - j0);
            chunk.scores(d, k, v, n, hk, j0, keys, qs, ldq, i0, rows, KeyMask(Tensor()), p.data());
            for (int64_t r = 0; r < rows; ++r) exp_in_place(p.data() + r * kKeyChunk, keys, lse[first + r]);
            gemm_serial(true, false, keys, e, rows, p.data(), kKeyChunk, gf, ldg, dv.data() + j0 * e, e, 1.0f);
            gemm_serial(false, true, rows, keys, e, gf, ldg, chunk.vf, chunk.ldv, ds.data(), kKeyChunk, 0.0f);
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < keys; ++j)
                ds[r * kKeyChunk + j] = p[r * kKeyChunk + j] * (ds[r * kKeyChunk + j] - delta[r]);
            gemm_serial(false, false, rows, e, keys, ds.data(), kKeyChunk, chunk.kf, chunk.ldk, dq.data(), e, 1.0f);
            gemm_serial(true, false, keys, e, rows, ds.data(), kKeyChunk, qs, ldq, dk.data() + j0 * e, e, 1.0f);
          }
          for (int64_t x = 0; x < rows * e; ++x) grad_q[first * e + x] = static_cast<T>(dq[x] * d.scale);
        }
      }
      T* gk = grad_k + plane * d.kv_len * e;
      T* gv = grad_v + plane * d.kv_len * e;
      for (int64_t x = 0; x < d.kv_len * e; ++x) gk[x] = static_cast<T>(dk[x]), gv[x] = static_cast<T>(dv[x]);
    }
  });
}

enum class Attention { Forward, Backward, Decode };

template <Attention kWhich> void attention_entry(OpCall& call) {
  auto run = [&]<class T>() {
    if constexpr (kWhich == Attention::Backward) attention_backward<T>(call);
    else if constexpr (kWhich == Attention::Decode) attention_forward<T>(call, KeyMask(call.inputs[3]), nullptr);
    else attention_forward<T>(call, KeyMask(Tensor()), call.outputs[1].data<float>());
  };
  switch (call.out().dtype()) {
    case DType::BFloat16: run.template operator()<BFloat16>(); break;
    case DType::Float16: run.template operator()<Half>(); break;
    default: run.template operator()<float>(); break;
  }
}

PF_REGISTER_KERNEL(flash_attention, CPU, &attention_entry<Attention::Forward>);
PF_REGISTER_KERNEL(flash_attention_backward, CPU, &attention_entry<Attention::Backward>);
PF_REGISTER_KERNEL(decode_attention, CPU, &attention_entry<Attention::Decode>);

}  // namespace
}  // namespace pyflame::cpu
