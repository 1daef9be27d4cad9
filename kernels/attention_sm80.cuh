// The sm_80 building blocks of the tensor-core attention kernels (attention_flash.cuh): inline-PTX
// wrappers for cp.async, ldmatrix, mma.sync.m16n8k16 and ex2.approx (emulated under ADCUDA_EMULATION by
// kernels/emulator/ptx_sm80.h), the padded shared-memory tile layout, and the cp.async tile loader.
//
// Fragment vocabulary (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane = 4 * g + t. An A fragment
// (16 x 16, four .b32 registers) holds rows g, g + 8 and columns 2t, 2t + 1 (+ 8); a B fragment (16 x 8,
// two registers) holds rows 2t, 2t + 1 (+ 8) of column g; a C fragment (16 x 8, four floats) holds rows
// g (c0, c1) and g + 8 (c2, c3), columns 2t and 2t + 1. A C fragment of two neighbouring n-tiles packed
// to 16 bits is exactly the A fragment of the next product: softmax output feeds P V with no shuffle.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ptx_sm80.cuh"

// Tensor-core code is compiled for sm_80 and newer (and the emulator); older targets get a trap, and
// the host never picks these kernels there (attention.cu checks the compiled code's PTX version).
#if defined(ADCUDA_EMULATION) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define ADCUDA_ATTENTION_SM80 1
#else
#define ADCUDA_ATTENTION_SM80 0
#endif

namespace adcuda::flash {

using ptx::cp_async_16;
using ptx::cp_async_commit;
using ptx::cp_async_wait;
using ptx::exp2_approx;
using ptx::ldmatrix_x4;
using ptx::mma_16816;

// Two floats rounded to T and packed in one register, the lower-indexed element in the low half.
template <typename T>
__device__ __forceinline__ std::uint32_t pack2(float low, float high) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 packed = __floats2half2_rn(low, high);
    return *reinterpret_cast<const std::uint32_t*>(&packed);
  } else {
    const __nv_bfloat162 packed = __floats2bfloat162_rn(low, high);
    return *reinterpret_cast<const std::uint32_t*>(&packed);
  }
}

// A kRows x kColumns tile of 16-bit elements in shared memory, row-major, each row padded by 8
// elements (16 bytes). ldmatrix reads eight rows at one 16-byte column: with a row stride of 16 bytes
// more than a multiple of 128 those land in eight different 16-byte bank groups, so ldmatrix is free of
// bank conflicts, and so are the 4-byte fragment stores of the backward's dS tile. Padding rather than an
// XOR swizzle (CUTLASS's choice) because it keeps every fragment address the lane's base plus a
// compile-time offset: with a swizzle each k-step's address is a different per-lane value, and the
// compiler holds dozens of them in registers, which the backward at head dim 128 (dK and dV alone take
// 128 registers per thread) cannot spare.
template <int kRows, int kColumns>
struct PaddedTile {
  static constexpr int kRowCount = kRows;
  static constexpr int kCols = kColumns;
  static constexpr int kStride = kColumns + 8;
  static constexpr int kChunks = kColumns / 8;  // 16-byte chunks per row
  static constexpr int kElements = kRows * kStride;
  static_assert((kStride * 2) % 128 == 16 || (kStride * 2) % 128 == 80, "eight rows in eight bank groups");
  __device__ __forceinline__ static int offset(int row, int chunk) { return row * kStride + chunk * 8; }
};

// Queues the cp.asyncs of one tile: rows [0, kRows) of `src` (row stride `row_stride` elements) into
// `tile`; rows past `valid_rows` and columns past `valid_cols` are zero-filled (with src-size 0 the
// source is not read, so the address past the end is never dereferenced). Thread x copies chunk
// x % kChunks of rows x / kChunks, + kThreads / kChunks, ...: one source pointer stepped by a constant,
// the shared offsets a constant apart.
// `src` must be 16-byte aligned and row_stride a multiple of 8 (the host makes sure of that).
template <int kThreads, typename Tile, typename T>
__device__ __forceinline__ void load_tile_async(T* tile, const T* src, std::int64_t row_stride, int valid_rows,
                                                int valid_cols) {
  static_assert(kThreads % Tile::kChunks == 0, "whole rows per pass");
  constexpr int kRowsPerPass = kThreads / Tile::kChunks;
  constexpr int kPasses = Tile::kRowCount * Tile::kChunks / kThreads;
  static_assert(kPasses * kThreads == Tile::kRowCount * Tile::kChunks, "whole chunks per thread");
  const int row = static_cast<int>(threadIdx.x) / Tile::kChunks, chunk = static_cast<int>(threadIdx.x) % Tile::kChunks;
  const int chunk_bytes = min(max((valid_cols - chunk * 8) * 2, 0), 16);
  const T* from = src + row * row_stride + chunk * 8;
  T* const to = tile + Tile::offset(row, chunk);
#pragma unroll
  for (int n = 0; n < kPasses; ++n) {
    cp_async_16(to + n * kRowsPerPass * Tile::kStride, from, row + n * kRowsPerPass < valid_rows ? chunk_bytes : 0);
    from += kRowsPerPass * row_stride;
  }
}

}  // namespace adcuda::flash
