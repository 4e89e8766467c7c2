// CPU kernels of flash_attention, its backward and decode_attention (nn_ops.h has the ops), one
// query row at a time in float32: each row's scores live only while the row
// is computed, as in the GPU kernels, and the backward recomputes the
// probabilities from the saved logsumexp. scaled_dot_product_attention keeps
// its composite on the CPU for several query rows, whose GEMMs are faster
// there; these kernels make the ops whole on every device and are the GPU
// kernels' reference.

#include <cmath>
#include <limits>
#include <vector>

#include "core/dispatch.h"
#include "cpu/loops.h"
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

// flash_attention (its logsumexp in `lse`) and decode_attention (key mask, no logsumexp; a row
// that sees no key gets zeros).
template <class T> void attention_forward(OpCall& call, const KeyMask& mask, float* lse) {
  const Dims d(call, call.inputs[0], call.inputs[1]);
  const Heads<T> q(call.inputs[0]), k(call.inputs[1]), v(call.inputs[2]);
  T* out = call.outputs[0].data<T>();
  const int64_t group = d.heads / d.kv_heads, e = d.head_dim, rows = d.batch * d.heads * d.q_len;
  parallel_for(rows, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(1, d.kv_len * e)),
               [&](int64_t r0, int64_t r1) {
    std::vector<float> p(d.kv_len), acc(e);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / (d.heads * d.q_len), h = r / d.q_len % d.heads, i = r % d.q_len, hk = h / group;
      const T* qi = q.at(n, h, i);
      const int64_t seen = d.keys_seen(i);
      const float none = -std::numeric_limits<float>::infinity();
      float m = none, l = 0;
      for (int64_t j = 0; j < seen; ++j)
        m = std::max(m, p[j] = mask.sees(n, j) ? dot(qi, k.at(n, hk, j), e) * d.scale : none);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < seen && m != none; ++j) {
        if (p[j] == none) continue;
        const float pj = std::exp(p[j] - m);
        l += pj;
        const T* vj = v.at(n, hk, j);
        for (int64_t c = 0; c < e; ++c) acc[c] += pj * static_cast<float>(vj[c]);
      }
      for (int64_t c = 0; c < e; ++c) out[r * e + c] = static_cast<T>(l > 0 ? acc[c] / l : 0.0f);
      if (lse) lse[r] = m + std::log(l);
    }
  });
}

// Per (batch, key/value head): its keys' gradients gather over every query
// head that shares them, so planes are independent and need no atomics.
template <class T> void attention_backward(OpCall& call) {
  const Dims d(call, call.inputs[1], call.inputs[2]);
  const Heads<T> g(call.inputs[0]), q(call.inputs[1]), k(call.inputs[2]), v(call.inputs[3]), o(call.inputs[4]);
  const float* lse = call.inputs[5].data<float>();
  T *grad_q = call.outputs[0].data<T>(), *grad_k = call.outputs[1].data<T>(), *grad_v = call.outputs[2].data<T>();
  const int64_t group = d.heads / d.kv_heads, e = d.head_dim;
  parallel_for(d.batch * d.kv_heads, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> dk(d.kv_len * e), dv(d.kv_len * e), dq(e);
    for (int64_t plane = p0; plane < p1; ++plane) {
      const int64_t n = plane / d.kv_heads, hk = plane % d.kv_heads;
      std::fill(dk.begin(), dk.end(), 0.0f);
      std::fill(dv.begin(), dv.end(), 0.0f);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        for (int64_t i = 0; i < d.q_len; ++i) {
          const T *qi = q.at(n, h, i), *gi = g.at(n, h, i);
          const int64_t row = (n * d.heads + h) * d.q_len + i;
          const float delta = dot(gi, o.at(n, h, i), e);
          std::fill(dq.begin(), dq.end(), 0.0f);
          for (int64_t j = 0; j < d.keys_seen(i); ++j) {
            const T *kj = k.at(n, hk, j), *vj = v.at(n, hk, j);
            const float p = std::exp(dot(qi, kj, e) * d.scale - lse[row]);
            const float ds = p * (dot(gi, vj, e) - delta);
            for (int64_t c = 0; c < e; ++c) {
              dq[c] += ds * static_cast<float>(kj[c]);
              dk[j * e + c] += ds * static_cast<float>(qi[c]);
              dv[j * e + c] += p * static_cast<float>(gi[c]);
            }
          }
          for (int64_t c = 0; c < e; ++c) grad_q[row * e + c] = static_cast<T>(dq[c] * d.scale);
        }
      }
      T* gk = grad_k + plane * d.kv_len * e;
      T* gv = grad_v + plane * d.kv_len * e;
      for (int64_t x = 0; x < d.kv_len * e; ++x) gk[x] = static_cast<T>(dk[x] * d.scale), gv[x] = static_cast<T>(dv[x]);
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
