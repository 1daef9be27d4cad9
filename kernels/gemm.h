// Matrix products on the GPU (kernels/gemm.cu): the CUDA backend's `matmul` primitive.
//
// Operands are read through their strides, so a transposed view (swapped strides), a slice or a
// broadcast batch dim (stride 0) is multiplied in place, never copied. Two kernels:
//   - fp32 / fp64 (and half types whose layout tensor cores cannot load): a shared-memory and
//     register-tiled SIMT kernel, 128x128x8 block tiles with 8x8 outputs per thread (64x64 tiles with
//     4x4 when the problem is too small to fill the GPU);
//   - fp16 / bf16 on sm_80+: mma.sync m16n8k16 tensor-core kernel, 128x128x32 block tiles, a 3-stage
//     cp.async pipeline, ldmatrix (.trans for the layouts that need it), fp32 accumulation.
// Plain C++: included by the bindings.
#pragma once

#include <string>

#include "runtime/device_array.h"

namespace adcuda {

// a (..., M, K) @ b (..., K, N) with the batch dims broadcast -> a new contiguous (batch..., M, N)
// array in a's dtype (a and b must share it). `bias` (may be nullptr) is an (N,) array of the same
// dtype added to every row in the epilogue. Floating point dtypes only.
DeviceArray matmul(const DeviceArray& a, const DeviceArray& b, const DeviceArray* bias = nullptr);

// Which kernels `matmul` uses on `device` (e.g. for adcuda.info()).
std::string gemm_path(int device);

}  // namespace adcuda
