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
using ptx::cp_async_16_or_zero;
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

// One thread's share of the cp.asyncs that fill a kind of tile: rows [0, kRows) of a matrix in global
// memory (row stride `row_stride` elements) into a tile, rows from `valid_rows` on and columns from
// `valid_cols` on zero-filled (valid_cols a multiple of 8, so a 16-byte chunk is wholly inside or
// outside; a zero-filled chunk reads nothing, so an address past the end is never dereferenced).
// Thread x copies chunk x % kChunks of rows x / kChunks + n kRowsPerPass. What depends only on the
// thread and the operand is worked out once, when the loader is made: the source pointer of its first
// chunk and its first row (or, for a chunk past valid_cols, a row past every tile). A load then costs per
// chunk one 64-bit pointer step, one compare (the ignore-src predicate) and the cp.async, whose shared
// destination is the thread's base plus a compile-time offset; advance() moves to the next tile down the
// matrix with one pointer addition. The row stride is passed to each call rather than kept: the
// kernels pass their argument's, which the compiler reads from the constant bank instead of holding
// two more registers per operand. The source must be 16-byte aligned and row_stride a multiple of 8
// (the host makes sure of that).
template <int kThreads, typename Tile, typename T>
struct TileLoader {
  static_assert(kThreads % Tile::kChunks == 0, "whole rows per pass");
  static constexpr int kRowsPerPass = kThreads / Tile::kChunks;
  static constexpr int kPasses = Tile::kRowCount * Tile::kChunks / kThreads;
  static_assert(kPasses * kThreads == Tile::kRowCount * Tile::kChunks, "whole chunks per thread");

  const T* src;       // this thread's first chunk of the current tile
  int first_row;      // the row of the thread's first chunk; 2^30 for a chunk past valid_cols
  int shared_offset;  // of the thread's first chunk in the tile

  __device__ __forceinline__ TileLoader(const T* matrix, std::int64_t row_stride, int valid_cols) {
    const int row = static_cast<int>(threadIdx.x) / Tile::kChunks;
    const int chunk = static_cast<int>(threadIdx.x) % Tile::kChunks;
    src = matrix + row * row_stride + chunk * 8;
    first_row = chunk * 8 < valid_cols ? row : (1 << 30);
    shared_offset = Tile::offset(row, chunk);
  }

  __device__ __forceinline__ void load(T* tile, int valid_rows, std::int64_t row_stride) const {
    const T* from = src;
    const int rows_left = valid_rows - first_row;
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      cp_async_16_or_zero(tile + shared_offset + n * kRowsPerPass * Tile::kStride, from, n * kRowsPerPass >= rows_left);
      from += kRowsPerPass * row_stride;
    }
  }

  __device__ __forceinline__ void advance(std::int64_t row_stride) { src += Tile::kRowCount * row_stride; }

  // Flips the sign of the chunks this thread loaded into `tile` (after they landed): negation is exact
  // in fp16 and bf16. The forward uses it to make a negative scale positive (attention_flash.cuh).
  __device__ __forceinline__ void negate_loaded(T* tile) const {
#pragma unroll
    for (int n = 0; n < kPasses; ++n) {
      auto* chunk = reinterpret_cast<uint4*>(tile + shared_offset + n * kRowsPerPass * Tile::kStride);
      uint4 bits = *chunk;
      bits.x ^= 0x80008000u;
      bits.y ^= 0x80008000u;
      bits.z ^= 0x80008000u;
      bits.w ^= 0x80008000u;
      *chunk = bits;
    }
  }
};

}  // namespace adcuda::flash
