#pragma once
// The LSTM cell's element math (lstm_sequence), PF_HOST_DEVICE so the CPU
// loop (src/cpu/rnn.cpp) and the GPU kernels (src/rocm/kernels/rnn.hip)
// compute the same thing in the same order, in the compute type A (float32,
// float64 for float64).
//
// One element (row r, unit j) of a step owns the four gate values at columns
// j, H + j, 2H + j, 3H + j of its row of z (i, f, g, o: PyTorch's order) and
// the unit's c and h, so a step is one pass over N x H independent elements.

#include <cstdint>

#include "kernels/math.h"
#include "pyflame/macros.h"

namespace pyflame::kernels {

// The sizes of one lstm_sequence call (T steps, a batch of N, H units) and
// the order of its steps: step s runs time index time(s) and reads the state
// of time index before(s) (-1: the initial state).
struct LstmDims {
  int64_t steps, batch, hidden;
  bool reverse;
  int64_t time(int64_t s) const { return reverse ? steps - 1 - s : s; }
  int64_t before(int64_t s) const { return s == 0 ? -1 : time(s - 1); }
};

template <class A> PF_HOST_DEVICE A lstm_sigmoid(A x) { return A(1) / (A(1) + math::exp(-x)); }

// Forward: the pre-activations z (input gates + recurrent GEMM + bias) and
// the previous c give the activated gates, the new c and h.
template <class A> struct LstmCell {
  A i, f, g, o, c, h;
  PF_HOST_DEVICE LstmCell(A zi, A zf, A zg, A zo, A c_prev) {
    i = lstm_sigmoid(zi);
    f = lstm_sigmoid(zf);
    g = math::tanh(zg);
    o = lstm_sigmoid(zo);
    c = f * c_prev + i * g;
    h = o * math::tanh(c);
  }
};

// Backward: from the gradient reaching h (the output's plus the next step's
// recurrent one) and c (cell_states' plus the next step's), the activated
// gates and c of this step and the previous c: the pre-activations'
// gradients and the gradient passed on to the previous c.
template <class A> struct LstmCellGrad {
  A zi, zf, zg, zo, c_prev;
  PF_HOST_DEVICE LstmCellGrad(A dh, A dc, A i, A f, A g, A o, A c, A c_before) {
    const A tc = math::tanh(c);
    dc += dh * o * (A(1) - tc * tc);
    zo = dh * tc * o * (A(1) - o);
    zi = dc * g * i * (A(1) - i);
    zf = dc * c_before * f * (A(1) - f);
    zg = dc * i * (A(1) - g * g);
    c_prev = dc * f;
  }
};

}  // namespace pyflame::kernels
