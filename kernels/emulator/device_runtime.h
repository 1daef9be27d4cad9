// Force-included (g++ -include) into every .cu file of an ADCUDA_CUDA=EMULATE build, which compiles
// them as host C++ after kernels/emulator/rewrite_launches.py has turned `<<<...>>>` launches into
// calls of the emulator (grid.h). This header makes the CUDA dialect mean the same thing on the host:
// `__shared__` storage, the thread/block coordinates, barriers, warp functions, atomics and intrinsics.
#pragma once

#define ADCUDA_EMULATION 1

// A stream's blocks run one at a time on that stream's host thread, so a block's shared memory can be a
// thread_local static: every CUDA thread of the block sees the same variable, the next block reuses it,
// and grids on other streams have their own. Defined before the CUDA headers, which keep it.
#define __shared__ static thread_local
#define __launch_bounds__(...)
// Empty rather than an attribute: libstdc++ spells __attribute__((__noinline__)), which must stay valid.
#define __noinline__

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "emulator/grid.h"
#include "emulator/intrinsics.h"

// cuda_runtime.h declares the kernel-pointer overloads of these only for nvcc.
template <typename T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attribute, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), attribute, value);
}
template <typename T>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attributes, T* kernel) {
  return ::cudaFuncGetAttributes(attributes, reinterpret_cast<const void*>(kernel));
}

#define threadIdx (::adcuda::emu::current_thread().thread_idx)
#define blockIdx (::adcuda::emu::current_thread().block_idx)
#define blockDim (::adcuda::emu::current_thread().block_dim)
#define gridDim (::adcuda::emu::current_thread().grid_dim)
