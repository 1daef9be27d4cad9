// Recurrent cell kernels (recurrent.cu): the CUDA backend's lstm_cell, gru_cell and their backwards,
// with the CPU backend's semantics (adcuda/backends/cpu/recurrent.py). Plain C++ for the bindings.
//
// All arrays contiguous, floating point, one dtype; B rows, H hidden units, gates in PyTorch's order
// along the last dim (LSTM i, f, g, o; GRU r, z, n). Half types are computed in fp32.
#pragma once

#include <tuple>

#include "runtime/device_array.h"

namespace adcuda {

// From the input and hidden projections gi, gh (B, 4H) and the cell state c (B, H) -> hc (2, B, H):
// hc[0] = o * tanh(c'), hc[1] = c' = f * c + i * g.
DeviceArray lstm_cell(const DeviceArray& gi, const DeviceArray& gh, const DeviceArray& c);

// From the gradient of hc (2, B, H) -> (d_gates (B, 4H), d_c (B, H)); d_gates is both projections'.
std::tuple<DeviceArray, DeviceArray> lstm_cell_backward(const DeviceArray& grad, const DeviceArray& gi,
                                                        const DeviceArray& gh, const DeviceArray& c,
                                                        const DeviceArray& hc);

// From gi, gh (B, 3H) and h (B, H) -> h' = (1 - z) * n + z * h, n = tanh(gi_n + r * gh_n).
DeviceArray gru_cell(const DeviceArray& gi, const DeviceArray& gh, const DeviceArray& h);

// From the gradient of h' (B, H) -> (d_gi, d_gh, d_h).
std::tuple<DeviceArray, DeviceArray, DeviceArray> gru_cell_backward(const DeviceArray& grad, const DeviceArray& gi,
                                                                    const DeviceArray& gh, const DeviceArray& h);

}  // namespace adcuda
