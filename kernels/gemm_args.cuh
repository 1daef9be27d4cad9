// What the GEMM kernels of gemm.cu (SIMT, split-K reduction) and gemm_tensor_core.cu share: the
// problem description handed to every kernel and the epilogue they apply. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "functors.cuh"
#include "gemm.h"
#include "runtime/dispatch.cuh"
#include "runtime/launch.cuh"

namespace adcuda {

// A batch of GEMM problems as the kernels see it; strides and offsets in elements.
struct GemmArgs {
  std::int64_t M, N, K;
  const void* a;
  std::int64_t a_stride_m, a_stride_k;
  const void* b;
  std::int64_t b_stride_k, b_stride_n;
  void* c;  // contiguous (batch, M, N)
  const void* bias;  // (N,) or nullptr
  std::int64_t bias_stride;
  GemmActivation activation;
  void* preactivation;  // contiguous (batch, M, N): A @ B + bias before the activation, or nullptr
  std::int64_t batch;
  StridedIndexer<2, std::int64_t> batch_offsets;  // matrix z of A and of B: element offsets
  // Every aligned 16-byte block holding one of A's elements lies inside A's storage, so that the
  // tensor-core kernel may read whole blocks around them (its realigned loads).
  bool a_blocks_inside;
};

// Split-K: the K range cut into `splits` parts of `k_tiles_per_split` tensor-core K tiles each; every
// part writes fp32 partial sums to `partial` ((splits, batch, M, N) rows `partial_stride` floats apart),
// which reduce_split_k sums in split order (deterministic) before the epilogue.
struct SplitK {
  int splits = 1;
  int k_tiles_per_split = 0;
  float* partial = nullptr;
  std::int64_t partial_stride = 0;
};

// The activation of the epilogue, in the accumulator's type (fp32, or fp64 for double products).
template <typename Acc>
__host__ __device__ __forceinline__ Acc apply_activation(GemmActivation activation, Acc x) {
  return activation == GemmActivation::kGeluTanh ? math::GeluTanh{}(x) : x;
}

// bias[n] in the accumulator's type; 0 without a bias.
template <typename T>
__host__ __device__ __forceinline__ compute_t<T> bias_at(const GemmArgs& args, std::int64_t n) {
  return args.bias != nullptr ? to_compute(static_cast<const T*>(args.bias)[n * args.bias_stride]) : compute_t<T>(0);
}

// ------------------------------------------------------------------------------------------------
// The tensor-core kernel (gemm_tensor_core.cu), fp16 / bf16 only.

// How an operand's tiles come to shared memory: 16-byte cp.async chunks (the contiguous dim has stride
// 1 and every line starts 16-byte aligned); aligned 16-byte register loads realigned to the chunks
// (stride 1, lines at any element offset: a leading dimension of 50257); or element by element (no
// unit stride).
enum TileLoad : int { kLoadAsync = 0, kLoadRealigned = 1, kLoadElements = 2 };

// How each operand is read: which of its dims is stored contiguous in shared memory (K, or M / N),
// and how its tiles are loaded.
struct TensorCoreOperands {
  bool a_k_contiguous;
  TileLoad a_load;
  bool b_k_contiguous;
  TileLoad b_load;
};

struct TensorCoreTiles {
  int block_m, block_n, block_k;
};

TensorCoreTiles tensor_core_tiles();

// Whether the code this build loads on `device` has the tensor-core kernel's body (compiled for sm_80
// or newer); asked once per device.
bool tensor_core_gemm_runs_on(int device);

// T is __half or __nv_bfloat16. With split.splits > 1 the kernel writes only the fp32 partial sums.
template <typename T>
void launch_tensor_core_gemm(const GemmArgs& args, const SplitK& split, const TensorCoreOperands& operands,
                             int device, cudaStream_t stream);

// ------------------------------------------------------------------------------------------------
// The Hopper kernel (gemm_sm90.cu): TMA + wgmma + mbarrier stages, fp16 / bf16 only.

struct Sm90Tiles {
  int block_m, block_n, block_k;
};

Sm90Tiles sm90_gemm_tiles();

// Whether `device` is compute capability 9.0 and the code this build loads there has the kernel's
// body (sm_90a code); asked once per device.
bool sm90_gemm_runs_on(int device);

// Whether TMA can read a (rows x K) operand with these strides: K contiguous, rows a multiple of 16
// bytes apart (any stride for one row), 16-byte aligned.
bool sm90_operand_readable(std::int64_t rows, std::int64_t K, std::int64_t row_stride, std::int64_t k_stride,
                           const void* data);

// Whether the kernel can take the problem: one matrix (batch 1), K >= 1, A (M x K) and B read as N x K
// both sm90_operand_readable.
bool sm90_gemm_accepts(const GemmArgs& args);

// T is __half or __nv_bfloat16. split.k_tiles_per_split counts 32-wide K tiles and must be even when
// split.splits > 1; the kernel then writes only the fp32 partial sums.
template <typename T>
void launch_sm90_gemm(const GemmArgs& args, const SplitK& split, int device, cudaStream_t stream);

}  // namespace adcuda
