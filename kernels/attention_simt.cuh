// Memory-efficient scaled dot-product attention on CUDA cores, forward and backward (FlashAttention's
// algorithm computed in fp32 for half types, fp64 for fp64): the path for fp32/fp64 and for head dims
// the tensor-core kernels (attention_flash.cuh) do not cover; attention.cu picks between them.
//
// Forward: a block owns `warps` consecutive query rows of one batch entry, one row per warp. Keys and
// values stream through shared memory 32 at a time; lane j scores key j against the warp's query row,
// and the warp keeps the row's running max, running sum of exponentials and unnormalised output
// (online softmax), so the L x S score matrix never exists. Each row's logsumexp is kept for the
// backward, which recomputes the probabilities from it:
//   - delta_i = sum(g_i * out_i), one warp per row;
//   - dq: same layout as the forward; lane j recomputes p_ij and ds_ij = p_ij (g_i . v_j z_ij - delta_i),
//     and the warp adds sum_j ds_ij k_j to its row of dq;
//   - dk, dv: a block owns `warps` keys, one per warp; queries stream through shared memory 32 at a
//     time, lane i recomputes p_ij and ds_ij, and the warp adds sum_i p_ij z_ij g_i to dv_j and
//     sum_i ds_ij q_i to dk_j.
// With dropout, z_ij is 1 / (1 - p) where attention_dropout.cuh keeps probability (i, j) and 0 where it
// drops it; the row sums (and so the logsumexp) are of the probabilities before dropout.
// Each output row is written by exactly one warp: no atomics, deterministic results. A position the
// mask (or causality) forbids, or a row with nothing to attend to, contributes exactly zero. With
// is_causal, key (query) tiles that lie wholly above the diagonal are skipped.
#pragma once

#include <cstdint>

#include "attention_args.cuh"
#include "nn_common.cuh"
#include "runtime/dispatch.cuh"

namespace adcuda::simt {

// Keys (forward, dq) or queries (dk/dv) per shared-memory tile: one per lane.
constexpr int kTile = 32;

// Row stride for a tile whose rows the 32 lanes read in parallel, one row each at the same column: an
// odd stride (in 4-byte words) puts the lanes in 32 different banks.
__host__ __device__ inline int odd_stride(int width) { return width % 2 == 0 ? width + 1 : width; }

struct Max {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return a > b ? a : b;
  }
};

// tile[r][c] = rows[(row0 + r) * row_stride + c] for r < kTile, c < width, zero past `row_count`.
template <typename T, typename Acc>
__device__ void load_tile(Acc* tile, int tile_stride, const T* rows, std::int64_t row_stride, std::int64_t row0,
                          std::int64_t row_count, int width) {
  const int count = kTile * width;
  for (int idx = threadIdx.x; idx < count; idx += blockDim.x) {
    const int r = idx / width, c = idx % width;
    const std::int64_t row = row0 + r;
    tile[r * tile_stride + c] = row < row_count ? to_compute(rows[row * row_stride + c]) : Acc(0);
  }
}

// z_ij: 1 without dropout, else 1 / (1 - p) where probability (i, j) of batch entry b is kept, 0 where
// it is dropped.
template <typename Acc>
__device__ __forceinline__ Acc dropout_factor(const AttentionArgs& args, std::int64_t b, std::int64_t i,
                                              std::int64_t j) {
  if (!args.dropout.enabled) return Acc(1);
  return attention_dropout_keeps(args.dropout, b, i, j) ? static_cast<Acc>(args.dropout.scale) : Acc(0);
}

// q . k * scale, plus an additive mask.
template <typename T, typename Acc>
__device__ __forceinline__ Acc score_of(const Acc* q_row, const Acc* k_row, int E, Acc scale, const EntryMask<T>& mask,
                                        std::int64_t i, std::int64_t j) {
  Acc dot = Acc(0);
  for (int e = 0; e < E; ++e) dot += q_row[e] * k_row[e];
  Acc score = dot * scale;
  if (mask.added != nullptr) score += to_compute(mask.added[i * mask.row_stride + j * mask.col_stride]);
  return score;
}

template <typename T>
__global__ void attention_forward_kernel(AttentionArgs args, T* out, compute_t<T>* lse) {
  using Acc = compute_t<T>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  const int E = args.E, Ev = args.Ev;
  const int k_stride = odd_stride(E);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Acc* k_tile = reinterpret_cast<Acc*>(shared_raw);
  Acc* v_tile = k_tile + kTile * k_stride;
  Acc* q_row = v_tile + kTile * Ev + warp * (E + Ev + kTile);
  Acc* o_row = q_row + E;
  Acc* p_row = o_row + Ev;
  const Acc scale = static_cast<Acc>(args.scale);
  const Acc minus_infinity = nn::negative_infinity<Acc>();
  const std::int64_t row_tiles = (args.L + warps - 1) / warps;

  for (std::int64_t work = blockIdx.x; work < args.batch * row_tiles; work += gridDim.x) {
    const std::int64_t b = work / row_tiles;
    const std::int64_t i0 = (work % row_tiles) * warps;
    const std::int64_t i = i0 + warp;
    const bool active = i < args.L;
    std::int64_t offsets[4];
    args.batch_offsets.offsets(b, offsets);
    const T* k = static_cast<const T*>(args.k) + offsets[1];
    const T* v = static_cast<const T*>(args.v) + offsets[2];
    const EntryMask<T> mask = entry_mask<T>(args, offsets[3]);
    if (active) {
      const T* q = static_cast<const T*>(args.q) + offsets[0] + i * args.q_row_stride;
      for (int e = lane; e < E; e += 32) q_row[e] = to_compute(q[e]);
    }
    for (int d = lane; d < Ev; d += 32) o_row[d] = Acc(0);
    __syncwarp();

    Acc row_max = minus_infinity, row_sum = Acc(0);
    const std::int64_t key_end = args.causal ? min(args.S, i0 + warps) : args.S;
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kTile) {
      __syncthreads();  // every warp is done with the previous tiles
      load_tile(k_tile, k_stride, k, args.k_row_stride, j0, args.S, E);
      load_tile(v_tile, Ev, v, args.v_row_stride, j0, args.S, Ev);
      __syncthreads();
      if (!active) continue;
      const std::int64_t j = j0 + lane;
      const Acc score =
          may_attend(args, mask, i, j) ? score_of(q_row, k_tile + lane * k_stride, E, scale, mask, i, j) : minus_infinity;
      const Acc tile_max = nn::warp_reduce(score, Max{});
      const Acc new_max = tile_max > row_max ? tile_max : row_max;
      if (new_max == minus_infinity) continue;  // nothing to attend to so far (the whole warp agrees)
      const Acc correction = nn::exp_of(row_max - new_max);
      const Acc p = nn::exp_of(score - new_max);
      row_sum = row_sum * correction + nn::warp_reduce(p, nn::Sum{});
      row_max = new_max;
      p_row[lane] = p * dropout_factor<Acc>(args, b, i, j);
      __syncwarp();
      for (int d = lane; d < Ev; d += 32) {
        Acc acc = o_row[d] * correction;
        for (int jj = 0; jj < kTile; ++jj) acc += p_row[jj] * v_tile[jj * Ev + d];
        o_row[d] = acc;
      }
      __syncwarp();  // p_row is rewritten by the next tile
    }
    if (active) {
      T* out_row = out + (b * args.L + i) * Ev;
      for (int d = lane; d < Ev; d += 32) out_row[d] = convert<T>(row_sum > Acc(0) ? o_row[d] / row_sum : Acc(0));
      if (lane == 0) lse[b * args.L + i] = row_sum > Acc(0) ? row_max + nn::log_of(row_sum) : minus_infinity;
    }
    __syncwarp();  // q_row and o_row are rewritten for the next work item
  }
}

// delta_r = sum_d g[r, d] * out[r, d], one warp per row of the contiguous (rows, Ev) arrays.
template <typename T>
__global__ void attention_delta_kernel(const T* g, const T* out, compute_t<T>* delta, std::int64_t rows, int Ev) {
  using Acc = compute_t<T>;
  const int lane = threadIdx.x % 32;
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x / 32;
  for (std::int64_t row = first; row < rows; row += step) {
    Acc sum = Acc(0);
    for (int d = lane; d < Ev; d += 32) sum += to_compute(g[row * Ev + d]) * to_compute(out[row * Ev + d]);
    sum = nn::warp_reduce(sum, nn::Sum{});
    if (lane == 0) delta[row] = sum;
  }
}

template <typename T>
__global__ void attention_dq_kernel(AttentionArgs args, const T* g, const compute_t<T>* lse,
                                    const compute_t<T>* delta, T* dq) {
  using Acc = compute_t<T>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  const int E = args.E, Ev = args.Ev;
  const int k_stride = odd_stride(E), v_stride = odd_stride(Ev);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Acc* k_tile = reinterpret_cast<Acc*>(shared_raw);
  Acc* v_tile = k_tile + kTile * k_stride;
  Acc* q_row = v_tile + kTile * v_stride + warp * (2 * E + Ev + kTile);
  Acc* g_row = q_row + E;
  Acc* dq_row = g_row + Ev;
  Acc* ds_row = dq_row + E;
  const Acc scale = static_cast<Acc>(args.scale);
  const std::int64_t row_tiles = (args.L + warps - 1) / warps;

  for (std::int64_t work = blockIdx.x; work < args.batch * row_tiles; work += gridDim.x) {
    const std::int64_t b = work / row_tiles;
    const std::int64_t i0 = (work % row_tiles) * warps;
    const std::int64_t i = i0 + warp;
    const bool active = i < args.L;
    std::int64_t offsets[4];
    args.batch_offsets.offsets(b, offsets);
    const T* k = static_cast<const T*>(args.k) + offsets[1];
    const T* v = static_cast<const T*>(args.v) + offsets[2];
    const EntryMask<T> mask = entry_mask<T>(args, offsets[3]);
    Acc row_lse = Acc(0), row_delta = Acc(0);
    if (active) {
      const T* q = static_cast<const T*>(args.q) + offsets[0] + i * args.q_row_stride;
      const T* g_in = g + (b * args.L + i) * Ev;
      for (int e = lane; e < E; e += 32) q_row[e] = to_compute(q[e]);
      for (int d = lane; d < Ev; d += 32) g_row[d] = to_compute(g_in[d]);
      row_lse = lse[b * args.L + i];
      row_delta = delta[b * args.L + i];
    }
    for (int e = lane; e < E; e += 32) dq_row[e] = Acc(0);
    __syncwarp();
    const bool row_attends = isfinite(row_lse);

    const std::int64_t key_end = args.causal ? min(args.S, i0 + warps) : args.S;
    for (std::int64_t j0 = 0; j0 < key_end; j0 += kTile) {
      __syncthreads();
      load_tile(k_tile, k_stride, k, args.k_row_stride, j0, args.S, E);
      load_tile(v_tile, v_stride, v, args.v_row_stride, j0, args.S, Ev);
      __syncthreads();
      if (!active) continue;
      const std::int64_t j = j0 + lane;
      Acc ds = Acc(0);
      if (row_attends && may_attend(args, mask, i, j)) {
        const Acc p = nn::exp_of(score_of(q_row, k_tile + lane * k_stride, E, scale, mask, i, j) - row_lse);
        const Acc* v_row = v_tile + lane * v_stride;
        Acc dp = Acc(0);
        for (int d = 0; d < Ev; ++d) dp += g_row[d] * v_row[d];
        ds = p * (dp * dropout_factor<Acc>(args, b, i, j) - row_delta);
      }
      ds_row[lane] = ds;
      __syncwarp();
      for (int e = lane; e < E; e += 32) {
        Acc acc = dq_row[e];
        for (int jj = 0; jj < kTile; ++jj) acc += ds_row[jj] * k_tile[jj * k_stride + e];
        dq_row[e] = acc;
      }
      __syncwarp();
    }
    if (active) {
      T* dq_out = dq + (b * args.L + i) * E;
      for (int e = lane; e < E; e += 32) dq_out[e] = convert<T>(dq_row[e] * scale);
    }
    __syncwarp();
  }
}

template <typename T>
__global__ void attention_dkdv_kernel(AttentionArgs args, const T* g, const compute_t<T>* lse,
                                      const compute_t<T>* delta, T* dk, T* dv) {
  using Acc = compute_t<T>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  const int E = args.E, Ev = args.Ev;
  const int q_stride = odd_stride(E), g_stride = odd_stride(Ev);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  Acc* q_tile = reinterpret_cast<Acc*>(shared_raw);
  Acc* g_tile = q_tile + kTile * q_stride;
  Acc* lse_tile = g_tile + kTile * g_stride;
  Acc* delta_tile = lse_tile + kTile;
  Acc* k_row = delta_tile + kTile + warp * (2 * E + 2 * Ev + 2 * kTile);
  Acc* v_row = k_row + E;
  Acc* dk_row = v_row + Ev;
  Acc* dv_row = dk_row + E;
  Acc* p_row = dv_row + Ev;
  Acc* ds_row = p_row + kTile;
  const Acc scale = static_cast<Acc>(args.scale);
  const std::int64_t key_tiles = (args.S + warps - 1) / warps;

  for (std::int64_t work = blockIdx.x; work < args.batch * key_tiles; work += gridDim.x) {
    const std::int64_t b = work / key_tiles;
    const std::int64_t j0 = (work % key_tiles) * warps;
    const std::int64_t j = j0 + warp;
    const bool active = j < args.S;
    std::int64_t offsets[4];
    args.batch_offsets.offsets(b, offsets);
    const T* q = static_cast<const T*>(args.q) + offsets[0];
    const T* g_entry = g + b * args.L * Ev;
    const EntryMask<T> mask = entry_mask<T>(args, offsets[3]);
    if (active) {
      const T* k = static_cast<const T*>(args.k) + offsets[1] + j * args.k_row_stride;
      const T* v = static_cast<const T*>(args.v) + offsets[2] + j * args.v_row_stride;
      for (int e = lane; e < E; e += 32) k_row[e] = to_compute(k[e]);
      for (int d = lane; d < Ev; d += 32) v_row[d] = to_compute(v[d]);
    }
    for (int e = lane; e < E; e += 32) dk_row[e] = Acc(0);
    for (int d = lane; d < Ev; d += 32) dv_row[d] = Acc(0);
    __syncwarp();

    // with is_causal only queries i >= j attend to key j: start at the tile holding query j0
    const std::int64_t query_begin = args.causal ? (j0 / kTile) * kTile : 0;
    for (std::int64_t i0 = query_begin; i0 < args.L; i0 += kTile) {
      __syncthreads();
      load_tile(q_tile, q_stride, q, args.q_row_stride, i0, args.L, E);
      load_tile(g_tile, g_stride, g_entry, Ev, i0, args.L, Ev);
      if (threadIdx.x < kTile) {
        const std::int64_t i = i0 + threadIdx.x;
        lse_tile[threadIdx.x] = i < args.L ? lse[b * args.L + i] : nn::negative_infinity<Acc>();
        delta_tile[threadIdx.x] = i < args.L ? delta[b * args.L + i] : Acc(0);
      }
      __syncthreads();
      if (!active) continue;
      const std::int64_t i = i0 + lane;
      Acc p = Acc(0), ds = Acc(0);
      const Acc row_lse = lse_tile[lane];
      if (isfinite(row_lse) && may_attend(args, mask, i, j)) {
        p = nn::exp_of(score_of(q_tile + lane * q_stride, k_row, E, scale, mask, i, j) - row_lse);
        const Acc* g_row = g_tile + lane * g_stride;
        Acc dp = Acc(0);
        for (int d = 0; d < Ev; ++d) dp += g_row[d] * v_row[d];
        const Acc z = dropout_factor<Acc>(args, b, i, j);
        ds = p * (dp * z - delta_tile[lane]);
        p *= z;
      }
      p_row[lane] = p;
      ds_row[lane] = ds;
      __syncwarp();
      for (int d = lane; d < Ev; d += 32) {
        Acc acc = dv_row[d];
        for (int ii = 0; ii < kTile; ++ii) acc += p_row[ii] * g_tile[ii * g_stride + d];
        dv_row[d] = acc;
      }
      for (int e = lane; e < E; e += 32) {
        Acc acc = dk_row[e];
        for (int ii = 0; ii < kTile; ++ii) acc += ds_row[ii] * q_tile[ii * q_stride + e];
        dk_row[e] = acc;
      }
      __syncwarp();
    }
    if (active) {
      T* dk_out = dk + (b * args.S + j) * E;
      T* dv_out = dv + (b * args.S + j) * Ev;
      for (int e = lane; e < E; e += 32) dk_out[e] = convert<T>(dk_row[e] * scale);
      for (int d = lane; d < Ev; d += 32) dv_out[d] = convert<T>(dv_row[d]);
    }
    __syncwarp();
  }
}

}  // namespace adcuda::simt
