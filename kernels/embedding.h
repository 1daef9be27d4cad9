// Embedding kernels (embedding.cu): the CUDA backend's embedding and embedding_backward primitives, with
// the CPU backend's semantics (adcuda/backends/cpu/embedding.py). Plain C++ for the bindings.
#pragma once

#include <cstdint>

#include "runtime/device_array.h"

namespace adcuda {

// Rows of the 2-D `weight` (last dim contiguous, any row stride) at the int32/int64 `indices`
// (contiguous, any shape): a new array of shape indices.shape + (embedding_dim,). The gather checks every
// index on the device: one outside [0, num_embeddings) gets a row of zeros and is reported without a
// host sync, raised (DeviceIndexError, an IndexError) at the next synchronising call (device_errors.h).
DeviceArray embedding(const DeviceArray& weight, const DeviceArray& indices);

// The dense (num_embeddings, embedding_dim) weight gradient from `grad` (contiguous, indices.shape +
// (embedding_dim,), floating) and the `indices` the forward looked up (already checked: an index outside
// [0, num_embeddings) adds nowhere). Deterministic, without float atomics: the indices are radix-sorted
// stably with their positions, and one warp per weight row adds that row's gradient rows in index order
// in fp32 (fp64 for float64), then writes the row once. Row `padding_idx` (-1: none) is zero; with
// `scale_grad_by_freq` each row is divided by its index's count. Never waits for the device.
DeviceArray embedding_backward(const DeviceArray& grad, const DeviceArray& indices, std::int64_t num_embeddings,
                               std::int64_t padding_idx, bool scale_grad_by_freq);

}  // namespace adcuda
