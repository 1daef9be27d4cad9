// Scaled dot-product attention on tensor cores, FlashAttention-2 style, for fp16 and bf16 with fp32
// accumulation: the forward and backward kernels behind attention.cu's tensor-core path.
//
// Both passes work on 64 x 64 score tiles with 4 warps per block, each warp owning 16 rows of the tile
// (mma.sync m16n8k16, fragments as attention_sm80.cuh describes). kD is the head dim rounded up to 32,
// 64 or 128 (columns past E / Ev are zero-filled in shared memory, so they add nothing).
//
// Forward (flash_forward_kernel): a block owns 64 query rows of one batch entry; its Q tile is read
// once into registers. K and V tiles of 64 keys stream through two shared-memory stages, the next
// tile's cp.asyncs in flight while the current one is used. Per tile a warp computes its 16 x 64
// scores S = Q K^T, scales them into log2 units (scale * log2 e, so that exp is one ex2), masks them
// where needed (tiles crossing the sequence end or the causal diagonal, any tile with a mask), and
// updates its rows' running max m and sum l (online softmax, kept per thread and reduced over the quad
// of lanes sharing a row only at the end). P = 2^(S - m), rounded to 16 bits, is already an A fragment:
// O += P V with V read by ldmatrix.trans. With is_causal, key tiles wholly above the diagonal are
// never loaded. The row's logsumexp, ln 2 (m + log2 l), is saved for the backward.
//
// Backward (flash_backward_kernel, after flash_backward_prepare_kernel has made delta_i =
// rowsum(dO_i * O_i) and the logsumexp in log2 units): a block owns 64 keys of one batch entry, 16 per
// warp, and keeps dK and dV for them in registers while Q and dO tiles of 64 queries (32 at head dim
// 128) stream through two stages. Per tile a warp recomputes S^T = K Q^T for its keys (transposed, so
// that P^T and dS^T come out as A fragments for dV += P^T dO and dK += dS^T Q, with no trip through
// shared memory), P^T = 2^(S^T - lse), dP^T = V dO^T and dS^T = P^T (dP^T - delta). dQ += dS K needs
// dS with queries as rows: the warps write dS^T to shared memory and each then takes 16 query rows (and
// half the columns at head dim 128), reading dS by ldmatrix.trans, and adds its fp32 products into a dQ
// accumulator with atomics
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

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = 64;  // forward: queries per block; backward: keys per block (16 per warp)
constexpr int kStepCols = 64;   // forward: keys per step
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

// The shared-memory tiles of each kernel.
template <int kD>
struct ForwardTiles {
  using Q = PaddedTile<kBlockRows, kD>;
  using KV = PaddedTile<kStepCols, kD>;
  static constexpr int kBytes = (Q::kElements + 2 * 2 * KV::kElements) * 2;  // Q; two stages of K and V
};

template <int kD>
struct BackwardTiles {
  static constexpr int kQueries = backward_step_queries<kD>();
  using KV = PaddedTile<kBlockRows, kD>;
  using Q = PaddedTile<kQueries, kD>;  // Q and dO
  using Ds = PaddedTile<kBlockRows, kQueries>;
  // K, V; two stages of Q and dO; dS^T; two stages of lse and delta
  static constexpr int kBytes = (2 * KV::kElements + 2 * 2 * Q::kElements + Ds::kElements) * 2 + 2 * 2 * kQueries * 4;
};

// Masks one warp's scores (in log2 units), held as C fragments: element e of n-tile nt is at fragment row
// row0 + g + 8 (e / 2) and column col0 + 8 nt + 2 t + e % 2, which are (query, key) in the forward and
// (key, query) in the backward (kTransposed). A score becomes -inf where the key is past S, the query
// past L, causality forbids it or a bool mask does; an additive mask is added (times log2 e). A mask
// array is read only where both indices are in range, at offsets from one per-thread base.
template <bool kTransposed, int kNTiles, typename T>
__device__ __forceinline__ void mask_scores(float (&s)[kNTiles][4], const AttentionArgs& args,
                                            const EntryMask<T>& mask, std::int64_t row0, std::int64_t col0) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t row_limit = kTransposed ? args.S : args.L, col_limit = kTransposed ? args.L : args.S;
  const bool has_array = mask.allowed != nullptr || mask.added != nullptr;
  const std::int64_t row_stride = kTransposed ? mask.col_stride : mask.row_stride;
  const std::int64_t col_stride = kTransposed ? mask.row_stride : mask.col_stride;
  const std::int64_t first = has_array ? (row0 + g) * row_stride + (col0 + 2 * t) * col_stride : 0;
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const std::int64_t row = row0 + g + 8 * (e >> 1), col = col0 + 8 * nt + 2 * t + (e & 1);
      const std::int64_t query = kTransposed ? col : row, key = kTransposed ? row : col;
      bool allowed = row < row_limit && col < col_limit && !(args.causal && key > query);
      if (allowed && has_array) {
        const std::int64_t at = first + 8 * (e >> 1) * row_stride + (8 * nt + (e & 1)) * col_stride;
        if (mask.allowed != nullptr) {
          allowed = mask.allowed[at];
        } else {
          s[nt][e] += to_compute(mask.added[at]) * kLog2e;
        }
      }
      if (!allowed) s[nt][e] = -kInfinity;
    }
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

// Blocks per SM each kernel is compiled to allow. Up to kD = 64 the forward fits in 168 registers
// (checked: no spills) and 3 blocks (12 warps) share an SM; at 128 it needs ~230, and the backward ~250
// at every kD, so 2 blocks fit by registers and ptxas is only asked for one: without an explicit
// minimum, ptxas sometimes caps registers lower itself and spills.
template <int kD>
__host__ __device__ constexpr int forward_min_blocks() {
  return kD <= 64 ? 3 : 1;
}

// ------------------------------------------------------------------------------------------------
// Forward. out: contiguous (batch, L, Ev); lse: (batch, L), natural log.
template <typename T, int kD, bool kDropout>
__global__ void __launch_bounds__(kThreads, forward_min_blocks<kD>())
    flash_forward_kernel(AttentionArgs args, T* out, float* lse) {
#if ADCUDA_ATTENTION_SM80
  using QTile = typename ForwardTiles<kD>::Q;
  using KVTile = typename ForwardTiles<kD>::KV;
  constexpr int kSteps = kD / 16;            // k-steps of Q K^T; pairs of n-tiles of P V
  constexpr int kKeyNTiles = kStepCols / 8;  // n-tiles of S
  extern __shared__ __align__(128) unsigned char flash_shared[];
  T* const q_tile = reinterpret_cast<T*>(flash_shared);
  T* const k_tiles = q_tile + QTile::kElements;  // two stages
  T* const v_tiles = k_tiles + 2 * KVTile::kElements;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int matrix = lane / 8, matrix_row = lane % 8;  // ldmatrix: this lane addresses row matrix_row of `matrix`
  const std::int64_t query_blocks = (args.L + kBlockRows - 1) / kBlockRows;
  const std::int64_t b = blockIdx.x / query_blocks;
  const std::int64_t i0 = (blockIdx.x % query_blocks) * kBlockRows;
  std::int64_t offsets[4];
  args.batch_offsets.offsets(b, offsets);
  const T* const q = static_cast<const T*>(args.q) + offsets[0] + i0 * args.q_row_stride;
  const T* const k = static_cast<const T*>(args.k) + offsets[1];
  const T* const v = static_cast<const T*>(args.v) + offsets[2];
  const EntryMask<T> mask = entry_mask<T>(args, offsets[3]);
  const std::int64_t key_end = args.causal ? min(args.S, i0 + kBlockRows) : args.S;
  const int key_steps = static_cast<int>((key_end + kStepCols - 1) / kStepCols);

  auto load_keys = [&](int step) {
    const std::int64_t j0 = static_cast<std::int64_t>(step) * kStepCols;
    const int rows = static_cast<int>(min(args.S - j0, std::int64_t(kStepCols)));
    load_tile_async<kThreads, KVTile>(k_tiles + (step & 1) * KVTile::kElements, k + j0 * args.k_row_stride,
                                      args.k_row_stride, rows, args.E);
    load_tile_async<kThreads, KVTile>(v_tiles + (step & 1) * KVTile::kElements, v + j0 * args.v_row_stride,
                                      args.v_row_stride, rows, args.Ev);
  };
  load_tile_async<kThreads, QTile>(q_tile, q, args.q_row_stride,
                                   static_cast<int>(min(args.L - i0, std::int64_t(kBlockRows))), args.E);
  cp_async_commit();
  if (key_steps > 0) load_keys(0);
  cp_async_commit();
  cp_async_wait<1>();  // Q has landed
  __syncthreads();

  std::uint32_t q_frag[kSteps][4];
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const int row = 16 * warp + (matrix & 1) * 8 + matrix_row, chunk = 2 * kk + (matrix >> 1);
    ldmatrix_x4<false>(q_frag[kk], q_tile + QTile::offset(row, chunk));
  }

  float o[2 * kSteps][4] = {};
  float row_max[2] = {-kInfinity, -kInfinity}, row_sum[2] = {0.0f, 0.0f};
  const float scale_log2 = static_cast<float>(args.scale) * kLog2e;
  const std::int64_t warp_row0 = i0 + 16 * warp;

  for (int step = 0; step < key_steps; ++step) {
    cp_async_wait<0>();
    __syncthreads();  // this step's K and V are visible; every warp is done with the other stage
    if (step + 1 < key_steps) load_keys(step + 1);
    cp_async_commit();
    const T* const k_s = k_tiles + (step & 1) * KVTile::kElements;
    const T* const v_s = v_tiles + (step & 1) * KVTile::kElements;
    const std::int64_t j0 = static_cast<std::int64_t>(step) * kStepCols;

    float s[kKeyNTiles][4] = {};
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk) {
#pragma unroll
      for (int np = 0; np < kKeyNTiles / 2; ++np) {
        std::uint32_t kb[4];
        ldmatrix_x4<false>(kb, k_s + KVTile::offset(16 * np + (matrix >> 1) * 8 + matrix_row, 2 * kk + (matrix & 1)));
        mma_16816<T>(s[2 * np], q_frag[kk], kb[0], kb[1]);
        mma_16816<T>(s[2 * np + 1], q_frag[kk], kb[2], kb[3]);
      }
    }

#pragma unroll
    for (int nt = 0; nt < kKeyNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] *= scale_log2;
    }
    // only tiles crossing the sequence end or the causal diagonal, and any tile under a mask array
    if (args.mask_kind != MaskKind::None || j0 + kStepCols > args.S || (args.causal && j0 + kStepCols - 1 > warp_row0)) {
      mask_scores<false>(s, args, mask, warp_row0, j0);
    }

    // Online softmax: rescale what was accumulated by 2^(old max - new max). A row with nothing to
    // attend to so far keeps max -inf and subtracts 0 instead, so every exponential is 2^-inf = 0.
    float reference[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = -kInfinity;
#pragma unroll
      for (int nt = 0; nt < kKeyNTiles; ++nt) tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      const float new_max = fmaxf(row_max[r], quad_max(tile_max));
      reference[r] = new_max == -kInfinity ? 0.0f : new_max;
      const float correction = exp2_approx(row_max[r] - reference[r]);
      row_max[r] = new_max;
      row_sum[r] *= correction;
#pragma unroll
      for (int dt = 0; dt < 2 * kSteps; ++dt) {
        o[dt][2 * r] *= correction;
        o[dt][2 * r + 1] *= correction;
      }
    }
#pragma unroll
    for (int nt = 0; nt < kKeyNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = exp2_approx(s[nt][e] - reference[e >> 1]);
        row_sum[e >> 1] += s[nt][e];
      }
    }
    if constexpr (kDropout) {
#pragma unroll
      for (int sub = 0; sub < kKeyNTiles / 2; ++sub) {
        visit_dropout<false>(args.dropout, b, warp_row0 / 16, j0 / 16 + sub, [&](int side, int e, bool kept) {
          if (!kept) s[2 * sub + side][e] = 0.0f;
        });
      }
    }

#pragma unroll
    for (int kk = 0; kk < kStepCols / 16; ++kk) {
      const std::uint32_t pa[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < kSteps; ++dp) {
        std::uint32_t vb[4];
        ldmatrix_x4<true>(vb, v_s + KVTile::offset(16 * kk + (matrix & 1) * 8 + matrix_row, 2 * dp + (matrix >> 1)));
        mma_16816<T>(o[2 * dp], pa, vb[0], vb[1]);
        mma_16816<T>(o[2 * dp + 1], pa, vb[2], vb[3]);
      }
    }
  }

  const float kept_scale = kDropout ? static_cast<float>(args.dropout.scale) : 1.0f;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float sum = quad_sum(row_sum[r]);
    const std::int64_t i = warp_row0 + g + 8 * r;
    if (i >= args.L) continue;
    const float inverse = sum > 0.0f ? kept_scale / sum : 0.0f;
    T* const out_row = out + (b * args.L + i) * args.Ev;
#pragma unroll
    for (int dt = 0; dt < 2 * kSteps; ++dt) {
      const int col = 8 * dt + 2 * t;
      if (col < args.Ev) {
        *reinterpret_cast<std::uint32_t*>(out_row + col) = pack2<T>(o[dt][2 * r] * inverse, o[dt][2 * r + 1] * inverse);
      }
    }
    if (t == 0) lse[b * args.L + i] = sum > 0.0f ? (row_max[r] + log2f(sum)) * kLn2 : -kInfinity;
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
__global__ void __launch_bounds__(kThreads, 1)
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
  constexpr int kDqColSteps = kSteps / (kWarps / kDqRowGroups);  // 16-column steps per warp
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
  const std::int64_t key_blocks = (args.S + kBlockRows - 1) / kBlockRows;
  const std::int64_t b = blockIdx.x / key_blocks;
  const std::int64_t j0 = (blockIdx.x % key_blocks) * kBlockRows;
  std::int64_t offsets[4];
  args.batch_offsets.offsets(b, offsets);
  const T* const q = static_cast<const T*>(args.q) + offsets[0];
  const T* const k = static_cast<const T*>(args.k) + offsets[1] + j0 * args.k_row_stride;
  const T* const v = static_cast<const T*>(args.v) + offsets[2] + j0 * args.v_row_stride;
  const T* const g_entry = grad + b * args.L * args.Ev;
  const float* const lse_entry = lse_log2 + b * padded_L;
  const float* const delta_entry = delta + b * padded_L;
  float* const dq_entry = dq_accum + b * padded_L * args.E;
  const EntryMask<T> mask = entry_mask<T>(args, offsets[3]);
  // with is_causal only queries i >= j attend to key j: start at the step holding query j0
  const std::int64_t query_begin = args.causal ? j0 : 0;
  const int query_steps =
      query_begin < args.L ? static_cast<int>((args.L - query_begin + kQueries - 1) / kQueries) : 0;

  auto load_queries = [&](int step) {
    const std::int64_t i0 = query_begin + static_cast<std::int64_t>(step) * kQueries;
    const int rows = static_cast<int>(min(args.L - i0, std::int64_t(kQueries)));
    const int stage = step & 1;
    load_tile_async<kThreads, QTile>(q_tiles + stage * QTile::kElements, q + i0 * args.q_row_stride,
                                     args.q_row_stride, rows, args.E);
    load_tile_async<kThreads, QTile>(g_tiles + stage * QTile::kElements, g_entry + i0 * args.Ev, args.Ev, rows,
                                     args.Ev);
    // kQueries floats of lse and of delta, whole 16-byte chunks (the buffers are padded to 64 rows)
    constexpr int kChunks = kQueries / 4;
    if (threadIdx.x < 2 * kChunks) {
      const int chunk = threadIdx.x % kChunks;
      const bool is_lse = threadIdx.x < kChunks;
      float* const dst = (is_lse ? lse_tiles : delta_tiles) + stage * kQueries + 4 * chunk;
      cp_async_16(dst, (is_lse ? lse_entry : delta_entry) + i0 + 4 * chunk, 16);
    }
  };
  const int valid_keys = static_cast<int>(min(args.S - j0, std::int64_t(kBlockRows)));
  load_tile_async<kThreads, KVTile>(k_tile, k, args.k_row_stride, valid_keys, args.E);
  load_tile_async<kThreads, KVTile>(v_tile, v, args.v_row_stride, valid_keys, args.Ev);
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

    // P^T = 2^(S^T - lse) (0 where masked or where the query's row attends to nothing); then, in
    // place, dp <- dS^T = P^T (dP^T z - delta) and s <- P^T z (what dV needs), z the dropout factor.
#pragma unroll
    for (int nt = 0; nt < kQueryNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] *= scale_log2;
    }
    // queries past L need no mask: their lse is +inf, so their probabilities are 0 anyway
    if (args.mask_kind != MaskKind::None || warp_key0 + 16 > args.S || (args.causal && warp_key0 + 15 > i0)) {
      mask_scores<true>(s, args, mask, warp_key0, i0);
    }
#pragma unroll
    for (int nt = 0; nt < kQueryNTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = exp2_approx(s[nt][e] - lse_s[8 * nt + 2 * t + (e & 1)]);
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
    std::uint32_t ds_frag[kBlockRows / 16][4];
#pragma unroll
    for (int kk = 0; kk < kBlockRows / 16; ++kk) {
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
      for (int kk = 0; kk < kBlockRows / 16; ++kk) {
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
    T* const dk_row = dk + (b * args.S + j) * args.E;
    T* const dv_row = dv + (b * args.S + j) * args.Ev;
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
