// Memory-efficient scaled dot-product attention, forward and backward (FlashAttention's algorithm on
// CUDA cores, computed in fp32 for half types).
//
// Forward: a block owns `warps` consecutive query rows of one batch entry, one row per warp. Keys and
// values stream through shared memory 32 at a time; lane j scores key j against the warp's query row,
// and the warp keeps the row's running max, running sum of exponentials and unnormalised output
// (online softmax), so the L x S score matrix never exists. Each row's logsumexp is kept for the
// backward, which recomputes the probabilities from it:
//   - delta_i = sum(g_i * out_i), one warp per row;
//   - dq: same layout as the forward; lane j recomputes p_ij and ds_ij = p_ij (g_i . v_j - delta_i), and
//     the warp adds sum_j ds_ij k_j to its row of dq;
//   - dk, dv: a block owns `warps` keys, one per warp; queries stream through shared memory 32 at a
//     time, lane i recomputes p_ij and ds_ij, and the warp adds sum_i p_ij g_i to dv_j and
//     sum_i ds_ij q_i to dk_j.
// Each output row is written by exactly one warp: no atomics, deterministic results. A position the
// mask (or causality) forbids, or a row with nothing to attend to, contributes exactly zero. With
// is_causal, key (query) tiles that lie wholly above the diagonal are skipped.
#include "attention.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "launch_utils.cuh"
#include "nn_common.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

enum class MaskKind : int { None, Bool, Additive };

struct AttentionArgs {
  const void* q;
  const void* k;
  const void* v;
  std::int64_t q_row_stride, k_row_stride, v_row_stride;
  const void* mask;
  MaskKind mask_kind;
  std::int64_t mask_row_stride, mask_col_stride;  // along L and S (0 where broadcast)
  std::int64_t L, S;
  int E, Ev;
  std::int64_t batch;
  bool causal;
  double scale;
  StridedIndexer<4, std::int64_t> batch_offsets;  // q, k, v, mask: element offsets of batch entry b
};

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

// The mask of one batch entry.
template <typename T>
struct EntryMask {
  const bool* allowed;  // bool masks
  const T* added;       // additive masks
  std::int64_t row_stride, col_stride;
};

template <typename T>
__device__ __forceinline__ EntryMask<T> entry_mask(const AttentionArgs& args, std::int64_t offset) {
  EntryMask<T> mask{nullptr, nullptr, args.mask_row_stride, args.mask_col_stride};
  if (args.mask_kind == MaskKind::Bool) mask.allowed = static_cast<const bool*>(args.mask) + offset;
  if (args.mask_kind == MaskKind::Additive) mask.added = static_cast<const T*>(args.mask) + offset;
  return mask;
}

// Whether query i may attend to key j (both in range, causality, a bool mask).
template <typename T>
__device__ __forceinline__ bool may_attend(const AttentionArgs& args, const EntryMask<T>& mask, std::int64_t i,
                                           std::int64_t j) {
  if (i >= args.L || j >= args.S) return false;
  if (args.causal && j > i) return false;
  if (mask.allowed != nullptr && !mask.allowed[i * mask.row_stride + j * mask.col_stride]) return false;
  return true;
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
      p_row[lane] = p;
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
        ds = p * (dp - row_delta);
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
        ds = p * (dp - delta_tile[lane]);
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

// ------------------------------------------------------------------------------------------------
// Host side.
void require(bool condition, const char* op, const std::string& what) {
  if (!condition) throw std::invalid_argument(std::string(op) + ": " + what);
}

// Strides of `a` broadcast (right-aligned) to `shape`: 0 where `a` lacks the dim or has size 1 there.
Dims broadcast_strides(const DeviceArray& a, const Dims& shape, const char* op, const char* name) {
  const int offset = static_cast<int>(shape.size()) - a.ndim();
  require(offset >= 0, op, std::string(name) + " of shape " + format_dims(a.shape()) + " has more dims than " +
                               format_dims(shape));
  Dims strides(shape.size(), 0);
  for (int d = 0; d < a.ndim(); ++d) {
    const std::int64_t size = a.shape()[d];
    require(size == shape[offset + d] || size == 1, op,
            std::string(name) + " of shape " + format_dims(a.shape()) + " does not broadcast to " + format_dims(shape));
    if (size != 1) strides[offset + d] = a.strides()[d];
  }
  return strides;
}

Dims batch_shape_of(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const char* op) {
  int nd = 0;
  for (const DeviceArray* a : {&q, &k, &v}) nd = std::max(nd, a->ndim() - 2);
  Dims batch(nd, 1);
  for (const DeviceArray* a : {&q, &k, &v}) {
    const int offset = nd - (a->ndim() - 2);
    for (int d = 0; d < a->ndim() - 2; ++d) {
      const std::int64_t size = a->shape()[d];
      std::int64_t& into = batch[offset + d];
      require(size == into || size == 1 || into == 1, op,
              "the batch dims of q " + format_dims(q.shape()) + ", k " + format_dims(k.shape()) + " and v " +
                  format_dims(v.shape()) + " cannot be broadcast");
      if (size != 1) into = size;
    }
  }
  return batch;
}

Dims with_tail(Dims shape, std::initializer_list<std::int64_t> tail) {
  shape.insert(shape.end(), tail.begin(), tail.end());
  return shape;
}

// The checked shapes and strides of one call, shared by the forward and the backward.
AttentionArgs make_args(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const DeviceArray* mask,
                        bool is_causal, double scale, Dims& batch, const char* op) {
  require(q.ndim() >= 2 && k.ndim() >= 2 && v.ndim() >= 2, op, "q, k and v need at least 2 dims (..., L, E)");
  require(q.dtype() == k.dtype() && q.dtype() == v.dtype() && is_floating_point(q.dtype()), op,
          std::string("q, k and v must share a floating point dtype, got ") + scalar_type_name(q.dtype()) + ", " +
              scalar_type_name(k.dtype()) + " and " + scalar_type_name(v.dtype()));
  const std::int64_t L = q.shape()[q.ndim() - 2], E = q.shape()[q.ndim() - 1];
  const std::int64_t S = k.shape()[k.ndim() - 2], Ev = v.shape()[v.ndim() - 1];
  require(k.shape()[k.ndim() - 1] == E && v.shape()[v.ndim() - 2] == S, op,
          "q " + format_dims(q.shape()) + ", k " + format_dims(k.shape()) + " and v " + format_dims(v.shape()) +
              " do not fit");
  require(E < (1 << 20) && Ev < (1 << 20), op, "head dims of a million or more are not supported");
  for (const DeviceArray* a : {&q, &k, &v}) {
    require(a->shape()[a->ndim() - 1] <= 1 || a->strides()[a->ndim() - 1] == 1, op,
            "the last dim of q, k and v must be contiguous");
  }
  batch = batch_shape_of(q, k, v, op);

  AttentionArgs args{};
  args.q = q.data_ptr();
  args.k = k.data_ptr();
  args.v = v.data_ptr();
  args.q_row_stride = q.strides()[q.ndim() - 2];
  args.k_row_stride = k.strides()[k.ndim() - 2];
  args.v_row_stride = v.strides()[v.ndim() - 2];
  args.L = L;
  args.S = S;
  args.E = static_cast<int>(E);
  args.Ev = static_cast<int>(Ev);
  args.batch = 1;
  for (std::int64_t size : batch) args.batch *= size;
  args.causal = is_causal;
  args.scale = scale;
  const int nb = static_cast<int>(batch.size());
  auto batch_part = [nb](Dims strides) { return Dims(strides.begin(), strides.begin() + nb); };
  const Dims q_batch = batch_part(broadcast_strides(q, with_tail(batch, {L, E}), op, "q"));
  const Dims k_batch = batch_part(broadcast_strides(k, with_tail(batch, {S, E}), op, "k"));
  const Dims v_batch = batch_part(broadcast_strides(v, with_tail(batch, {S, Ev}), op, "v"));
  Dims mask_batch(nb, 0);
  args.mask_kind = MaskKind::None;
  if (mask != nullptr) {
    require(mask->dtype() == ScalarType::Bool || mask->dtype() == q.dtype(), op,
            std::string("the mask must be bool or of q's dtype, got ") + scalar_type_name(mask->dtype()));
    const Dims strides = broadcast_strides(*mask, with_tail(batch, {L, S}), op, "the mask");
    mask_batch = batch_part(strides);
    args.mask = mask->data_ptr();
    args.mask_kind = mask->dtype() == ScalarType::Bool ? MaskKind::Bool : MaskKind::Additive;
    args.mask_row_stride = strides[nb];
    args.mask_col_stride = strides[nb + 1];
  }
  args.batch_offsets = make_strided_indexer<4, std::int64_t>(batch, {&q_batch, &k_batch, &v_batch, &mask_batch});
  return args;
}

ScalarType statistics_type(ScalarType x) { return x == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32; }

// Warps per block (8, 4, 2 or 1) whose shared memory (`fixed` + warps * `per_warp` elements of
// `element_bytes`) fits on the device, and those bytes.
std::pair<int, int> block_shape(std::int64_t fixed, std::int64_t per_warp, std::size_t element_bytes, int device,
                                const AttentionArgs& args, const char* op) {
  const int limit = device_facts(device).max_shared_per_block;
  for (int warps = 8; warps >= 1; warps /= 2) {
    const std::int64_t bytes = (fixed + warps * per_warp) * static_cast<std::int64_t>(element_bytes);
    if (bytes <= limit) return {warps, static_cast<int>(bytes)};
  }
  throw std::invalid_argument(std::string(op) + ": head dims E=" + std::to_string(args.E) + ", Ev=" +
                              std::to_string(args.Ev) + " need more shared memory than this GPU has per block (" +
                              std::to_string(limit) + " bytes)");
}

unsigned work_blocks(std::int64_t items) {
  constexpr std::int64_t kMaxBlocks = std::int64_t(1) << 24;
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min(items, kMaxBlocks)));
}

template <typename F>
void dispatch_floating(ScalarType type, const char* op, F&& f) {
  dispatch_type(type, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || is_reduced_float_v<T>) f(tag);
  });
}

}  // namespace

std::pair<DeviceArray, DeviceArray> attention(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v,
                                              const DeviceArray* mask, bool is_causal, double scale) {
  const char* op = "attention";
  Dims batch;
  const AttentionArgs args = make_args(q, k, v, mask, is_causal, scale, batch, op);
  DeviceArray out = DeviceArray::empty(with_tail(batch, {args.L, args.Ev}), q.dtype(), q.device());
  DeviceArray lse = DeviceArray::empty(with_tail(batch, {args.L}), statistics_type(q.dtype()), q.device());
  if (lse.numel() == 0) return {out, lse};
  KernelLaunch launch(out, lse, q, k, v);
  if (mask != nullptr) mask->storage()->use_on(launch.stream(), launch.device());
  dispatch_floating(q.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    const auto [warps, bytes] = block_shape(std::int64_t(kTile) * (odd_stride(args.E) + args.Ev),
                                            args.E + args.Ev + kTile, sizeof(Acc), launch.device(), args, op);
    allow_shared_bytes(attention_forward_kernel<T>, bytes, launch.device());
    const std::int64_t items = args.batch * ((args.L + warps - 1) / warps);
    attention_forward_kernel<T><<<work_blocks(items), warps * 32, bytes, launch.stream()>>>(args, out.data<T>(),
                                                                                             lse.data<Acc>());
  });
  ADCUDA_CHECK_LAUNCH();
  return {out, lse};
}

std::tuple<DeviceArray, DeviceArray, DeviceArray> attention_backward(const DeviceArray& g, const DeviceArray& q,
                                                                     const DeviceArray& k, const DeviceArray& v,
                                                                     const DeviceArray& out, const DeviceArray& lse,
                                                                     const DeviceArray* mask, bool is_causal,
                                                                     double scale) {
  const char* op = "attention_backward";
  Dims batch;
  const AttentionArgs args = make_args(q, k, v, mask, is_causal, scale, batch, op);
  const Dims out_shape = with_tail(batch, {args.L, args.Ev});
  require(g.shape() == out_shape && out.shape() == out_shape && g.dtype() == q.dtype() && out.dtype() == q.dtype() &&
              g.is_contiguous() && out.is_contiguous(),
          op, "the gradient and the output must be contiguous " + format_dims(out_shape) + " " +
                  scalar_type_name(q.dtype()) + " arrays, got " + format_dims(g.shape()) + " and " +
                  format_dims(out.shape()));
  const ScalarType stats = statistics_type(q.dtype());
  require(lse.shape() == with_tail(batch, {args.L}) && lse.dtype() == stats && lse.is_contiguous(), op,
          "lse must be a contiguous " + format_dims(with_tail(batch, {args.L})) + " " + scalar_type_name(stats) +
              " array, got " + format_dims(lse.shape()));
  DeviceArray dq = DeviceArray::empty(with_tail(batch, {args.L, args.E}), q.dtype(), q.device());
  DeviceArray dk = DeviceArray::empty(with_tail(batch, {args.S, args.E}), q.dtype(), q.device());
  DeviceArray dv = DeviceArray::empty(with_tail(batch, {args.S, args.Ev}), q.dtype(), q.device());
  const std::int64_t query_rows = args.batch * args.L, key_rows = args.batch * args.S;
  if (query_rows == 0 && key_rows == 0) return {dq, dk, dv};
  DeviceArray delta = DeviceArray::empty({query_rows}, stats, q.device());
  KernelLaunch launch(dq, dk, dv, delta, g, q, k, v, out, lse);
  if (mask != nullptr) mask->storage()->use_on(launch.stream(), launch.device());
  dispatch_floating(q.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    const int device = launch.device();
    if (query_rows > 0) {
      attention_delta_kernel<T><<<work_blocks((query_rows + 7) / 8), 256, 0, launch.stream()>>>(
          g.data<T>(), out.data<T>(), delta.data<Acc>(), query_rows, args.Ev);
      const auto [warps, bytes] =
          block_shape(std::int64_t(kTile) * (odd_stride(args.E) + odd_stride(args.Ev)), 2 * args.E + args.Ev + kTile,
                      sizeof(Acc), device, args, op);
      allow_shared_bytes(attention_dq_kernel<T>, bytes, device);
      attention_dq_kernel<T><<<work_blocks(args.batch * ((args.L + warps - 1) / warps)), warps * 32, bytes,
                               launch.stream()>>>(args, g.data<T>(), lse.data<Acc>(), delta.data<Acc>(), dq.data<T>());
    }
    if (key_rows > 0) {
      const auto [warps, bytes] =
          block_shape(std::int64_t(kTile) * (odd_stride(args.E) + odd_stride(args.Ev) + 2),
                      2 * args.E + 2 * args.Ev + 2 * kTile, sizeof(Acc), device, args, op);
      allow_shared_bytes(attention_dkdv_kernel<T>, bytes, device);
      attention_dkdv_kernel<T><<<work_blocks(args.batch * ((args.S + warps - 1) / warps)), warps * 32, bytes,
                                 launch.stream()>>>(args, g.data<T>(), lse.data<Acc>(), delta.data<Acc>(),
                                                    dk.data<T>(), dv.data<T>());
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return {dq, dk, dv};
}

}  // namespace adcuda
