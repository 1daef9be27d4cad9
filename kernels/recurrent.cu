// Recurrent cell steps: one thread per (row, hidden unit), reading that unit's gates from both
// projections (4 or 3 strided columns of a row) and the state, writing the new state(s). Each is a
// single memory-bound pass: an LSTM step reads 2 * 4H + H and writes 2H values per row; the backward
// recomputes the gate activations from the projections rather than saving them, trading a few
// exp/tanh for 4H fewer values written and read per row. See recurrent.h.
#include "recurrent.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "functors.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

using math::sigmoid;
using math::tanh_;

template <typename T>
__global__ void lstm_cell_kernel(const T* gi, const T* gh, const T* c, T* hc, std::int64_t B, std::int64_t H) {
  using C = compute_t<T>;
  const std::int64_t n = B * H;
  ADCUDA_GRID_STRIDE_LOOP(idx, n) {
    const std::int64_t row = idx / H, unit = idx - row * H;
    const std::int64_t at = row * 4 * H + unit;
    const C i = sigmoid(to_compute(gi[at]) + to_compute(gh[at]));
    const C f = sigmoid(to_compute(gi[at + H]) + to_compute(gh[at + H]));
    const C g = tanh_(to_compute(gi[at + 2 * H]) + to_compute(gh[at + 2 * H]));
    const C o = sigmoid(to_compute(gi[at + 3 * H]) + to_compute(gh[at + 3 * H]));
    const C c_new = f * to_compute(c[idx]) + i * g;
    hc[idx] = convert<T>(o * tanh_(c_new));
    hc[n + idx] = convert<T>(c_new);
  }
}

template <typename T>
__global__ void lstm_cell_backward_kernel(const T* grad, const T* gi, const T* gh, const T* c, const T* hc,
                                          T* d_gates, T* d_c, std::int64_t B, std::int64_t H) {
  using C = compute_t<T>;
  const std::int64_t n = B * H;
  ADCUDA_GRID_STRIDE_LOOP(idx, n) {
    const std::int64_t row = idx / H, unit = idx - row * H;
    const std::int64_t at = row * 4 * H + unit;
    const C i = sigmoid(to_compute(gi[at]) + to_compute(gh[at]));
    const C f = sigmoid(to_compute(gi[at + H]) + to_compute(gh[at + H]));
    const C g = tanh_(to_compute(gi[at + 2 * H]) + to_compute(gh[at + 2 * H]));
    const C o = sigmoid(to_compute(gi[at + 3 * H]) + to_compute(gh[at + 3 * H]));
    const C tanh_c = tanh_(to_compute(hc[n + idx]));  // the saved c', as the CPU backend reads it
    const C g_h = to_compute(grad[idx]);
    const C d_c_new = to_compute(grad[n + idx]) + g_h * o * (C(1) - tanh_c * tanh_c);
    d_gates[at] = convert<T>(d_c_new * g * i * (C(1) - i));
    d_gates[at + H] = convert<T>(d_c_new * to_compute(c[idx]) * f * (C(1) - f));
    d_gates[at + 2 * H] = convert<T>(d_c_new * i * (C(1) - g * g));
    d_gates[at + 3 * H] = convert<T>(g_h * tanh_c * o * (C(1) - o));
    d_c[idx] = convert<T>(d_c_new * f);
  }
}

template <typename T>
__global__ void gru_cell_kernel(const T* gi, const T* gh, const T* h, T* out, std::int64_t B, std::int64_t H) {
  using C = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(idx, B * H) {
    const std::int64_t row = idx / H, unit = idx - row * H;
    const std::int64_t at = row * 3 * H + unit;
    const C r = sigmoid(to_compute(gi[at]) + to_compute(gh[at]));
    const C z = sigmoid(to_compute(gi[at + H]) + to_compute(gh[at + H]));
    const C n = tanh_(to_compute(gi[at + 2 * H]) + r * to_compute(gh[at + 2 * H]));
    out[idx] = convert<T>((C(1) - z) * n + z * to_compute(h[idx]));
  }
}

template <typename T>
__global__ void gru_cell_backward_kernel(const T* grad, const T* gi, const T* gh, const T* h, T* d_gi, T* d_gh,
                                         T* d_h, std::int64_t B, std::int64_t H) {
  using C = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(idx, B * H) {
    const std::int64_t row = idx / H, unit = idx - row * H;
    const std::int64_t at = row * 3 * H + unit;
    const C r = sigmoid(to_compute(gi[at]) + to_compute(gh[at]));
    const C z = sigmoid(to_compute(gi[at + H]) + to_compute(gh[at + H]));
    const C h_n = to_compute(gh[at + 2 * H]);
    const C n = tanh_(to_compute(gi[at + 2 * H]) + r * h_n);
    const C g = to_compute(grad[idx]);
    const C d_n = g * (C(1) - z) * (C(1) - n * n);
    const C d_r = d_n * h_n * r * (C(1) - r);
    const C d_z = g * (to_compute(h[idx]) - n) * z * (C(1) - z);
    d_gi[at] = d_gh[at] = convert<T>(d_r);
    d_gi[at + H] = d_gh[at + H] = convert<T>(d_z);
    d_gi[at + 2 * H] = convert<T>(d_n);
    d_gh[at + 2 * H] = convert<T>(d_n * r);
    d_h[idx] = convert<T>(g * z);
  }
}

// ------------------------------------------------------------------------------------------------
// Host side.

// The shapes and layouts every cell primitive takes; -> (B, H).
std::pair<std::int64_t, std::int64_t> check_cell(const char* op, int gates, const DeviceArray& gi,
                                                 const DeviceArray& gh, const DeviceArray& state) {
  require(state.ndim() == 2 && gi.ndim() == 2 && gi.shape() == gh.shape() && gi.shape()[0] == state.shape()[0] &&
              gi.shape()[1] == gates * state.shape()[1],
          op, "expected projections (B, " + std::to_string(gates) + "H) and a state (B, H), got " +
                  format_dims(gi.shape()) + ", " + format_dims(gh.shape()) + " and " + format_dims(state.shape()));
  require(gi.dtype() == gh.dtype() && gi.dtype() == state.dtype(), op, "expected arrays of one dtype");
  require(is_floating_point(gi.dtype()), op,
          std::string("expected floating point arrays, got ") + scalar_type_name(gi.dtype()));
  require(gi.is_contiguous() && gh.is_contiguous() && state.is_contiguous(), op, "arrays must be contiguous");
  return {state.shape()[0], state.shape()[1]};
}

}  // namespace

DeviceArray lstm_cell(const DeviceArray& gi, const DeviceArray& gh, const DeviceArray& c) {
  const char* op = "lstm_cell";
  const auto dims = check_cell(op, 4, gi, gh, c);
  const std::int64_t B = dims.first, H = dims.second;
  DeviceArray hc = DeviceArray::empty({2, B, H}, c.dtype(), c.device());
  if (B * H == 0) return hc;
  KernelLaunch launch(hc, gi, gh, c);
  dispatch_floating(c.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lstm_cell_kernel<T><<<grid_size(B * H), kBlockSize, 0, launch.stream()>>>(gi.data<T>(), gh.data<T>(),
                                                                               c.data<T>(), hc.data<T>(), B, H);
  });
  ADCUDA_CHECK_LAUNCH();
  return hc;
}

std::tuple<DeviceArray, DeviceArray> lstm_cell_backward(const DeviceArray& grad, const DeviceArray& gi,
                                                        const DeviceArray& gh, const DeviceArray& c,
                                                        const DeviceArray& hc) {
  const char* op = "lstm_cell_backward";
  const auto dims = check_cell(op, 4, gi, gh, c);
  const std::int64_t B = dims.first, H = dims.second;
  const Dims stacked{2, B, H};
  for (const DeviceArray* a : {&grad, &hc}) {
    require(a->shape() == stacked && a->dtype() == c.dtype() && a->is_contiguous(), op,
            "grad and hc must be contiguous " + format_dims(stacked) + " arrays of the state's dtype, got " +
                format_dims(a->shape()));
  }
  DeviceArray d_gates = DeviceArray::empty(gi.shape(), gi.dtype(), gi.device());
  DeviceArray d_c = DeviceArray::empty(c.shape(), c.dtype(), c.device());
  if (B * H == 0) return {d_gates, d_c};
  KernelLaunch launch(d_gates, d_c, grad, gi, gh, c, hc);
  dispatch_floating(c.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lstm_cell_backward_kernel<T><<<grid_size(B * H), kBlockSize, 0, launch.stream()>>>(
        grad.data<T>(), gi.data<T>(), gh.data<T>(), c.data<T>(), hc.data<T>(), d_gates.data<T>(), d_c.data<T>(), B,
        H);
  });
  ADCUDA_CHECK_LAUNCH();
  return {d_gates, d_c};
}

DeviceArray gru_cell(const DeviceArray& gi, const DeviceArray& gh, const DeviceArray& h) {
  const char* op = "gru_cell";
  const auto dims = check_cell(op, 3, gi, gh, h);
  const std::int64_t B = dims.first, H = dims.second;
  DeviceArray out = DeviceArray::empty(h.shape(), h.dtype(), h.device());
  if (B * H == 0) return out;
  KernelLaunch launch(out, gi, gh, h);
  dispatch_floating(h.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gru_cell_kernel<T><<<grid_size(B * H), kBlockSize, 0, launch.stream()>>>(gi.data<T>(), gh.data<T>(),
                                                                              h.data<T>(), out.data<T>(), B, H);
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

std::tuple<DeviceArray, DeviceArray, DeviceArray> gru_cell_backward(const DeviceArray& grad, const DeviceArray& gi,
                                                                    const DeviceArray& gh, const DeviceArray& h) {
  const char* op = "gru_cell_backward";
  const auto dims = check_cell(op, 3, gi, gh, h);
  const std::int64_t B = dims.first, H = dims.second;
  require(grad.shape() == h.shape() && grad.dtype() == h.dtype() && grad.is_contiguous(), op,
          "grad must be a contiguous array of the state's shape and dtype, got " + format_dims(grad.shape()));
  DeviceArray d_gi = DeviceArray::empty(gi.shape(), gi.dtype(), gi.device());
  DeviceArray d_gh = DeviceArray::empty(gh.shape(), gh.dtype(), gh.device());
  DeviceArray d_h = DeviceArray::empty(h.shape(), h.dtype(), h.device());
  if (B * H == 0) return {d_gi, d_gh, d_h};
  KernelLaunch launch(d_gi, d_gh, d_h, grad, gi, gh, h);
  dispatch_floating(h.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gru_cell_backward_kernel<T><<<grid_size(B * H), kBlockSize, 0, launch.stream()>>>(
        grad.data<T>(), gi.data<T>(), gh.data<T>(), h.data<T>(), d_gi.data<T>(), d_gh.data<T>(), d_h.data<T>(), B, H);
  });
  ADCUDA_CHECK_LAUNCH();
  return {d_gi, d_gh, d_h};
}

}  // namespace adcuda
