// Softmax / log-softmax forward and backward and the fused cross-entropy.
//
// A softmax along the last dim (or any dim whose trailing dims are all 1) gives each row a block:
// one pass computes the row's max and sum of exponentials together (online softmax), a second pass
// writes the result, so the input is read twice and the output written once. Along an inner dim
// (trailing size > 1) each thread owns one (outer, inner) column and walks its elements, which keeps
// the reads coalesced across threads without transposing anything.
//
// Rows holding an inf or a NaN take PyTorch's order of operations (the NaN-propagating max, infinite
// too, then the sum, then the division) instead of the online pass, so they are NaN throughout where
// PyTorch's are (a row holding +inf or NaN, or only -inf); that path costs two more reads and is only
// taken by such rows.
//
// Cross-entropy is the fused classifier (llm.c's idea): the logits stay in their own dtype (bf16 under
// autocast: no float32 copy of the (B*T, 50257) logits exists) and are read once by the forward (online
// max and sum of exponentials, the (weighted) sum of the logits for label smoothing, 16-byte packs),
// which keeps two float32 statistics per row and a float32 loss; the backward reads them once more and
// writes the gradient in their dtype with 16-byte stores, class weights and label smoothing included.
// That moves 6 bytes per bf16 logit (read, read, write) where casting to float32 and back moved 24
// (cast 2 + 4, forward 4, backward 4 + 4, cast back 4 + 2). (A forward that also wrote the
// gradient would save one read, but autograd learns the loss's gradient only at backward time.)
// A row may be split into chunks over several blocks (few rows of a large vocabulary, e.g. 50257):
// each chunk leaves its partial state and a small pass merges a row's chunks in order. Rows of an odd
// length (50257 again) are not 16-byte aligned past the first: each row or chunk is read as a scalar
// head up to the next 16-byte boundary, 16-byte packs, then a scalar tail.
#include "softmax_loss.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "launch_utils.cuh"
#include "nn_common.cuh"
#include "ptx_sm80.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

using nn::block_reduce;
using nn::exp_of;
using nn::log_of;
using nn::MaxSum;

// The shift and log of the sum of exponentials that log-softmax subtracts: (x - shift) - log_sum.
template <typename Acc>
struct LogSoftmaxStats {
  Acc shift;
  Acc sum;
  Acc log_sum;
};

// PyTorch's order of operations for a row holding an inf or a NaN: the NaN-propagating max as the
// shift (infinite too: x - inf is NaN, as in PyTorch), then the sum. The `n` elements are in[0],
// in[stride], ...; `first` / `step` say how the calling threads split them (kBlock: the whole block, combined at the end).
template <typename T, typename Acc, bool kBlock>
__device__ LogSoftmaxStats<Acc> exact_stats(const T* in, std::int64_t n, std::int64_t stride, std::int64_t first,
                                            std::int64_t step, Acc* scratch) {
  Acc max = nn::negative_infinity<Acc>();
  for (std::int64_t j = first; j < n; j += step) max = nn::max_propagating_nan(max, to_compute(in[j * stride]));
  if constexpr (kBlock) max = block_reduce(max, nn::MaxPropagatingNan{}, scratch);
  const Acc shift = max;
  Acc sum = Acc(0);
  for (std::int64_t j = first; j < n; j += step) sum += exp_of(to_compute(in[j * stride]) - shift);
  if constexpr (kBlock) sum = block_reduce(sum, nn::Sum{}, scratch);
  return {shift, sum, log_of(sum)};
}

// The statistics of a contiguous row of `n` elements, read by the whole block in packs of V.
template <typename T, int V, typename Acc>
__device__ LogSoftmaxStats<Acc> row_stats(const T* in, std::int64_t n, MaxSum<Acc>* pair_scratch, Acc* scratch) {
  MaxSum<Acc> state = nn::empty_max_sum<Acc>();
  bool finite = true;
  for (std::int64_t j = static_cast<std::int64_t>(threadIdx.x) * V; j < n; j += static_cast<std::int64_t>(blockDim.x) * V) {
    const auto pack = nn::load_pack<T, V>(in + j);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const Acc value = to_compute(pack.item[k]);
      if (isfinite(value)) {
        nn::add_to(state, value);
      } else {
        finite = false;
      }
    }
  }
  state = block_reduce(state, nn::MergeMaxSum{}, pair_scratch);
  if (__syncthreads_and(finite)) return {state.max, state.sum, log_of(state.sum)};
  return exact_stats<T, Acc, true>(in, n, 1, threadIdx.x, blockDim.x, scratch);
}

// The statistics of one strided column, by one thread.
template <typename T, typename Acc>
__device__ LogSoftmaxStats<Acc> column_stats(const T* in, std::int64_t n, std::int64_t stride) {
  MaxSum<Acc> state = nn::empty_max_sum<Acc>();
  for (std::int64_t j = 0; j < n; ++j) {
    const Acc value = to_compute(in[j * stride]);
    if (!isfinite(value)) return exact_stats<T, Acc, false>(in, n, stride, 0, 1, nullptr);
    nn::add_to(state, value);
  }
  return {state.max, state.sum, log_of(state.sum)};
}

template <typename T, typename Acc>
__device__ __forceinline__ T softmax_value(T x, const LogSoftmaxStats<Acc>& stats, bool log) {
  const Acc shifted = to_compute(x) - stats.shift;
  return convert<T>(log ? shifted - stats.log_sum : exp_of(shifted) / stats.sum);
}

template <typename T, int V>
__global__ void softmax_rows_kernel(const T* x, T* y, std::int64_t rows, std::int64_t n, bool log) {
  using Acc = compute_t<T>;
  __shared__ MaxSum<Acc> pair_scratch[32];
  __shared__ Acc scratch[32];
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = x + row * n;
    T* out = y + row * n;
    const auto stats = row_stats<T, V, Acc>(in, n, pair_scratch, scratch);
    for (std::int64_t j = static_cast<std::int64_t>(threadIdx.x) * V; j < n; j += static_cast<std::int64_t>(blockDim.x) * V) {
      auto pack = nn::load_pack<T, V>(in + j);
#pragma unroll
      for (int k = 0; k < V; ++k) pack.item[k] = softmax_value(pack.item[k], stats, log);
      nn::store_pack<T, V>(out + j, pack);
    }
  }
}

template <typename T>
__global__ void softmax_columns_kernel(const T* x, T* y, std::int64_t outer, std::int64_t n, std::int64_t inner,
                                       bool log) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(column, outer * inner) {
    const std::int64_t start = (column / inner) * n * inner + column % inner;
    const T* in = x + start;
    T* out = y + start;
    const auto stats = column_stats<T, Acc>(in, n, inner);
    for (std::int64_t j = 0; j < n; ++j) out[j * inner] = softmax_value(in[j * inner], stats, log);
  }
}

// softmax: dx = y * (g - sum(g * y)); log-softmax: dx = g - exp(y) * sum(g).
template <typename T, typename Acc>
__device__ __forceinline__ Acc softmax_backward_term(T y, T g, bool log) {
  return log ? to_compute(g) : to_compute(g) * to_compute(y);
}

template <typename T, typename Acc>
__device__ __forceinline__ T softmax_backward_value(T y, T g, Acc total, bool log) {
  const Acc yv = to_compute(y), gv = to_compute(g);
  return convert<T>(log ? gv - exp_of(yv) * total : yv * (gv - total));
}

template <typename T, int V>
__global__ void softmax_backward_rows_kernel(const T* y, const T* g, T* dx, std::int64_t rows, std::int64_t n,
                                             bool log) {
  using Acc = compute_t<T>;
  __shared__ Acc scratch[32];
  const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) * V;
  const std::int64_t step = static_cast<std::int64_t>(blockDim.x) * V;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* yr = y + row * n;
    const T* gr = g + row * n;
    Acc partial = Acc(0);
    for (std::int64_t j = first; j < n; j += step) {
      const auto yp = nn::load_pack<T, V>(yr + j);
      const auto gp = nn::load_pack<T, V>(gr + j);
#pragma unroll
      for (int k = 0; k < V; ++k) partial += softmax_backward_term<T, Acc>(yp.item[k], gp.item[k], log);
    }
    const Acc total = block_reduce(partial, nn::Sum{}, scratch);
    for (std::int64_t j = first; j < n; j += step) {
      const auto yp = nn::load_pack<T, V>(yr + j);
      auto gp = nn::load_pack<T, V>(gr + j);
#pragma unroll
      for (int k = 0; k < V; ++k) gp.item[k] = softmax_backward_value(yp.item[k], gp.item[k], total, log);
      nn::store_pack<T, V>(dx + row * n + j, gp);
    }
  }
}

template <typename T>
__global__ void softmax_backward_columns_kernel(const T* y, const T* g, T* dx, std::int64_t outer, std::int64_t n,
                                                std::int64_t inner, bool log) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(column, outer * inner) {
    const std::int64_t start = (column / inner) * n * inner + column % inner;
    Acc total = Acc(0);
    for (std::int64_t j = 0; j < n; ++j) total += softmax_backward_term<T, Acc>(y[start + j * inner], g[start + j * inner], log);
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t at = start + j * inner;
      dx[at] = softmax_backward_value(y[at], g[at], total, log);
    }
  }
}

// A row's (or a chunk's) cross-entropy state: online max / sum of exponentials over its finite
// logits, the sum of all its logits (weighted by the class weights with label smoothing), and whether
// it holds a NaN or a +inf (either makes the row NaN, as PyTorch's log-softmax is).
template <typename Acc>
struct LogitsState {
  MaxSum<Acc> finite;
  Acc total;
  int special;  // kSawNan | kSawPositiveInfinity
};

constexpr int kSawNan = 1;
constexpr int kSawPositiveInfinity = 2;

template <typename Acc>
__device__ __forceinline__ LogitsState<Acc> empty_logits_state() {
  return {nn::empty_max_sum<Acc>(), Acc(0), 0};
}

template <typename Acc>
__device__ __forceinline__ void add_logit(LogitsState<Acc>& state, Acc value, Acc weight) {
  if (isfinite(value)) {
    nn::add_to(state.finite, value);
  } else if (value != value) {
    state.special |= kSawNan;
  } else if (value > Acc(0)) {
    state.special |= kSawPositiveInfinity;
  }
  state.total += weight * value;
}

struct MergeLogitsStates {
  template <typename Acc>
  __device__ __forceinline__ LogitsState<Acc> operator()(LogitsState<Acc> a, LogitsState<Acc> b) const {
    return {nn::merge(a.finite, b.finite), a.total + b.total, a.special | b.special};
  }
};

template <typename Acc>
__device__ __forceinline__ LogitsState<Acc> shuffle_xor(LogitsState<Acc> value, int offset) {
  return {nn::shuffle_xor(value.finite, offset), nn::shuffle_xor(value.total, offset),
          __shfl_xor_sync(nn::kFullMask, value.special, offset)};
}

// How a walk over `n` elements from `at` splits for V-element packs: elements [0, head) one by one up
// to the first V-element boundary, then `packs` packs, then the rest one by one.
struct PackSplit {
  std::int64_t head, packs;
};

template <typename T, int V>
__device__ __forceinline__ PackSplit pack_split(const T* at, std::int64_t n) {
  const auto misaligned = static_cast<std::int64_t>((reinterpret_cast<std::uintptr_t>(at) / sizeof(T)) % V);
  const std::int64_t head = misaligned == 0 ? 0 : (V - misaligned < n ? V - misaligned : n);
  return {head, (n - head) / V};
}

// A pack written as one store of its whole size (16 bytes for V = kPackWidth). NVVM splits a plain pack
// store into element stores where the row start has an offset it cannot see the alignment of (the
// chunk's); __stcs is one vector store, with the streaming hint: the gradient is read by a later
// kernel, not by this one.
template <typename T, int V>
__device__ __forceinline__ void store_whole(T* at, const nn::Pack<T, V>& pack) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * V;
  using Bits = std::conditional_t<kBytes == 16, uint4,
                                  std::conditional_t<kBytes == 8, uint2,
                                                     std::conditional_t<kBytes == 4, unsigned, unsigned short>>>;
  static_assert(sizeof(Bits) == kBytes, "a pack is 2, 4, 8 or 16 bytes");
  Bits bits;
  memcpy(&bits, &pack, sizeof(bits));
  __stcs(reinterpret_cast<Bits*>(at), bits);
}

// exp(d) for d <= 0 (a logit minus its row's max) as the fused classifier needs it: one multiply and
// one MUFU.EX2 in float32, where expf's range reduction (or exp2f's denormal fix-ups) costs 3-6 more
// instructions per logit and would make the bf16 forward compute-bound on an H200 (about 11
// instructions per logit left for 2 bytes of it). Its relative error (about 2^-22 plus the product's
// rounding) is far below the float32 losses' tolerance; terms below 2^-126 flush to 0, which a sum
// holding the max's 1 cannot see.
template <typename Acc>
__device__ __forceinline__ Acc exp_of_shifted(Acc d) {
  if constexpr (std::is_same_v<Acc, double>) {
    return exp_of(d);
  } else {
    return ptx::exp2_approx(d * 1.4426950408889634f);
  }
}

// Calls visit_one(j, value) and visit_pack(j, pack) for the elements in[j] of in[0..n) this thread
// owns (blockDim.x threads share them): a scalar head up to the first 16-byte boundary, V-element
// packs (16-byte loads), a scalar tail.
template <typename T, int V, typename VisitOne, typename VisitPack>
__device__ __forceinline__ void for_each_owned(const T* in, std::int64_t n, VisitOne&& visit_one,
                                               VisitPack&& visit_pack) {
  const PackSplit split = pack_split<T, V>(in, n);
  for (std::int64_t j = threadIdx.x; j < split.head; j += blockDim.x) visit_one(j, in[j]);
  for (std::int64_t q = threadIdx.x; q < split.packs; q += blockDim.x) {
    const std::int64_t j = split.head + q * V;
    visit_pack(j, nn::load_pack<T, V>(in + j));
  }
  for (std::int64_t j = split.head + split.packs * V + threadIdx.x; j < n; j += blockDim.x) visit_one(j, in[j]);
}

// Adds a pack of logits (weights weight_at(k)) with one rescale of the running sum for the pack's max
// instead of a compare and branch per element; a pack holding an inf or a NaN goes element by element.
template <typename T, int V, typename Acc, typename WeightAt>
__device__ __forceinline__ void add_logit_pack(LogitsState<Acc>& state, const nn::Pack<T, V>& pack,
                                               WeightAt&& weight_at) {
  Acc values[V];
  Acc pack_max = state.finite.max;
  Acc pack_total = Acc(0);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    values[k] = to_compute(pack.item[k]);
    pack_max = fmax(pack_max, values[k]);  // FMNMX; a NaN, which fmax passes over, goes the slow way below
    pack_total += weight_at(k) * values[k];
  }
  // a NaN or an inf anywhere makes the pack's total NaN or inf (so may a finite overflow, harmlessly)
  if (!isfinite(pack_total)) {
#pragma unroll
    for (int k = 0; k < V; ++k) add_logit(state, values[k], weight_at(k));
    return;
  }
  if (pack_max > state.finite.max) {
    state.finite.sum *= exp_of_shifted(state.finite.max - pack_max);
    state.finite.max = pack_max;
  }
#pragma unroll
  for (int k = 0; k < V; ++k) state.finite.sum += exp_of_shifted(values[k] - pack_max);
  state.total += pack_total;
}

// The fused classifier: class weights (kWeighted) and label smoothing, in the forward and the backward.
// With ls the smoothing, w the weights (1 without) and W their sum: a row's loss is
// keep * w[t] * (log_sum - (x[t] - m)) + smooth * (W * log_sum - sum(w * (x - m))), keep = 1 - ls and
// smooth = ls / C, the CPU backend's -(1 - ls) w[t] logp[t] - ls / C sum(w logp); the gradient is
// p * (keep * w[t] + smooth * W) - keep * w[t] onehot(t) - smooth * w, times the row's loss gradient.
template <typename Acc>
struct ClassifierTerms {
  Acc keep, smooth;
  const Acc* weight;      // (C,) or nullptr
  const Acc* weight_sum;  // one value (the sum of the weights) or nullptr
};

// A row's shift m (its max) and log_sum = log(sum(exp(x - m))). A row holding a NaN or a +inf, or
// only -inf, has shift 0 and a NaN log-sum: NaN losses and gradients, as PyTorch's (softmax shifts by
// the infinite max, and inf - inf is NaN).
template <typename Acc>
struct RowStats {
  Acc shift, log_sum;
};

template <typename Acc>
__device__ __forceinline__ RowStats<Acc> row_stats_of(const LogitsState<Acc>& state) {
  if (state.special != 0 || state.finite.max == nn::negative_infinity<Acc>()) return {Acc(0), nn::quiet_nan<Acc>()};
  return {state.finite.max, log_of(state.finite.sum)};
}

// The per-row results from a row's whole state (total = sum(w * x), or sum(x) without weights): its
// loss and its statistics (shift, log_sum), kept for the backward.
template <typename T, typename Acc>
__device__ __forceinline__ void finish_classifier_row(const LogitsState<Acc>& state, const T* logits_row,
                                                      std::int64_t t, std::int64_t classes,
                                                      std::int64_t ignore_index, const ClassifierTerms<Acc>& terms,
                                                      Acc* loss, Acc* stats) {
  const RowStats<Acc> row = row_stats_of(state);
  stats[0] = row.shift;
  stats[1] = row.log_sum;
  Acc value = Acc(0);
  if (t != ignore_index) {
    if (t < 0 || t >= classes) {
      value = nn::quiet_nan<Acc>();  // the op checks targets first; never a silent wrong loss
    } else {
      const Acc w_t = terms.weight != nullptr ? terms.weight[t] : Acc(1);
      value = terms.keep * w_t * (row.log_sum - (to_compute(logits_row[t]) - row.shift));
      if (terms.smooth != Acc(0)) {
        const Acc total_weight = terms.weight != nullptr ? *terms.weight_sum : static_cast<Acc>(classes);
        value += terms.smooth * (total_weight * row.log_sum - (state.total - row.shift * total_weight));
      }
    }
  }
  *loss = value;
}

// Block (x, y) reads chunk y ([y * chunk, (y + 1) * chunk) of the classes) of rows x, x + gridDim.x,
// ... once, in 16-byte packs; with one chunk per row it finishes the row, else it leaves the chunk's
// state in partials. The weighted sum (kWeighted and label smoothing) reads the weights too.
template <typename T, int V, bool kWeighted>
__global__ void classifier_loss_kernel(const T* logits, const std::int64_t* target, compute_t<T>* losses,
                                       compute_t<T>* stats, LogitsState<compute_t<T>>* partials, std::int64_t rows,
                                       std::int64_t classes, std::int64_t chunk, std::int64_t ignore_index,
                                       ClassifierTerms<compute_t<T>> terms) {
  using Acc = compute_t<T>;
  __shared__ LogitsState<Acc> scratch[32];
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t count = (begin + chunk < classes ? begin + chunk : classes) - begin;
  const Acc* weight = kWeighted && terms.smooth != Acc(0) ? terms.weight + begin : nullptr;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* in = logits + row * classes;
    LogitsState<Acc> state = empty_logits_state<Acc>();
    const auto weight_of = [&](std::int64_t j) { return kWeighted && weight != nullptr ? weight[j] : Acc(1); };
    for_each_owned<T, V>(
        in + begin, count, [&](std::int64_t j, T value) { add_logit(state, to_compute(value), weight_of(j)); },
        [&](std::int64_t j, const nn::Pack<T, V>& pack) {
          add_logit_pack(state, pack, [&](int k) { return weight_of(j + k); });
        });
    state = block_reduce(state, MergeLogitsStates{}, scratch);
    if (threadIdx.x != 0) continue;
    if (gridDim.y == 1) {
      finish_classifier_row(state, in, target[row], classes, ignore_index, terms, losses + row, stats + 2 * row);
    } else {
      partials[row * gridDim.y + blockIdx.y] = state;
    }
  }
}

// A row per thread: the row's chunk states merged in chunk order, then its results.
template <typename T>
__global__ void classifier_loss_finish_kernel(const T* logits, const std::int64_t* target, compute_t<T>* losses,
                                              compute_t<T>* stats, const LogitsState<compute_t<T>>* partials,
                                              std::int64_t rows, std::int64_t classes, int chunks,
                                              std::int64_t ignore_index, ClassifierTerms<compute_t<T>> terms) {
  using Acc = compute_t<T>;
  ADCUDA_GRID_STRIDE_LOOP(row, rows) {
    LogitsState<Acc> state = partials[row * chunks];
    for (int c = 1; c < chunks; ++c) state = MergeLogitsStates{}(state, partials[row * chunks + c]);
    finish_classifier_row(state, logits + row * classes, target[row], classes, ignore_index, terms, losses + row,
                          stats + 2 * row);
  }
}

// The sum of the class weights, by one block (C values, in a fixed order).
template <typename Acc>
__global__ void weight_sum_kernel(const Acc* weight, std::int64_t classes, Acc* sum) {
  __shared__ Acc scratch[32];
  Acc partial = Acc(0);
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) partial += weight[c];
  partial = block_reduce(partial, nn::Sum{}, scratch);
  if (threadIdx.x == 0) *sum = partial;
}

// The gradient of the logits; block (x, y) writes chunk y of rows x, x + gridDim.x, ... in the logits'
// dtype, one read of the logits (16-byte packs) and one 16-byte store per pack. `grad` may be
// `logits` itself (each pack is read before the same thread overwrites it).
template <typename T, int V, bool kWeighted>
__global__ void classifier_loss_backward_kernel(const T* logits, const compute_t<T>* stats,
                                                const std::int64_t* target, const compute_t<T>* g_rows, T* grad,
                                                std::int64_t rows, std::int64_t classes, std::int64_t chunk,
                                                std::int64_t ignore_index, ClassifierTerms<compute_t<T>> terms) {
  using Acc = compute_t<T>;
  const std::int64_t begin = static_cast<std::int64_t>(blockIdx.y) * chunk;
  const std::int64_t count = (begin + chunk < classes ? begin + chunk : classes) - begin;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t t = target[row];
    const bool valid = t != ignore_index;
    const std::int64_t hit = valid ? t - begin : -1;  // the target's index within the chunk
    // ignored rows get 0 even where g_row is inf or NaN (a mean over no rows divides by 0)
    const Acc scale = valid ? g_rows[row] : Acc(0);
    const Acc shift = stats[2 * row], log_sum = stats[2 * row + 1];
    Acc p_scale = Acc(1), hit_q = terms.keep + terms.smooth, smooth_q = terms.smooth;
    if constexpr (kWeighted) {
      const Acc w_t = valid && t >= 0 && t < classes ? terms.weight[t] : Acc(0);
      p_scale = terms.keep * w_t + (terms.smooth != Acc(0) ? terms.smooth * *terms.weight_sum : Acc(0));
      hit_q = terms.keep * w_t;
    }
    const Acc* weight = kWeighted ? terms.weight + begin : nullptr;
    const T* in = logits + row * classes + begin;
    T* out = grad + row * classes + begin;
    const auto value = [&](std::int64_t j, T x) {
      const Acc p = exp_of_shifted((to_compute(x) - shift) - log_sum);
      Acc d;
      if constexpr (kWeighted) {
        d = p * p_scale - (j == hit ? hit_q : Acc(0)) - (smooth_q != Acc(0) ? smooth_q * weight[j] : Acc(0));
      } else {
        d = p - (j == hit ? hit_q : smooth_q);
      }
      return convert<T>(d * scale);
    };
    // in and out share their alignment (the host checked), so one split covers both
    const PackSplit split = pack_split<T, V>(in, count);
    for (std::int64_t j = threadIdx.x; j < split.head; j += blockDim.x) out[j] = value(j, in[j]);
    for (std::int64_t q = threadIdx.x; q < split.packs; q += blockDim.x) {
      const std::int64_t j = split.head + q * V;
      const auto logits_pack = nn::load_pack<T, V>(in + j);
      nn::Pack<T, V> grad_pack;
#pragma unroll
      for (int k = 0; k < V; ++k) grad_pack.item[k] = value(j + k, logits_pack.item[k]);
      store_whole(out + j, grad_pack);
    }
    for (std::int64_t j = split.head + split.packs * V + threadIdx.x; j < count; j += blockDim.x) {
      out[j] = value(j, in[j]);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Host side.
void require_contiguous(const DeviceArray& a, const char* op, const char* name) {
  if (!a.is_contiguous()) throw std::invalid_argument(std::string(op) + ": " + name + " must be contiguous");
}

struct AxisSplit {
  std::int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const Dims& shape, int axis, const char* op) {
  const int nd = static_cast<int>(shape.size());
  if (axis < 0 || axis >= nd) {
    throw std::invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                                format_dims(shape));
  }
  AxisSplit split;
  for (int d = 0; d < axis; ++d) split.outer *= shape[d];
  split.n = shape[axis];
  for (int d = axis + 1; d < nd; ++d) split.inner *= shape[d];
  return split;
}

void check_cross_entropy_rows(const DeviceArray& rows_array, const DeviceArray& target, const char* op) {
  if (rows_array.ndim() != 2 || target.ndim() != 1 || target.shape()[0] != rows_array.shape()[0]) {
    throw std::invalid_argument(std::string(op) + ": expected (N, C) rows and (N,) targets, got " +
                                format_dims(rows_array.shape()) + " and " + format_dims(target.shape()));
  }
  if (target.dtype() != ScalarType::Int64) {
    throw std::invalid_argument(std::string(op) + ": targets must be int64, got " + scalar_type_name(target.dtype()));
  }
  require_contiguous(rows_array, op, "the rows");
  require_contiguous(target, op, "the targets");
}

ScalarType statistics_type(ScalarType x) { return x == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32; }

// How cross-entropy's blocks cover (rows, classes): rows are split into chunks of classes when there
// are too few of them to give every SM two blocks (a chunk keeps at least 4096 classes).
struct ChunkedRows {
  std::int64_t chunk;
  int chunks;
  dim3 grid;
  int threads;
};

ChunkedRows chunk_rows(std::int64_t rows, std::int64_t classes, int device) {
  constexpr std::int64_t kMinChunk = 4096;
  const std::int64_t target_blocks = 2 * static_cast<std::int64_t>(device_facts(device).multiprocessors);
  std::int64_t chunks = std::min((target_blocks + rows - 1) / rows, (classes + kMinChunk - 1) / kMinChunk);
  chunks = std::clamp<std::int64_t>(chunks, 1, 65535);
  ChunkedRows plan;
  // chunks start on 16-element boundaries, so every chunk of an aligned row reads whole packs
  plan.chunk = std::max<std::int64_t>(((classes + chunks - 1) / chunks + 15) / 16 * 16, 1);
  plan.chunks = static_cast<int>(std::max<std::int64_t>((classes + plan.chunk - 1) / plan.chunk, 1));
  plan.grid = dim3(nn::row_blocks(rows), static_cast<unsigned>(plan.chunks));
  plan.threads = nn::row_block_threads(plan.chunk);
  return plan;
}

}  // namespace

DeviceArray softmax(const DeviceArray& a, int axis, bool log) {
  require_contiguous(a, "softmax", "the input");
  const AxisSplit split = split_at(a.shape(), axis, "softmax");
  DeviceArray out = DeviceArray::empty(a.shape(), a.dtype(), a.device());
  if (out.numel() == 0) return out;
  KernelLaunch launch(out, a);
  dispatch_floating(a.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (split.inner == 1) {
      nn::with_pack_width<T>(split.n, [&](auto width) {
        softmax_rows_kernel<T, decltype(width)::value><<<nn::row_blocks(split.outer), nn::row_block_threads(split.n), 0,
                                          launch.stream()>>>(a.data<T>(), out.data<T>(), split.outer, split.n, log);
      }, a.data<T>(), out.data<T>());
    } else {
      softmax_columns_kernel<T><<<grid_size(split.outer * split.inner), kBlockSize, 0, launch.stream()>>>(
          a.data<T>(), out.data<T>(), split.outer, split.n, split.inner, log);
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

DeviceArray softmax_backward(const DeviceArray& y, const DeviceArray& g, int axis, bool log) {
  if (y.shape() != g.shape() || y.dtype() != g.dtype()) {
    throw std::invalid_argument("softmax_backward: output " + format_dims(y.shape()) + " " + scalar_type_name(y.dtype()) +
                                " and gradient " + format_dims(g.shape()) + " " + scalar_type_name(g.dtype()) +
                                " must match");
  }
  require_contiguous(y, "softmax_backward", "the output");
  require_contiguous(g, "softmax_backward", "the gradient");
  const AxisSplit split = split_at(y.shape(), axis, "softmax_backward");
  DeviceArray dx = DeviceArray::empty(g.shape(), g.dtype(), g.device());
  if (dx.numel() == 0) return dx;
  KernelLaunch launch(dx, y, g);
  dispatch_floating(g.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (split.inner == 1) {
      nn::with_pack_width<T>(split.n, [&](auto width) {
        softmax_backward_rows_kernel<T, decltype(width)::value>
            <<<nn::row_blocks(split.outer), nn::row_block_threads(split.n), 0, launch.stream()>>>(
                y.data<T>(), g.data<T>(), dx.data<T>(), split.outer, split.n, log);
      }, y.data<T>(), g.data<T>(), dx.data<T>());
    } else {
      softmax_backward_columns_kernel<T><<<grid_size(split.outer * split.inner), kBlockSize, 0, launch.stream()>>>(
          y.data<T>(), g.data<T>(), dx.data<T>(), split.outer, split.n, split.inner, log);
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return dx;
}

namespace {

// The class weights' checks, and their sum (one device value) when label smoothing needs it.
struct ClassWeights {
  const DeviceArray* weight;
  std::optional<DeviceArray> sum;
};

ClassWeights class_weights(const DeviceArray* weight, const DeviceArray& logits, bool smoothing, cudaStream_t stream,
                           const char* op) {
  ClassWeights weights{weight, std::nullopt};
  if (weight == nullptr) return weights;
  const ScalarType stats = statistics_type(logits.dtype());
  if (weight->ndim() != 1 || weight->shape()[0] != logits.shape()[1] || weight->dtype() != stats) {
    throw std::invalid_argument(std::string(op) + ": the class weights must be (" + std::to_string(logits.shape()[1]) +
                                ",) " + scalar_type_name(stats) + ", got " + format_dims(weight->shape()) + " " +
                                scalar_type_name(weight->dtype()));
  }
  require_contiguous(*weight, op, "the class weights");
  if (weight->device() != logits.device()) {
    throw std::invalid_argument(std::string(op) + ": the class weights are on another device than the logits");
  }
  weight->storage()->use_on(stream, logits.device());
  if (smoothing) {
    weights.sum = DeviceArray::empty({1}, stats, logits.device());
    weights.sum->storage()->use_on(stream, logits.device());
    dispatch_floating(stats, op, [&](auto tag) {
      using Acc = typename decltype(tag)::type;
      if constexpr (std::is_same_v<Acc, float> || std::is_same_v<Acc, double>) {
        weight_sum_kernel<Acc><<<1, 1024, 0, stream>>>(weight->data<Acc>(), weight->numel(), weights.sum->data<Acc>());
      }
    });
    ADCUDA_CHECK_LAUNCH();
  }
  return weights;
}

template <typename Acc>
ClassifierTerms<Acc> classifier_terms(const ClassWeights& weights, std::int64_t classes, double label_smoothing) {
  ClassifierTerms<Acc> terms;
  terms.keep = static_cast<Acc>(1.0 - label_smoothing);
  terms.smooth = classes > 0 ? static_cast<Acc>(label_smoothing / static_cast<double>(classes)) : Acc(0);
  terms.weight = weights.weight != nullptr ? weights.weight->data<Acc>() : nullptr;
  terms.weight_sum = weights.sum ? weights.sum->data<Acc>() : nullptr;
  return terms;
}

// Calls f(std::bool_constant<weighted>).
template <typename F>
void with_weighting(bool weighted, F&& f) {
  if (weighted) {
    f(std::true_type{});
  } else {
    f(std::false_type{});
  }
}

}  // namespace

std::pair<DeviceArray, DeviceArray> classifier_loss(const DeviceArray& logits, const DeviceArray& target,
                                                    const DeviceArray* weight, std::int64_t ignore_index,
                                                    double label_smoothing) {
  const char* op = "classifier_loss";
  check_cross_entropy_rows(logits, target, op);
  const std::int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const ScalarType wide = statistics_type(logits.dtype());
  DeviceArray losses = DeviceArray::empty({rows}, wide, logits.device());
  DeviceArray stats = DeviceArray::empty({rows, 2}, wide, logits.device());
  if (rows == 0) return {losses, stats};
  const ChunkedRows plan = chunk_rows(rows, classes, logits.device());
  std::optional<DeviceArray> partials;  // one state per (row, chunk) when rows are split
  KernelLaunch launch(losses, stats, logits, target);
  const ClassWeights weights = class_weights(weight, logits, label_smoothing != 0.0, launch.stream(), op);
  dispatch_floating(logits.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    using State = LogitsState<Acc>;
    State* states = nullptr;
    if (plan.chunks > 1) {
      partials = DeviceArray::empty({rows * plan.chunks * static_cast<std::int64_t>(sizeof(State))}, ScalarType::Bool,
                                    logits.device());
      partials->storage()->use_on(launch.stream(), launch.device());
      states = static_cast<State*>(partials->data_ptr());
    }
    const ClassifierTerms<Acc> terms = classifier_terms<Acc>(weights, classes, label_smoothing);
    constexpr int kWide = nn::kPackWidth<T>;
    with_weighting(weight != nullptr, [&](auto weighted) {
      classifier_loss_kernel<T, kWide, decltype(weighted)::value><<<plan.grid, plan.threads, 0, launch.stream()>>>(
          logits.data<T>(), target.data<std::int64_t>(), losses.data<Acc>(), stats.data<Acc>(), states, rows, classes,
          plan.chunk, ignore_index, terms);
    });
    ADCUDA_CHECK_LAUNCH();
    if (plan.chunks > 1) {
      classifier_loss_finish_kernel<T><<<grid_size(rows), kBlockSize, 0, launch.stream()>>>(
          logits.data<T>(), target.data<std::int64_t>(), losses.data<Acc>(), stats.data<Acc>(), states, rows, classes,
          plan.chunks, ignore_index, terms);
      ADCUDA_CHECK_LAUNCH();
    }
  });
  return {losses, stats};
}

DeviceArray classifier_loss_backward(const DeviceArray& logits, const DeviceArray& stats, const DeviceArray& target,
                                     const DeviceArray* weight, const DeviceArray& g_rows, std::int64_t ignore_index,
                                     double label_smoothing) {
  const char* op = "classifier_loss_backward";
  check_cross_entropy_rows(logits, target, op);
  const std::int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  const ScalarType wide = statistics_type(logits.dtype());
  if (g_rows.ndim() != 1 || g_rows.shape()[0] != rows || g_rows.dtype() != wide) {
    throw std::invalid_argument(std::string(op) + ": the row gradients must be (" + std::to_string(rows) + ",) " +
                                scalar_type_name(wide) + ", got " + format_dims(g_rows.shape()) + " " +
                                scalar_type_name(g_rows.dtype()));
  }
  if (stats.ndim() != 2 || stats.shape()[0] != rows || stats.shape()[1] != 2 || stats.dtype() != wide) {
    throw std::invalid_argument(std::string(op) + ": the row statistics must be (" + std::to_string(rows) + ", 2) " +
                                scalar_type_name(wide) + ", got " + format_dims(stats.shape()) + " " +
                                scalar_type_name(stats.dtype()));
  }
  require_contiguous(g_rows, op, "the row gradients");
  require_contiguous(stats, op, "the row statistics");
  DeviceArray grad = DeviceArray::empty(logits.shape(), logits.dtype(), logits.device());
  if (grad.numel() == 0) return grad;
  const ChunkedRows plan = chunk_rows(rows, classes, logits.device());
  KernelLaunch launch(grad, logits, stats, target, g_rows);
  const ClassWeights weights = class_weights(weight, logits, label_smoothing != 0.0, launch.stream(), op);
  dispatch_floating(logits.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    const ClassifierTerms<Acc> terms = classifier_terms<Acc>(weights, classes, label_smoothing);
    // packs need the logits and the gradient equally misaligned (the gradient is fresh, so aligned)
    constexpr int kWide = nn::kPackWidth<T>;
    const bool packable = reinterpret_cast<std::uintptr_t>(logits.data_ptr()) % 16 == 0;
    with_weighting(weight != nullptr, [&](auto weighted) {
      const auto run = [&](auto width) {
        classifier_loss_backward_kernel<T, decltype(width)::value, decltype(weighted)::value>
            <<<plan.grid, plan.threads, 0, launch.stream()>>>(logits.data<T>(), stats.data<Acc>(),
                                                              target.data<std::int64_t>(), g_rows.data<Acc>(),
                                                              grad.data<T>(), rows, classes, plan.chunk,
                                                              ignore_index, terms);
      };
      if (packable) {
        run(std::integral_constant<int, kWide>{});
      } else {
        run(std::integral_constant<int, 1>{});
      }
    });
  });
  ADCUDA_CHECK_LAUNCH();
  return grad;
}

}  // namespace adcuda
