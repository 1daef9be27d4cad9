// Scaled dot-product attention on tensor cores, FlashAttention-2 style, for fp16 and bf16 with fp32
// accumulation: the forward and backward kernels behind attention.cu's tensor-core path.
//
// Tiles and warps follow FlashAttention-2's shapes (mma.sync m16n8k16, fragments as attention_sm80.cuh
// describes). kD is the head dim rounded up to 32, 64 or 128 (columns past E / Ev are zero-filled in
// shared memory, so they add nothing).
//
// Forward (flash_forward_kernel): a block of 4 warps owns 128 query rows of one batch entry, 32 per
// warp (two 16-row m-tiles), so that every B fragment a warp reads by ldmatrix.x4 (16 keys x 16 dims of
// K, or 16 keys x 16 dims of V) feeds 4 mma: 2 n-tiles x 2 m-tiles. Q's A fragments stay in registers
// up to kD = 64; at 128, where O alone takes 128 floats per thread, they are read from shared memory at
// each k-step, one ldmatrix.x4 feeding the mma of its m-tile. K and V tiles of 64 keys (32 at kD = 128
// and with dropout at 64: forward_step_keys) stream through one shared-memory stage each, their loads
// staggered as in FlashAttention-2: V(n) is copied while S = Q K(n)^T is computed, K(n + 1) while the
// softmax and O += P V(n) run (two barriers per step; one stage each keeps kD = 128 at 51 KiB, two
// blocks per SM on an A100). Per step a warp computes its 32 x 64 (or 32 x 32) scores S = Q K^T
// unscaled, takes each row's maximum, and makes P = 2^(S c - m c) (c = scale log2 e) in one FFMA per
// score, the scale folded in: only the row maxima (4 per thread) are multiplied. Tiles that
// need masking (crossing the sequence end or the causal diagonal, any tile under a mask array) are
// scaled first and masked in log2 units, then taken with c = 1. A negative scale is made positive once,
// by flipping the sign of Q in shared memory (exact), because the maximum of unscaled scores is the
// maximum of the scaled ones only for c >= 0. The running max m and sum l are kept per thread
// (online softmax, reduced over the quad of lanes sharing a row only at the end; O's rescaling skipped
// by a warp whose rows' maxima did not grow); P, rounded to 16 bits,
// is already an A fragment: O += P V with V read by ldmatrix.trans. With is_causal, key tiles wholly
// above the diagonal are never loaded. The row's logsumexp, ln 2 (m + log2 l), is saved for the
// backward.
//
// Backward (flash_backward_kernel, after flash_backward_prepare_kernel has made delta_i =
// rowsum(dO_i * O_i) and the logsumexp in log2 units): a block of 8 warps owns 128 keys of one batch
// entry, 16 per warp, and keeps dK and dV for them in registers while Q and dO tiles of 64 queries (32
// at head dim 128) stream through two stages. 128 keys per block, FlashAttention-2's kBlockN, halves the
// dQ atomics of 64-key blocks: every block adds its share of dQ for every query it sees. Per tile a warp
// recomputes S^T = K Q^T for its keys (transposed, so that P^T and dS^T come out as A fragments for dV
// += P^T dO and dK += dS^T Q, with no trip through shared memory), P^T = 2^(S^T c - lse) (one FFMA per
// score), dP^T = V dO^T and dS^T = P^T (dP^T - delta). dQ += dS K needs dS with queries as rows: the
// warps write dS^T to shared memory and each then takes 16 query rows and a quarter or half of the
// columns, reading dS by ldmatrix.trans, and adds its fp32 products into a dQ accumulator with atomics
// (flash_dq_convert_kernel scales and rounds it). So dK and dV are deterministic and dQ is exact up to
// the order of fp32 additions, which can differ from run to run. The deterministic alternative, a
// second pass over keys per query block, recomputes S and dP: 7 instead of 5 matrix products, about
// 40% more tensor work in the backward, which is why the atomics were chosen.
//
// Dropout (attention_dropout.cuh) is drawn where P is made, forward and backward, from the same
// Philox counters: each thread draws the two blocks covering its quads of a 16 x 16 tile.
#pragma once

#include <cstdint>

#include "attention_args.cuh"
#include "attention_dropout.cuh"
#include "attention_sm80.cuh"
#include "runtime/dispatch.cuh"

namespace adcuda::flash {

constexpr int kForwardWarps = 4;
constexpr int kForwardThreads = 32 * kForwardWarps;
constexpr int kWarpQueries = 32;                                // forward: query rows per warp
constexpr int kBlockQueries = kWarpQueries * kForwardWarps;     // forward: query rows per block
constexpr int kBackwardWarps = 8;
constexpr int kBackwardThreads = 32 * kBackwardWarps;
constexpr int kBlockKeys = 16 * kBackwardWarps;                 // backward: keys per block, 16 per warp
constexpr int kPaddedRows = 64;  // the backward's lse and delta rows are padded to a multiple of this
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr float kInfinity = __builtin_huge_valf();

// The head dims the kernels are compiled for: 32, 64 or 128 (the smallest that holds max(E, Ev)).
__host__ __device__ constexpr int head_dim_tile(int head_dim) {
  return head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : 128;
}

// Backward: queries per step. 64 up to kD = 64; at 128, where dK and dV take 64 floats each per thread,
// 32, so that S^T and dP^T (kQueries / 2 floats each) fit beside them without spilling.
template <int kD>
__host__ __device__ constexpr int backward_step_queries() {
  return kD <= 64 ? 64 : 32;
}

// Forward: whether a warp keeps its Q fragments (kD / 2 registers per thread) in registers for the
// whole kernel. At kD = 128 the 128 floats of O and the 64 of S leave no room for them.
template <int kD>
__host__ __device__ constexpr bool forward_q_in_registers() {
  return kD <= 64;
}

// Forward: keys per step. 64, so that each K fragment feeds both m-tiles of 8 n-tiles; 32 where the
// 64 floats of S would not fit beside the rest without spilling: at kD = 128 (O takes 128 floats) and
// with dropout at 64 (the Philox draws need their own registers). FlashAttention-2 picks 128 x 32
// tiles at kD = 128 on some GPUs for the same reason.
template <int kD, bool kDropout>
__host__ __device__ constexpr int forward_step_keys() {
  return kD >= 128 || (kD >= 64 && kDropout) ? 32 : 64;
}

// The shared-memory tiles of each kernel.
template <int kD, bool kDropout>
struct ForwardTiles {
  static constexpr int kStepKeys = forward_step_keys<kD, kDropout>();
  using Q = PaddedTile<kBlockQueries, kD>;
  using KV = PaddedTile<kStepKeys, kD>;
  static constexpr int kBytes = (Q::kElements + 2 * KV::kElements) * 2;  // Q; one stage of K and of V
};

template <int kD>
struct BackwardTiles {
  static constexpr int kQueries = backward_step_queries<kD>();
  using KV = PaddedTile<kBlockKeys, kD>;
  using Q = PaddedTile<kQueries, kD>;  // Q and dO
  using Ds = PaddedTile<kBlockKeys, kQueries>;
  // K, V; two stages of Q and dO; dS^T; two stages of lse and delta
  static constexpr int kBytes = (2 * KV::kElements + 2 * 2 * Q::kElements + Ds::kElements) * 2 + 2 * 2 * kQueries * 4;
};

// Masks one warp's scores (in log2 units) of a 16-row tile, held as C fragments: element e of n-tile nt
// is at fragment row row0 + g + 8 (e / 2) and column col0 + 8 nt + 2 t + e % 2, which are (query, key) in
// the forward and (key, query) in the backward (kTransposed). A score becomes -inf where the key is past
// S, the query past L, causality forbids it or a bool mask does; an additive mask is added (times log2 e).
// The limits are taken relative to (row0, col0) once, so the bounds and causality cost each element
// 32-bit compares and a select; a mask array (a uniform branch) is then read only where both indices
// are in range, at offsets from one per-thread base.
template <bool kTransposed, int kNTiles, typename T>
__device__ __forceinline__ void mask_scores(float (&s)[kNTiles][4], const AttentionArgs& args,
                                            const std::int64_t& mask_offset, std::int64_t row0, std::int64_t col0) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr std::int64_t kFar = std::int64_t(1) << 30;
  auto clamp = [](std::int64_t x) { return static_cast<int>(min(max(x, -kFar), kFar)); };
  // an element is inside when r < rows_left and c < cols_left (r, c relative to row0, col0)
  const int rows_left = clamp((kTransposed ? args.S : args.L) - row0) - g;
  const int cols_left = clamp((kTransposed ? args.L : args.S) - col0) - 2 * t;
  // key - query = (c - r or r - c) - diagonal: causality forbids the element where that is > 0
  const int diagonal = (args.causal ? clamp(kTransposed ? col0 - row0 : row0 - col0) : static_cast<int>(kFar)) +
                       (kTransposed ? 2 * t - g : g - 2 * t);
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 8 * (e >> 1), c = 8 * nt + (e & 1);  // relative to the thread's (g, 2 t)
      const bool inside = r < rows_left && c < cols_left && (kTransposed ? r - c : c - r) <= diagonal;
      if (!inside) s[nt][e] = -kInfinity;
    }
  }
  if (args.mask_kind == MaskKind::None) return;
  const EntryMask<T> mask = entry_mask<T>(args, mask_offset);
  const std::int64_t row_stride = kTransposed ? mask.col_stride : mask.row_stride;
  const std::int64_t col_stride = kTransposed ? mask.row_stride : mask.col_stride;
  std::int64_t at = (row0 + g) * row_stride + (col0 + 2 * t) * col_stride;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 8 * (e >> 1), c = 8 * nt + (e & 1);
      if (r < rows_left && c < cols_left) {
        const std::int64_t element = at + ((e >> 1) ? 8 * row_stride : 0) + ((e & 1) ? col_stride : 0);
        if (mask.allowed != nullptr) {
          if (!mask.allowed[element]) s[nt][e] = -kInfinity;
        } else {
          s[nt][e] += to_compute(mask.added[element]) * kLog2e;
        }
      }
    }
    at += 8 * col_stride;
  }
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Dropout over one warp's 16 x 16 sub-tile held as two C fragments, left (columns 0-7 of the sub-tile)
// and right (8-15): calls visit(side, e, kept) for the thread's 8 values, element e of fragment `side`
// (0 left, 1 right). kTransposed: the fragments are S^T (rows = keys), as in the backward. `query_tile`
// and `key_tile` are the sub-tile's 16-wide tile indices along queries and keys.
template <bool kTransposed, typename Visit>
__device__ __forceinline__ void visit_dropout(const AttentionDropout& dropout, std::int64_t b, std::int64_t query_tile,
                                              std::int64_t key_tile, Visit&& visit) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    // forward: block (a = g, c = 2t + half), whose words (g, c), (g, c + 8), (g + 8, c), (g + 8, c + 8)
    // are left[half], right[half], left[2 + half], right[2 + half];
    // backward: block (a = 2t + half, c = g), whose words (a, g), (a, g + 8), (a + 8, g), (a + 8, g + 8)
    // are left[half], left[2 + half], right[half], right[2 + half].
    const int a = kTransposed ? 2 * t + half : g;
    const int c = kTransposed ? g : 2 * t + half;
    const philox::Words w = attention_dropout_block(dropout, b, query_tile, key_tile, a, c);
    visit(0, half, w.x[0] < dropout.keep_threshold);
    if constexpr (kTransposed) {
      visit(0, 2 + half, w.x[1] < dropout.keep_threshold);
      visit(1, half, w.x[2] < dropout.keep_threshold);
    } else {
      visit(1, half, w.x[1] < dropout.keep_threshold);
      visit(0, 2 + half, w.x[2] < dropout.keep_threshold);
    }
    visit(1, 2 + half, w.x[3] < dropout.keep_threshold);
  }
}

// Forward: the online-softmax update of one row held by this thread, after a step's scores: `tile_max`
// is the quad's maximum of the row's scores (unscaled, or in log2 units where `multiplier` is 1), and
// the returned value is minus the reference the step's exponentials subtract, 2^(s multiplier - ref).
// A row with nothing to attend to so far keeps max -inf and subtracts 0 instead, so every exponential is
// 2^-inf = 0. What was accumulated (the row's sum and O) is rescaled by the returned correction.
__device__ __forceinline__ float update_row_max(float& row_max, float tile_max, float multiplier, float& correction) {
  const float new_max = fmaxf(row_max, tile_max * multiplier);
  const float reference = new_max == -kInfinity ? 0.0f : new_max;
  correction = exp2_approx(row_max - reference);
  row_max = new_max;
  return -reference;
}

// Blocks per SM each kernel is compiled for. The forward's 4-warp blocks need up to 255 registers (O,
// S and, up to kD = 64, Q's fragments per thread): 2 blocks per SM, FlashAttention-2's occupancy, with
// shared memory for both on an A100 (2 x 51 KiB at kD = 128) and an H100. The backward's 8-warp block
// holds dK and dV of 16 keys per warp: one block (8 warps) per SM. Asking ptxas for these minimums
// gives it 255 registers; without one it sometimes caps registers lower itself and spills.
constexpr int kForwardMinBlocks = 2;

// ------------------------------------------------------------------------------------------------
// Forward. out: contiguous (batch, L, Ev); lse: (batch, L), natural log.
template <typename T, int kD, bool kDropout>
__global__ void __launch_bounds__(kForwardThreads, kForwardMinBlocks)
    flash_forward_kernel(AttentionArgs args, T* out, float* lse) {
#if ADCUDA_ATTENTION_SM80
  using QTile = typename ForwardTiles<kD, kDropout>::Q;
  using KVTile = typename ForwardTiles<kD, kDropout>::KV;
  constexpr int kStepKeys = ForwardTiles<kD, kDropout>::kStepKeys;
  constexpr bool kQInRegisters = forward_q_in_registers<kD>();
  constexpr int kSteps = kD / 16;            // k-steps of Q K^T; pairs of n-tiles of P V
  constexpr int kKeyNTiles = kStepKeys / 8;  // n-tiles of S
  constexpr int kMTiles = kWarpQueries / 16;
  extern __shared__ __align__(128) unsigned char flash_shared[];
  T* const q_tile = reinterpret_cast<T*>(flash_shared);
  T* const k_tile = q_tile + QTile::kElements;
  T* const v_tile = k_tile + KVTile::kElements;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int matrix = lane / 8, matrix_row = lane % 8;  // ldmatrix: this lane addresses row matrix_row of `matrix`
  const std::int64_t query_blocks = (args.L + kBlockQueries - 1) / kBlockQueries;
  const int b = static_cast<int>(blockIdx.x / query_blocks);  // the grid has fewer than 2^31 blocks
  const std::int64_t i0 = (blockIdx.x % query_blocks) * kBlockQueries;
  std::int64_t offsets[4];
  args.batch_offsets.offsets(b, offsets);
  // The mask's offset for this batch entry and the block's first query, read only by tiles that need
  // masking, dropout and the epilogue: kept in shared memory (written before the first barrier) rather
  // than in four registers through the main loop, where O and S take all but a few.
  __shared__ std::int64_t block_facts[3];
  if (threadIdx.x == 0) {
    block_facts[0] = offsets[3];
    block_facts[1] = i0;
    block_facts[2] = b * args.L + i0;  // the block's first row of out and lse
  }
  const std::int64_t key_end = args.causal ? min(args.S, i0 + kBlockQueries) : args.S;
  const int key_steps = static_cast<int>((key_end + kStepKeys - 1) / kStepKeys);

  TileLoader<kForwardThreads, QTile, T> q_loader(static_cast<const T*>(args.q) + offsets[0] + i0 * args.q_row_stride,
                                                 args.q_row_stride, args.E);
  TileLoader<kForwardThreads, KVTile, T> k_loader(static_cast<const T*>(args.k) + offsets[1], args.k_row_stride,
                                                  args.E);
  TileLoader<kForwardThreads, KVTile, T> v_loader(static_cast<const T*>(args.v) + offsets[2], args.v_row_stride,
                                                  args.Ev);
  q_loader.load(q_tile, static_cast<int>(min(args.L - i0, std::int64_t(kBlockQueries))), args.q_row_stride);
  cp_async_commit();
  if (key_steps > 0) k_loader.load(k_tile, static_cast<int>(min(args.S, std::int64_t(kStepKeys))), args.k_row_stride);
  cp_async_commit();
  cp_async_wait<1>();  // this thread's chunks of Q have landed
  if (args.scale < 0) q_loader.negate_loaded(q_tile);
  __syncthreads();

  // This warp's A-fragment rows of Q for m-tile mt at k-step kk.
  auto q_rows = [&](int mt, int kk) {
    return q_tile +
           QTile::offset(kWarpQueries * warp + 16 * mt + (matrix & 1) * 8 + matrix_row, 2 * kk + (matrix >> 1));
  };
  std::uint32_t q_frag[kQInRegisters ? kMTiles : 1][kQInRegisters ? kSteps : 1][4];
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) ldmatrix_x4<false>(q_frag[mt][kk], q_rows(mt, kk));
    }
  }

  float o[kMTiles][2 * kSteps][4] = {};
  float row_max[kMTiles][2], row_sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    row_max[mt][0] = row_max[mt][1] = -kInfinity;
    row_sum[mt][0] = row_sum[mt][1] = 0.0f;
  }
  const float scale_log2 = fabsf(static_cast<float>(args.scale)) * kLog2e;  // Q's sign carries a negative scale
  // Steps before this one need no masking: their keys lie inside S and, with is_causal, at or below
  // the diagonal of the warp's first query (j0 + 63 <= warp_row0); with a mask array, none.
  const std::int64_t first_warp_row = i0 + kWarpQueries * warp;
  const std::int64_t inside_steps = args.S / kStepKeys;
  const int unmasked_steps =
      args.mask_kind != MaskKind::None
          ? 0
          : static_cast<int>(args.causal ? min(inside_steps, (first_warp_row + 1) / kStepKeys) : inside_steps);

  for (int step = 0; step < key_steps; ++step) {
    const std::int64_t j0 = static_cast<std::int64_t>(step) * kStepKeys;
    const int valid_keys = static_cast<int>(min(args.S - j0, std::int64_t(kStepKeys)));
    cp_async_wait<0>();
    __syncthreads();  // K(step) is visible; every warp is done with V(step - 1)
    v_loader.load(v_tile, valid_keys, args.v_row_stride);
    v_loader.advance(args.v_row_stride);
    cp_async_commit();

    float s[kMTiles][kKeyNTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      std::uint32_t qa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        if constexpr (kQInRegisters) {
#pragma unroll
          for (int r = 0; r < 4; ++r) qa[mt][r] = q_frag[mt][kk][r];
        } else {
          ldmatrix_x4<false>(qa[mt], q_rows(mt, kk));
        }
      }
#pragma unroll
      for (int np = 0; np < kKeyNTiles / 2; ++np) {
        std::uint32_t kb[4];
        ldmatrix_x4<false>(kb, k_tile + KVTile::offset(16 * np + (matrix >> 1) * 8 + matrix_row, 2 * kk + (matrix & 1)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(s[mt][2 * np], qa[mt], kb[0], kb[1]);
          mma_16816<T>(s[mt][2 * np + 1], qa[mt], kb[2], kb[3]);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // V(step) is visible; every warp is done with K(step)
    if (step + 1 < key_steps) {
      k_loader.advance(args.k_row_stride);
      k_loader.load(k_tile, static_cast<int>(min(args.S - j0 - kStepKeys, std::int64_t(kStepKeys))), args.k_row_stride);
    }
    cp_async_commit();

    // The scores stay unscaled (multiplier c) except in tiles that need masking (tiles crossing the
    // sequence end or the causal diagonal, any tile under a mask array): those are scaled here and
    // masked in log2 units (multiplier 1). The choice is the warp's, so the branch is uniform.
    float multiplier = scale_log2;
    if (step >= unmasked_steps) {
      multiplier = 1.0f;
      const std::int64_t warp_row0 = block_facts[1] + kWarpQueries * warp;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kKeyNTiles; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] *= scale_log2;
        }
        mask_scores<false, kKeyNTiles, T>(s[mt], args, block_facts[0], warp_row0 + 16 * mt, j0);
      }
    }

    // Online softmax: P = 2^(s multiplier - m) in one FFMA per score; what was accumulated is
    // rescaled by 2^(old max - new max), which is exactly 1 for a row whose maximum did not grow: the
    // warp skips O's kD FMULs per thread when that holds for all its rows (a uniform branch), as it
    // does for most steps once the rows' maxima have been met.
    float minus_reference[kMTiles][2], correction[kMTiles][2];
    bool grew = false;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float tile_max = -kInfinity;
#pragma unroll
        for (int nt = 0; nt < kKeyNTiles; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        minus_reference[mt][r] = update_row_max(row_max[mt][r], quad_max(tile_max), multiplier, correction[mt][r]);
        grew |= correction[mt][r] != 1.0f;
      }
    }
    if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          row_sum[mt][r] *= correction[mt][r];
#pragma unroll
          for (int dt = 0; dt < 2 * kSteps; ++dt) {
            o[mt][dt][2 * r] *= correction[mt][r];
            o[mt][dt][2 * r + 1] *= correction[mt][r];
          }
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kKeyNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mt][nt][e] = exp2_approx(fmaf(s[mt][nt][e], multiplier, minus_reference[mt][e >> 1]));
          row_sum[mt][e >> 1] += s[mt][nt][e];
        }
      }
    }
    if constexpr (kDropout) {
      const std::int64_t query_tile0 = (block_facts[1] + kWarpQueries * warp) / 16;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int sub = 0; sub < kKeyNTiles / 2; ++sub) {
          visit_dropout<false>(args.dropout, b, query_tile0 + mt, j0 / 16 + sub, [&](int side, int e, bool kept) {
            if (!kept) s[mt][2 * sub + side][e] = 0.0f;
          });
        }
      }
    }

    // O += P V: each V fragment pair (16 keys x 16 dims, ldmatrix.trans) feeds both m-tiles.
#pragma unroll
    for (int kk = 0; kk < kStepKeys / 16; ++kk) {
      std::uint32_t pa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        pa[mt][0] = pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kSteps; ++dp) {
        std::uint32_t vb[4];
        ldmatrix_x4<true>(vb, v_tile + KVTile::offset(16 * kk + (matrix & 1) * 8 + matrix_row, 2 * dp + (matrix >> 1)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(o[mt][2 * dp], pa[mt], vb[0], vb[1]);
          mma_16816<T>(o[mt][2 * dp + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }

  const float kept_scale = kDropout ? static_cast<float>(args.dropout.scale) : 1.0f;
  const int block_rows = static_cast<int>(min(args.L - block_facts[1], std::int64_t(kBlockQueries)));
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = quad_sum(row_sum[mt][r]);
      const int row = kWarpQueries * warp + 16 * mt + g + 8 * r;  // in the block
      if (row >= block_rows) continue;
      const float inverse = sum > 0.0f ? kept_scale / sum : 0.0f;
      const std::int64_t i = block_facts[2] + row;  // of out and lse
      T* const out_row = out + i * args.Ev;
#pragma unroll
      for (int dt = 0; dt < 2 * kSteps; ++dt) {
        const int col = 8 * dt + 2 * t;
        if (col < args.Ev) {
          *reinterpret_cast<std::uint32_t*>(out_row + col) =
              pack2<T>(o[mt][dt][2 * r] * inverse, o[mt][dt][2 * r + 1] * inverse);
        }
      }
      if (t == 0) lse[i] = sum > 0.0f ? (row_max[mt][r] + log2f(sum)) * kLn2 : -kInfinity;
    }
  }
#else
  __trap();
#endif
}

// ------------------------------------------------------------------------------------------------
// Backward.

// Row r of (batch, padded_L): delta = sum(g * out) and the logsumexp in log2 units, +inf for a row
// that attends to nothing (so its probabilities 2^(s - lse) are 0); rows past L (padding up to a
// multiple of kPaddedRows, so the backward reads whole tiles) get 0 and +inf. One warp per row.
template <typename T>
__global__ void flash_backward_prepare_kernel(const T* g, const T* out, const float* lse, float* lse_log2,
                                              float* delta, std::int64_t batch, std::int64_t L,
                                              std::int64_t padded_L, int Ev) {
  const int lane = threadIdx.x % 32;
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t row = first; row < batch * padded_L; row += step) {
    const std::int64_t b = row / padded_L, i = row % padded_L;
    float sum = 0.0f, row_lse = kInfinity;
    if (i < L) {
      const std::int64_t source = (b * L + i) * Ev;
      for (int d = lane; d < Ev; d += 32) sum += to_compute(g[source + d]) * to_compute(out[source + d]);
      sum = quad_sum(sum);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      const float l = lse[b * L + i];
      row_lse = isfinite(l) ? l * kLog2e : kInfinity;
    }
    if (lane == 0) {
      delta[row] = sum;
      lse_log2[row] = row_lse;
    }
  }
}

// dq (contiguous (batch, L, E)) = scale * the fp32 accumulator (batch, padded_L, E), rounded to T.
template <typename T>
__global__ void flash_dq_convert_kernel(const float* dq_accum, T* dq, std::int64_t batch, std::int64_t L,
                                        std::int64_t padded_L, int E, float scale) {
  const std::int64_t per_entry = L * E;
  ADCUDA_GRID_STRIDE_LOOP(index, batch * per_entry) {
    const std::int64_t b = index / per_entry, rest = index % per_entry;
    dq[index] = convert<T>(dq_accum[b * padded_L * E + rest] * scale);
  }
}

// grad: contiguous (batch, L, Ev); lse_log2, delta: (batch, padded_L); dq_accum: (batch, padded_L, E),
// zeroed; dk: contiguous (batch, S, E); dv: contiguous (batch, S, Ev).
template <typename T, int kD, bool kDropout>
__global__ void __launch_bounds__(kBackwardThreads, 1)
    flash_backward_kernel(AttentionArgs args, const T* grad, const float* lse_log2, const float* delta,
                          std::int64_t padded_L, float* dq_accum, T* dk, T* dv) {
#if ADCUDA_ATTENTION_SM80
  constexpr int kQueries = BackwardTiles<kD>::kQueries;
  using KVTile = typename BackwardTiles<kD>::KV;
  using QTile = typename BackwardTiles<kD>::Q;  // Q and dO
  using DsTile = typename BackwardTiles<kD>::Ds;
  constexpr int kSteps = kD / 16;
  constexpr int kQueryNTiles = kQueries / 8;
  // dQ += dS K: the kQueries x kD product is split over the warps in 16-row groups and column groups.
  constexpr int kDqRowGroups = kQueries / 16;
  constexpr int kDqColSteps = kSteps / (kBackwardWarps / kDqRowGroups);  // 16-column steps per warp
  static_assert(kDqColSteps >= 1 && kDqColSteps * (kBackwardWarps / kDqRowGroups) == kSteps, "whole column steps");
  extern __shared__ __align__(128) unsigned char flash_shared[];
  T* const k_tile = reinterpret_cast<T*>(flash_shared);
  T* const v_tile = k_tile + KVTile::kElements;
  T* const q_tiles = v_tile + KVTile::kElements;     // two stages
  T* const g_tiles = q_tiles + 2 * QTile::kElements;  // two stages
  T* const ds_tile = g_tiles + 2 * QTile::kElements;
  float* const lse_tiles = reinterpret_cast<float*>(ds_tile + DsTile::kElements);  // two stages
  float* const delta_tiles = lse_tiles + 2 * kQueries;                              // two stages

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int matrix = lane / 8, matrix_row = lane % 8;
  const std::int64_t key_blocks = (args.S + kBlockKeys - 1) / kBlockKeys;
  const int b = static_cast<int>(blockIdx.x / key_blocks);  // the grid has fewer than 2^31 blocks
  const std::int64_t j0 = (blockIdx.x % key_blocks) * kBlockKeys;
  std::int64_t offsets[4];
  args.batch_offsets.offsets(b, offsets);
  float* const dq_entry = dq_accum + std::int64_t(b) * padded_L * args.E;
  // The mask's offset for this batch entry, read only by tiles under a mask array: kept in shared
  // memory (written before the first barrier) rather than in two registers for the whole kernel.
  __shared__ std::int64_t mask_offset;
  if (threadIdx.x == 0) mask_offset = offsets[3];
  // with is_causal only queries i >= j attend to key j: start at the step holding query j0
  const std::int64_t query_begin = args.causal ? j0 : 0;
  const int query_steps =
      query_begin < args.L ? static_cast<int>((args.L - query_begin + kQueries - 1) / kQueries) : 0;

  TileLoader<kBackwardThreads, QTile, T> q_loader(
      static_cast<const T*>(args.q) + offsets[0] + query_begin * args.q_row_stride, args.q_row_stride, args.E);
  TileLoader<kBackwardThreads, QTile, T> g_loader(grad + (std::int64_t(b) * args.L + query_begin) * args.Ev, args.Ev,
                                                  args.Ev);
  // kQueries floats of lse and of delta per step, whole 16-byte chunks (the buffers are padded to 64
  // rows), by the first kQueries / 2 threads: one source pointer each, stepped by kQueries.
  constexpr int kStatChunks = kQueries / 4;
  const bool loads_stats = threadIdx.x < 2 * kStatChunks;
  const int stat_chunk = threadIdx.x % kStatChunks;
  const float* stat_src = (threadIdx.x < kStatChunks ? lse_log2 : delta) + std::int64_t(b) * padded_L + query_begin + 4 * stat_chunk;
  float* const stat_dst = (threadIdx.x < kStatChunks ? lse_tiles : delta_tiles) + 4 * stat_chunk;

  auto load_queries = [&](int step) {
    const int rows = static_cast<int>(min(args.L - query_begin - static_cast<std::int64_t>(step) * kQueries,
                                          std::int64_t(kQueries)));
    const int stage = step & 1;
    q_loader.load(q_tiles + stage * QTile::kElements, rows, args.q_row_stride);
    q_loader.advance(args.q_row_stride);
    g_loader.load(g_tiles + stage * QTile::kElements, rows, args.Ev);
    g_loader.advance(args.Ev);
    if (loads_stats) cp_async_16(stat_dst + stage * kQueries, stat_src, 16);
    stat_src += kQueries;
  };
  {
    const int valid_keys = static_cast<int>(min(args.S - j0, std::int64_t(kBlockKeys)));
    TileLoader<kBackwardThreads, KVTile, T>(static_cast<const T*>(args.k) + offsets[1] + j0 * args.k_row_stride,
                                            args.k_row_stride, args.E)
        .load(k_tile, valid_keys, args.k_row_stride);
    TileLoader<kBackwardThreads, KVTile, T>(static_cast<const T*>(args.v) + offsets[2] + j0 * args.v_row_stride,
                                            args.v_row_stride, args.Ev)
        .load(v_tile, valid_keys, args.v_row_stride);
  }
  if (query_steps > 0) load_queries(0);
  cp_async_commit();

  float dk_acc[2 * kSteps][4] = {};
  float dv_acc[2 * kSteps][4] = {};
  const float scale_log2 = static_cast<float>(args.scale) * kLog2e;
  const std::int64_t warp_key0 = j0 + 16 * warp;
  // This warp's A-fragment rows of K or V (keys 16 warp .. + 15) at k-step kk. They are read again at
  // every step rather than kept: dK and dV already hold 2 kD / 4 floats per thread.
  auto key_rows = [&](const T* tile, int kk) {
    return tile + KVTile::offset(16 * warp + (matrix & 1) * 8 + matrix_row, 2 * kk + (matrix >> 1));
  };

  for (int step = 0; step < query_steps; ++step) {
    cp_async_wait<0>();
    __syncthreads();  // this step's tiles are visible; every warp is done with the other stage and dS^T
    if (step + 1 < query_steps) load_queries(step + 1);
    cp_async_commit();
    const int stage = step & 1;
    const T* const q_s = q_tiles + stage * QTile::kElements;
    const T* const g_s = g_tiles + stage * QTile::kElements;
    const float* const lse_s = lse_tiles + stage * kQueries;
    const float* const delta_s = delta_tiles + stage * kQueries;
    const std::int64_t i0 = query_begin + static_cast<std::int64_t>(step) * kQueries;

    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys x kQueries queries.
    float s[kQueryNTiles][4] = {};
    float dp[kQueryNTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
      std::uint32_t ka[4], va[4];
      ldmatrix_x4<false>(ka, key_rows(k_tile, kk));
      ldmatrix_x4<false>(va, key_rows(v_tile, kk));
#pragma unroll
      for (int np = 0; np < kQueryNTiles / 2; ++np) {
        const int row = 16 * np + (matrix >> 1) * 8 + matrix_row, chunk = 2 * kk + (matrix & 1);
        std::uint32_t qb[4], gb[4];
        ldmatrix_x4<false>(qb, q_s + QTile::offset(row, chunk));
        mma_16816<T>(s[2 * np], ka, qb[0], qb[1]);
        mma_16816<T>(s[2 * np + 1], ka, qb[2], qb[3]);
        ldmatrix_x4<false>(gb, g_s + QTile::offset(row, chunk));
        mma_16816<T>(dp[2 * np], va, gb[0], gb[1]);
        mma_16816<T>(dp[2 * np + 1], va, gb[2], gb[3]);
      }
    }

    // P^T = 2^(S^T c - lse) in one FFMA per score, the scale c folded in (0 where masked or where the
    // query's row attends to nothing); tiles that need masking are scaled first and masked in log2
    // units (multiplier 1). Then, in place, dp <- dS^T = P^T (dP^T z - delta) and s <- P^T z (what dV
    // needs), z the dropout factor. Queries past L need no mask: their lse is +inf, so their
    // probabilities are 0 anyway.
    float multiplier = scale_log2;
    if (args.mask_kind != MaskKind::None || warp_key0 + 16 > args.S || (args.causal && warp_key0 + 15 > i0)) {
      multiplier = 1.0f;
#pragma unroll
      for (int nt = 0; nt < kQueryNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] *= scale_log2;
      }
      mask_scores<true, kQueryNTiles, T>(s, args, mask_offset, warp_key0, i0);
    }
#pragma unroll
    for (int nt = 0; nt < kQueryNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = exp2_approx(fmaf(s[nt][e], multiplier, -lse_s[8 * nt + 2 * t + (e & 1)]));
    }
    if constexpr (kDropout) {
      const float kept_scale = static_cast<float>(args.dropout.scale);
#pragma unroll
      for (int sub = 0; sub < kQueryNTiles / 2; ++sub) {
        visit_dropout<true>(args.dropout, b, i0 / 16 + sub, warp_key0 / 16, [&](int side, int e, bool kept) {
          const int nt = 2 * sub + side;
          const float z = kept ? kept_scale : 0.0f;
          dp[nt][e] = s[nt][e] * (dp[nt][e] * z - delta_s[8 * nt + 2 * t + (e & 1)]);
          s[nt][e] *= z;
        });
      }
    } else {
#pragma unroll
      for (int nt = 0; nt < kQueryNTiles; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) dp[nt][e] = s[nt][e] * (dp[nt][e] - delta_s[8 * nt + 2 * t + (e & 1)]);
      }
    }

    // dV += P^T dO and dK += dS^T Q: A from the registers above, B (queries x head dim) by ldmatrix.trans.
#pragma unroll
    for (int kk = 0; kk < kQueries / 16; ++kk) {
      const std::uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const std::uint32_t dsa[4] = {pack2<T>(dp[2 * kk][0], dp[2 * kk][1]), pack2<T>(dp[2 * kk][2], dp[2 * kk][3]),
                                    pack2<T>(dp[2 * kk + 1][0], dp[2 * kk + 1][1]),
                                    pack2<T>(dp[2 * kk + 1][2], dp[2 * kk + 1][3])};
#pragma unroll
      for (int dt = 0; dt < kSteps; ++dt) {
        const int row = 16 * kk + (matrix & 1) * 8 + matrix_row, chunk = 2 * dt + (matrix >> 1);
        std::uint32_t gb[4], qb[4];
        ldmatrix_x4<true>(gb, g_s + QTile::offset(row, chunk));
        mma_16816<T>(dv_acc[2 * dt], pa, gb[0], gb[1]);
        mma_16816<T>(dv_acc[2 * dt + 1], pa, gb[2], gb[3]);
        ldmatrix_x4<true>(qb, q_s + QTile::offset(row, chunk));
        mma_16816<T>(dk_acc[2 * dt], dsa, qb[0], qb[1]);
        mma_16816<T>(dk_acc[2 * dt + 1], dsa, qb[2], qb[3]);
      }
    }

    // dS^T to shared memory (keys x queries); then dQ += dS K, a warp taking 16 query rows and
    // kDqColSteps 16-column steps of it, dS read by ldmatrix.trans.
#pragma unroll
    for (int nt = 0; nt < kQueryNTiles; ++nt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        *reinterpret_cast<std::uint32_t*>(ds_tile + DsTile::offset(16 * warp + g + 8 * r, nt) + 2 * t) =
            pack2<T>(dp[nt][2 * r], dp[nt][2 * r + 1]);
      }
    }
    __syncthreads();
    const int dq_rows0 = 16 * (warp % kDqRowGroups);
    const int dq_step0 = kDqColSteps * (warp / kDqRowGroups);
    std::uint32_t ds_frag[kBlockKeys / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
      const int row = 16 * kk + (matrix >> 1) * 8 + matrix_row, chunk = dq_rows0 / 8 + (matrix & 1);
      ldmatrix_x4<true>(ds_frag[kk], ds_tile + DsTile::offset(row, chunk));
    }
    float* const dq_rows = dq_entry + (i0 + dq_rows0 + g) * args.E;
#pragma unroll
    for (int ds = 0; ds < kDqColSteps; ++ds) {
      const int dt = dq_step0 + ds;
      if (16 * dt >= args.E) break;
      float acc[2][4] = {};
#pragma unroll
      for (int kk = 0; kk < kBlockKeys / 16; ++kk) {
        std::uint32_t kb[4];
        ldmatrix_x4<true>(kb, k_tile + KVTile::offset(16 * kk + (matrix & 1) * 8 + matrix_row, 2 * dt + (matrix >> 1)));
        mma_16816<T>(acc[0], ds_frag[kk], kb[0], kb[1]);
        mma_16816<T>(acc[1], ds_frag[kk], kb[2], kb[3]);
      }
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int col = 16 * dt + 8 * n + 2 * t;
        if (col >= args.E) continue;
#pragma unroll
        for (int e = 0; e < 4; ++e) atomicAdd(dq_rows + 8 * (e >> 1) * args.E + col + (e & 1), acc[n][e]);
      }
    }
  }

  const float scale = static_cast<float>(args.scale);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const std::int64_t j = warp_key0 + g + 8 * r;
    if (j >= args.S) continue;
    T* const dk_row = dk + (std::int64_t(b) * args.S + j) * args.E;
    T* const dv_row = dv + (std::int64_t(b) * args.S + j) * args.Ev;
#pragma unroll
    for (int dt = 0; dt < 2 * kSteps; ++dt) {
      const int col = 8 * dt + 2 * t;
      if (col < args.E) {
        *reinterpret_cast<std::uint32_t*>(dk_row + col) =
            pack2<T>(dk_acc[dt][2 * r] * scale, dk_acc[dt][2 * r + 1] * scale);
      }
      if (col < args.Ev) {
        *reinterpret_cast<std::uint32_t*>(dv_row + col) = pack2<T>(dv_acc[dt][2 * r], dv_acc[dt][2 * r + 1]);
      }
    }
  }
#else
  __trap();
#endif
}

}  // namespace adcuda::flash
