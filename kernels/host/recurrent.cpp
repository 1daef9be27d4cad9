// The CPU backend's LSTM layer steps (adcuda/backends/cpu/recurrent.py, lstm_layer and
// lstm_layer_backward): what the NumPy loop does at each time step besides its small product, in one
// call. NumPy makes nine passes per forward step and six per backward step over (B, H) and (B, 4H)
// arrays of a few thousand values, each a call of a few microseconds: with a small batch they cost
// more than the step's product (the word-level LSTM LM's layer forward spent 1.1 ms in them, its step
// products 1.4). Here each step is one pass over the batch's rows, in NumPy's order of operations
// (no fused multiply-adds: this file is built for the baseline x86-64), tanh on eight AVX2 lanes
// (elementwise_avx2.cpp, tanh_ of functors.cuh): only where cpu_has_avx2(), float32 only; the NumPy
// loop stays the reference (tests/test_norm_recurrent.py compares the two). Calls hold the GIL: a
// step is a few microseconds.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "elementwise_avx2.h"

namespace py = pybind11;

namespace adcuda::host {
namespace {

using Rows = py::array_t<float, py::array::c_style>;
template <typename T>
using Rows_ = py::array_t<T, py::array::c_style>;
using Index = py::ssize_t;

// a's element count is rows * width (a row-major float32 array), or the call is refused.
void require(const Rows& a, Index rows, Index width, const char* what) {
  if (a.size() != rows * width)
    throw std::invalid_argument(std::string("cpu_lstm_step: ") + what + " has the wrong size");
}

// One forward step. a (B, 4H): the step's input projection, the gates' tanh arguments (times 0.5 for
// i, f and o: sigmoid(x) = 0.5 tanh(x / 2) + 0.5); gh (B, 4H): the hidden projection, alike. a <- the
// activated gates, tanh(a + gh) * scale + offset; c <- f * c_prev + i * g; tanh_c <- tanh(c);
// h <- o * tanh_c. (c_prev may be c of the step before: it is read before c is written, row by row.)
void lstm_step(Rows& a, const Rows& gh, const Rows& c_prev, const Rows& scale, const Rows& offset, Rows& c,
               Rows& tanh_c, Rows& h) {
  if (c_prev.ndim() != 2) throw std::invalid_argument("cpu_lstm_step: c_prev must be (B, H)");
  const Index hidden = c_prev.shape(1), batch = c_prev.shape(0);
  require(a, batch, 4 * hidden, "a");
  require(gh, batch, 4 * hidden, "gh");
  require(scale, 1, 4 * hidden, "scale");
  require(offset, 1, 4 * hidden, "offset");
  for (const Rows* out : {&c, &tanh_c, &h}) require(*out, batch, hidden, "an output");
  if (!cpu_has_avx2()) throw std::invalid_argument("cpu_lstm_step: needs AVX2 and FMA (host_has_avx2())");
  float* as = a.mutable_data();
  const float *gs = gh.data(), *cp = c_prev.data(), *sc = scale.data(), *of = offset.data();
  float *cs = c.mutable_data(), *ts = tanh_c.mutable_data(), *hs = h.mutable_data();
  const Index width = 4 * hidden;
  for (Index b = 0; b < batch; ++b) {
    float* row = as + b * width;
    const float* g_row = gs + b * width;
    for (Index k = 0; k < width; ++k) row[k] += g_row[k];
    tanh_avx2(row, row, width);
    for (Index k = 0; k < width; ++k) row[k] = row[k] * sc[k] + of[k];
    const float *i = row, *f = row + hidden, *g = row + 2 * hidden, *o = row + 3 * hidden;
    const float* prev = cp + b * hidden;
    float* cell = cs + b * hidden;
    for (Index k = 0; k < hidden; ++k) {
      const float kept = f[k] * prev[k], added = i[k] * g[k];
      cell[k] = kept + added;
    }
    float* tanh_row = ts + b * hidden;
    tanh_avx2(cell, tanh_row, hidden);
    float* out = hs + b * hidden;
    for (Index k = 0; k < hidden; ++k) out[k] = o[k] * tanh_row[k];
  }
}

// One backward step, in lstm_layer_backward's order. g_h (B, H): the gradient of the step's output h;
// d_h (B, H): that of h through the next step; dh_to_dc (B, H): o (1 - tanh_c^2); gates (B, 4H): the
// activated gates (f is read); d_z (B, 4H): the step's factors, multiplied in place into the gates'
// gradients; d_c (B, H): the cell's gradient from the next step, made the previous step's.
// dh = g_h + d_h; d_c += dh * dh_to_dc; d_z[i, f, g] *= d_c; d_z[o] *= dh; d_c *= f.
template <typename T>
void lstm_step_backward(const py::array_t<T, py::array::c_style>& g_h, const py::array_t<T, py::array::c_style>& d_h,
                        const py::array_t<T, py::array::c_style>& dh_to_dc,
                        const py::array_t<T, py::array::c_style>& gates, py::array_t<T, py::array::c_style>& d_z,
                        py::array_t<T, py::array::c_style>& d_c) {
  if (d_c.ndim() != 2) throw std::invalid_argument("cpu_lstm_step_backward: d_c must be (B, H)");
  const Index hidden = d_c.shape(1), batch = d_c.shape(0);
  if (g_h.size() != batch * hidden || d_h.size() != batch * hidden || dh_to_dc.size() != batch * hidden ||
      gates.size() != batch * 4 * hidden || d_z.size() != batch * 4 * hidden)
    throw std::invalid_argument("cpu_lstm_step_backward: the arrays' sizes do not fit d_c's (B, H)");
  const T *gs = g_h.data(), *ds = d_h.data(), *ks = dh_to_dc.data(), *fs = gates.data() + hidden;
  T *zs = d_z.mutable_data(), *cs = d_c.mutable_data();
  std::vector<T> dh(static_cast<std::size_t>(hidden));
  for (Index b = 0; b < batch; ++b) {
    const Index at = b * hidden, row = b * 4 * hidden;
    T* c = cs + at;
    for (Index k = 0; k < hidden; ++k) {
      dh[k] = gs[at + k] + ds[at + k];
      const T work = dh[k] * ks[at + k];
      c[k] += work;
    }
    T* z = zs + row;
    for (Index gate = 0; gate < 3; ++gate)
      for (Index k = 0; k < hidden; ++k) z[gate * hidden + k] *= c[k];
    for (Index k = 0; k < hidden; ++k) z[3 * hidden + k] *= dh[k];
    const T* f = fs + row;
    for (Index k = 0; k < hidden; ++k) c[k] *= f[k];
  }
}

// The backward's per-element factors over the whole sequence, in lstm_layer_backward's order of operations
// (its NumPy formula makes eleven passes over (rows, 4H) and (rows, H) arrays): from the activated gates
// act (rows, 4H), each step's cell state cs and its tanh (rows, H) and c0 (B, H), time-major ->
// d_z (rows, 4H): i (1 - i) g, f (1 - f) c_prev, (1 - g^2) i, o (1 - o) tanh_c, and dh_to_dc (rows, H):
// (1 - tanh_c^2) o. c_prev is the row block before (after, when ``reverse``), c0 for the first step.
template <typename T>
void lstm_backward_factors(const Rows_<T>& act, const Rows_<T>& cs, const Rows_<T>& tanh_cs, const Rows_<T>& c0,
                           bool reverse, Rows_<T>& d_z, Rows_<T>& dh_to_dc) {
  if (c0.ndim() != 2 || cs.ndim() != 2)
    throw std::invalid_argument("cpu_lstm_backward_factors: c0 must be (B, H) and cs (rows, H)");
  const Index batch = c0.shape(0), hidden = c0.shape(1), rows = cs.shape(0);
  if (cs.shape(1) != hidden || (batch ? rows % batch : rows) != 0 || tanh_cs.size() != rows * hidden ||
      act.size() != rows * 4 * hidden || d_z.size() != rows * 4 * hidden || dh_to_dc.size() != rows * hidden)
    throw std::invalid_argument("cpu_lstm_backward_factors: the arrays' sizes do not fit c0's (B, H) and cs's rows");
  const T *a = act.data(), *c = cs.data(), *tc = tanh_cs.data(), *c_first = c0.data();
  T *z = d_z.mutable_data(), *k = dh_to_dc.mutable_data();
  const Index first_rows = reverse ? rows - batch : 0;  // the rows of the step the forward visits first
  for (Index r = 0; r < rows; ++r) {
    const T* gates = a + r * 4 * hidden;
    const T *i = gates, *f = gates + hidden, *g = gates + 2 * hidden, *o = gates + 3 * hidden;
    const bool first = r >= first_rows && r < first_rows + batch;
    const T* prev = first ? c_first + (r - first_rows) * hidden : c + (reverse ? r + batch : r - batch) * hidden;
    const T* t = tc + r * hidden;
    T* out = z + r * 4 * hidden;
    T* dc = k + r * hidden;
    for (Index q = 0; q < hidden; ++q) {
      out[q] = ((T(1) - i[q]) * i[q]) * g[q];
      out[hidden + q] = ((T(1) - f[q]) * f[q]) * prev[q];
      out[2 * hidden + q] = (T(1) - g[q] * g[q]) * i[q];
      out[3 * hidden + q] = ((T(1) - o[q]) * o[q]) * t[q];
      dc[q] = (T(1) - t[q] * t[q]) * o[q];
    }
  }
}

}  // namespace

void bind_recurrent(py::module_& m) {
  m.def("cpu_lstm_step", &lstm_step, py::arg("a").noconvert(), py::arg("gh").noconvert(),
        py::arg("c_prev").noconvert(), py::arg("scale").noconvert(), py::arg("offset").noconvert(),
        py::arg("c").noconvert(), py::arg("tanh_c").noconvert(), py::arg("h").noconvert(),
        "One LSTM forward step in place (row-major float32 arrays; only where host_has_avx2()): a (B, 4H) <- "
        "tanh(a + gh) * scale + offset, c <- f * c_prev + i * g, tanh_c <- tanh(c), h <- o * tanh_c.");
  m.def("cpu_lstm_step_backward", &lstm_step_backward<float>, py::arg("g_h").noconvert(), py::arg("d_h").noconvert(),
        py::arg("dh_to_dc").noconvert(), py::arg("gates").noconvert(), py::arg("d_z").noconvert(),
        py::arg("d_c").noconvert());
  m.def("cpu_lstm_step_backward", &lstm_step_backward<double>, py::arg("g_h").noconvert(),
        py::arg("d_h").noconvert(), py::arg("dh_to_dc").noconvert(), py::arg("gates").noconvert(),
        py::arg("d_z").noconvert(), py::arg("d_c").noconvert(),
        "One LSTM backward step in place (row-major arrays of one float dtype): dh = g_h + d_h; d_c += dh * "
        "dh_to_dc; d_z[:, :3H] *= d_c; d_z[:, 3H:] *= dh; d_c *= the gates' f.");
  m.def("cpu_lstm_backward_factors", &lstm_backward_factors<float>, py::arg("act").noconvert(),
        py::arg("cs").noconvert(), py::arg("tanh_cs").noconvert(), py::arg("c0").noconvert(), py::arg("reverse"),
        py::arg("d_z").noconvert(), py::arg("dh_to_dc").noconvert());
  m.def("cpu_lstm_backward_factors", &lstm_backward_factors<double>, py::arg("act").noconvert(),
        py::arg("cs").noconvert(), py::arg("tanh_cs").noconvert(), py::arg("c0").noconvert(), py::arg("reverse"),
        py::arg("d_z").noconvert(), py::arg("dh_to_dc").noconvert(),
        "The LSTM layer backward's factors, one pass (row-major arrays of one float dtype, time-major rows): "
        "d_z (rows, 4H) <- i(1-i) g, f(1-f) c_prev, (1-g^2) i, o(1-o) tanh_c; "
        "dh_to_dc (rows, H) <- (1-tanh_c^2) o.");
}

}  // namespace adcuda::host
