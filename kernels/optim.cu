// Multi-tensor optimizer kernels (SGD, Adam/AdamW/AMSGrad, loss-scale unscaling, the global gradient
// norm) and the loss-scale update.
//
// One launch covers many tensors: the host splits every tensor into chunks of kChunk elements and
// passes a table (each tensor's addresses, sizes and dtypes, and for every block the tensor and chunk
// it owns) as the kernel's argument, so nothing is copied to the device first. A table holds up to
// kMaxTensors tensors and kMaxBlocks blocks (under CUDA's 4 KiB argument limit); more tensors take
// more launches.
//
// SGD and Adam are compiled per dtype combination (parameter, gradient, state, master): the host
// groups a call's tensors by combination and launches each group's kernel, which moves 16 bytes of its
// widest array per load (a tensor any of whose arrays is not 16-byte aligned takes the element loop).
// The combinations training uses are compiled (one dtype throughout; fp16/bf16 parameters and
// gradients with fp32 state and fp32 masters; fp32 parameters with fp32 gradients and state stepped
// as masters of an fp16/bf16 working copy, which the same pass writes: autocast then reads the copy
// instead of casting each weight every step); any other tensor is stepped through copies of its
// arrays in its compute type (fp32, fp64 for an fp64 parameter or master) and copied back, which
// rounds as the kernel would. Unscaling and the norm read each tensor's dtype at run time.
#include "optim.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nn_common.cuh"
#include "runtime/copy.h"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

constexpr int kMaxTensors = 24;
constexpr int kMaxBlocks = 320;
constexpr std::int64_t kChunk = 65536;
constexpr int kThreads = 512;

template <int kLists>
struct TensorTable {
  void* data[kLists][kMaxTensors];  // nullptr for an absent list (no masters, no momentum, ...)
  std::int64_t size[kMaxTensors];
  ScalarType dtype[kLists][kMaxTensors];
  bool aligned[kMaxTensors];  // every present array starts 16-byte aligned
  unsigned char block_tensor[kMaxBlocks];
  int block_chunk[kMaxBlocks];
};

template <typename Acc>
__device__ __forceinline__ Acc load_as(const void* data, ScalarType dtype, std::int64_t i) {
  switch (dtype) {
    case ScalarType::Float16: return static_cast<Acc>(__half2float(static_cast<const __half*>(data)[i]));
    case ScalarType::BFloat16: return static_cast<Acc>(__bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]));
    case ScalarType::Float64: return static_cast<Acc>(static_cast<const double*>(data)[i]);
    default: return static_cast<Acc>(static_cast<const float*>(data)[i]);
  }
}

template <typename Acc>
__device__ __forceinline__ void store_as(void* data, ScalarType dtype, std::int64_t i, Acc value) {
  switch (dtype) {
    case ScalarType::Float16: static_cast<__half*>(data)[i] = __float2half(static_cast<float>(value)); break;
    case ScalarType::BFloat16:
      static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16(static_cast<float>(value));
      break;
    case ScalarType::Float64: static_cast<double*>(data)[i] = static_cast<double>(value); break;
    default: static_cast<float*>(data)[i] = static_cast<float>(value); break;
  }
}

// The element range [begin, end) of this block's chunk, and its tensor's slot in the table.
struct BlockWork {
  int slot;
  std::int64_t begin, end;
  template <int kLists>
  __device__ explicit BlockWork(const TensorTable<kLists>& table) {
    slot = table.block_tensor[blockIdx.x];
    begin = static_cast<std::int64_t>(table.block_chunk[blockIdx.x]) * kChunk;
    const std::int64_t stop = begin + kChunk;
    end = stop < table.size[slot] ? stop : table.size[slot];
  }
};

// The dtypes of one SGD/Adam launch: parameter, gradient, optimizer state, master (void: none). The
// master (or, without one, the parameter) is the target the step updates; the math is in Acc.
template <typename P, typename G, typename S, typename M>
struct StepTypes {
  using Param = P;
  using Grad = G;
  using State = S;
  static constexpr bool kMaster = !std::is_void_v<M>;
  using Target = std::conditional_t<kMaster, M, P>;
  using Acc = std::conditional_t<std::is_same_v<Target, double>, double, float>;
  // elements per step: 16 bytes of the widest array
  static constexpr int kWidth =
      16 / static_cast<int>(std::max({sizeof(P), sizeof(G), sizeof(S), sizeof(Target)}));
};

template <typename T, int V>
__device__ __forceinline__ void load_values(const void* data, std::int64_t i, float (&out)[V]) {
  const auto pack = nn::load_pack<T, V>(static_cast<const T*>(data) + i);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = static_cast<float>(to_compute(pack.item[k]));
}

template <typename T, int V>
__device__ __forceinline__ void load_values(const void* data, std::int64_t i, double (&out)[V]) {
  const auto pack = nn::load_pack<T, V>(static_cast<const T*>(data) + i);
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = static_cast<double>(to_compute(pack.item[k]));
}

template <typename T, int V, typename Acc>
__device__ __forceinline__ void store_values(void* data, std::int64_t i, const Acc (&values)[V]) {
  nn::Pack<T, V> pack;
#pragma unroll
  for (int k = 0; k < V; ++k) pack.item[k] = convert<T>(values[k]);
  nn::store_pack<T, V>(static_cast<T*>(data) + i, pack);
}

// Runs step.template elements<V>(i) over this block's chunk: V = Types::kWidth elements at a time
// where the tensor is aligned, then (or else) one at a time.
template <typename Types, typename Step>
__device__ __forceinline__ void for_chunk(const BlockWork& work, bool aligned, const Step& step) {
  constexpr int V = Types::kWidth;
  std::int64_t done = work.begin;
  if (aligned) {
    const std::int64_t vectors = (work.end - work.begin) / V;
    for (std::int64_t v = threadIdx.x; v < vectors; v += blockDim.x) step.template elements<V>(work.begin + v * V);
    done = work.begin + vectors * V;
  }
  for (std::int64_t i = done + threadIdx.x; i < work.end; i += blockDim.x) step.template elements<1>(i);
}

// Lists: parameter, gradient, momentum buffer, master.
enum SgdList { kSgdParam, kSgdGrad, kSgdBuf, kSgdMaster, kSgdLists };

struct SgdConstants {
  double lr, momentum, dampening_complement, weight_decay;
  bool nesterov, first_step;
};

// One block's tensor: its arrays, and the constants in the compute type.
template <typename Types>
struct SgdStep {
  using Acc = typename Types::Acc;
  void* param;
  const void* grad;
  void* buf;
  void* target;  // the master, or the parameter
  Acc lr, momentum, dampening_complement, weight_decay;
  bool nesterov, first_step;

  template <int V>
  __device__ __forceinline__ void elements(std::int64_t i) const {
    Acc w[V], d[V];
    load_values<typename Types::Target, V>(target, i, w);
    load_values<typename Types::Grad, V>(grad, i, d);
    if (weight_decay != Acc(0)) {
#pragma unroll
      for (int k = 0; k < V; ++k) d[k] = d[k] + weight_decay * w[k];
    }
    if (momentum != Acc(0)) {
      Acc b[V];
      if (first_step) {
#pragma unroll
        for (int k = 0; k < V; ++k) b[k] = d[k];
      } else {
        load_values<typename Types::State, V>(buf, i, b);
#pragma unroll
        for (int k = 0; k < V; ++k) b[k] = b[k] * momentum + d[k] * dampening_complement;
      }
      store_values<typename Types::State, V>(buf, i, b);
#pragma unroll
      for (int k = 0; k < V; ++k) d[k] = nesterov ? d[k] + momentum * b[k] : b[k];
    }
#pragma unroll
    for (int k = 0; k < V; ++k) w[k] = w[k] - lr * d[k];
    store_values<typename Types::Target, V>(target, i, w);
    if constexpr (Types::kMaster) store_values<typename Types::Param, V>(param, i, w);
  }
};

template <typename Types>
__global__ void __launch_bounds__(kThreads) sgd_kernel(TensorTable<kSgdLists> table, SgdConstants c) {
  using Acc = typename Types::Acc;
  const BlockWork work(table);
  const int s = work.slot;
  void* param = table.data[kSgdParam][s];
  const SgdStep<Types> step{param,
                            table.data[kSgdGrad][s],
                            table.data[kSgdBuf][s],
                            Types::kMaster ? table.data[kSgdMaster][s] : param,
                            static_cast<Acc>(c.lr),
                            static_cast<Acc>(c.momentum),
                            static_cast<Acc>(c.dampening_complement),
                            static_cast<Acc>(c.weight_decay),
                            c.nesterov,
                            c.first_step};
  for_chunk<Types>(work, table.aligned[s], step);
}

// Lists: parameter, gradient, first moment, second moment, AMSGrad's max second moment, master.
enum AdamList { kAdamParam, kAdamGrad, kAdamExpAvg, kAdamExpAvgSq, kAdamMaxExpAvgSq, kAdamMaster, kAdamLists };

struct AdamConstants {
  // clip_grad_norm_'s clamped coefficient on the device (nullptr: none): every gradient is scaled by
  // it before the step as the separate _foreach_mul_ would: both operands taken in the gradient's
  // dtype (the elementwise kernels' rule), the product rounded to it
  const float* grad_multiplier;
  double decay_factor;  // 1 - lr * weight_decay (AdamW)
  double weight_decay;  // added to the gradient (Adam)
  double beta1_complement, beta2, beta2_complement, bias_correction2_sqrt, eps, step_size;
  bool decoupled;
};

static_assert(sizeof(TensorTable<kAdamLists>) + sizeof(AdamConstants) < 4096,
              "the table travels as a kernel argument: it must stay under CUDA's 4 KiB limit");

template <typename Types>
struct AdamStep {
  using Acc = typename Types::Acc;
  void* param;
  const void* grad;
  void* exp_avg;
  void* exp_avg_sq;
  void* max_exp_avg_sq;  // nullptr unless AMSGrad
  void* target;          // the master, or the parameter
  // read per vector (an L1 hit), not held in a register: the fp64 kernel's divisions are calls, and
  // one more value live across them made ptxas spill on sm_80
  const float* grad_multiplier;
  Acc decay_factor, weight_decay, beta1_complement, beta2, beta2_complement, bias_correction2_sqrt, eps, step_size;
  bool decoupled;

  template <int V>
  __device__ __forceinline__ void elements(std::int64_t i) const {
    using State = typename Types::State;
    Acc w[V], d[V], m[V], v[V];
    load_values<typename Types::Target, V>(target, i, w);
    load_values<typename Types::Grad, V>(grad, i, d);
    if (grad_multiplier != nullptr) {
      const Acc c = static_cast<Acc>(to_compute(convert<typename Types::Grad>(*grad_multiplier)));
#pragma unroll
      for (int k = 0; k < V; ++k) d[k] = static_cast<Acc>(to_compute(convert<typename Types::Grad>(d[k] * c)));
    }
    load_values<State, V>(exp_avg, i, m);
    load_values<State, V>(exp_avg_sq, i, v);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (weight_decay != Acc(0)) {
        if (decoupled) {
          w[k] = w[k] * decay_factor;
        } else {
          d[k] = d[k] + weight_decay * w[k];
        }
      }
      m[k] = m[k] + (d[k] - m[k]) * beta1_complement;
      v[k] = v[k] * beta2 + (d[k] * d[k]) * beta2_complement;
    }
    store_values<State, V>(exp_avg, i, m);
    store_values<State, V>(exp_avg_sq, i, v);
    if (max_exp_avg_sq != nullptr) {
      Acc seen[V];
      load_values<State, V>(max_exp_avg_sq, i, seen);
#pragma unroll
      for (int k = 0; k < V; ++k) v[k] = seen[k] > v[k] ? seen[k] : v[k];
      store_values<State, V>(max_exp_avg_sq, i, v);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const Acc denom = sqrt(v[k]) / bias_correction2_sqrt + eps;
      w[k] = w[k] - step_size * (m[k] / denom);
    }
    store_values<typename Types::Target, V>(target, i, w);
    if constexpr (Types::kMaster) store_values<typename Types::Param, V>(param, i, w);
  }
};

template <typename Types>
__global__ void __launch_bounds__(kThreads) adam_kernel(TensorTable<kAdamLists> table, AdamConstants c) {
  using Acc = typename Types::Acc;
  const BlockWork work(table);
  const int s = work.slot;
  void* param = table.data[kAdamParam][s];
  const AdamStep<Types> step{param,
                             table.data[kAdamGrad][s],
                             table.data[kAdamExpAvg][s],
                             table.data[kAdamExpAvgSq][s],
                             table.data[kAdamMaxExpAvgSq][s],
                             Types::kMaster ? table.data[kAdamMaster][s] : param,
                             c.grad_multiplier,
                             static_cast<Acc>(c.decay_factor),
                             static_cast<Acc>(c.weight_decay),
                             static_cast<Acc>(c.beta1_complement),
                             static_cast<Acc>(c.beta2),
                             static_cast<Acc>(c.beta2_complement),
                             static_cast<Acc>(c.bias_correction2_sqrt),
                             static_cast<Acc>(c.eps),
                             static_cast<Acc>(c.step_size),
                             c.decoupled};
  for_chunk<Types>(work, table.aligned[s], step);
}

enum UnscaleList { kUnscaleOut, kUnscaleGrad, kUnscaleLists };

template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    unscale_kernel(TensorTable<kUnscaleLists> table, const float* inv_scale_array, double inv_scale_value,
                   float* found_inf) {
  const BlockWork work(table);
  const int s = work.slot;
  const Acc inv_scale = inv_scale_array != nullptr ? static_cast<Acc>(*inv_scale_array) : static_cast<Acc>(inv_scale_value);
  bool saw_non_finite = false;
  for (std::int64_t i = work.begin + threadIdx.x; i < work.end; i += blockDim.x) {
    const Acc x = load_as<Acc>(table.data[kUnscaleGrad][s], table.dtype[kUnscaleGrad][s], i);
    saw_non_finite = saw_non_finite || !isfinite(x);
    store_as(table.data[kUnscaleOut][s], table.dtype[kUnscaleOut][s], i, x * inv_scale);
  }
  // Every writer writes the same value, so the unordered stores need no atomics.
  if (saw_non_finite) *found_inf = 1.0f;
}

__global__ void update_scale_kernel(float* scale, int* growth_tracker, const float* found_inf, ScaleUpdate update) {
  const double current = *scale;
  if (*found_inf != 0.0f) {  // NaN counts as found, as float(nan) is truthy on the CPU
    const double backed_off = current * update.backoff_factor;
    *scale = static_cast<float>(backed_off > update.min_scale ? backed_off : update.min_scale);
    *growth_tracker = 0;
    return;
  }
  const std::int64_t successful = static_cast<std::int64_t>(*growth_tracker) + 1;
  if (successful == update.growth_interval) {
    const double grown = current * update.growth_factor;
    *scale = static_cast<float>(grown < update.max_scale ? grown : update.max_scale);
    *growth_tracker = 0;
  } else {
    *growth_tracker = static_cast<int>(successful);
  }
}

// ------------------------------------------------------------------------------------------------
// Global norm (clip_grad_norm_): each block of the multi-tensor launches reduces its chunk to one
// partial, then one block combines the partials in order, so a result never depends on timing (no
// float atomics).
enum class NormKind { kSumOfSquares, kSumOfAbs, kMaxAbs, kSumOfPowers };

// pow is long: one out-of-line copy per type instead of one inlined into every loop keeps the build short.
__device__ __noinline__ float power_of(float x, float p) { return ::powf(x, p); }
__device__ __noinline__ double power_of(double x, double p) { return ::pow(x, p); }

template <NormKind kKind, typename Acc>
__device__ __forceinline__ Acc norm_term(Acc x, Acc p) {
  if constexpr (kKind == NormKind::kSumOfSquares) {
    return x * x;
  } else if constexpr (kKind == NormKind::kSumOfPowers) {
    return power_of(x < Acc(0) ? -x : x, p);
  } else if constexpr (std::is_same_v<Acc, double>) {
    return ::fabs(x);
  } else {
    return ::fabsf(x);
  }
}

template <NormKind kKind>
struct NormCombine {
  template <typename V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    if constexpr (kKind == NormKind::kMaxAbs) {
      return nn::max_propagating_nan(a, b);  // a NaN anywhere gives NaN, as in PyTorch
    } else {
      return a + b;
    }
  }
};

// This thread's share of elements [begin, end) of `data`, combined in a fixed order; 16-byte loads
// where the chunk is aligned (chunks start at multiples of kChunk elements).
template <NormKind kKind, typename T, typename Acc>
__device__ __forceinline__ Acc chunk_norm_part(const T* data, std::int64_t begin, std::int64_t end, Acc p) {
  constexpr int kWidth = nn::kPackWidth<T>;
  const NormCombine<kKind> combine;
  const T* start = data + begin;
  const std::int64_t count = end - begin;
  Acc part = Acc(0);
  std::int64_t done = 0;
  if (reinterpret_cast<std::uintptr_t>(start) % 16 == 0) {
    const std::int64_t packs = count / kWidth;
    for (std::int64_t k = threadIdx.x; k < packs; k += blockDim.x) {
      const nn::Pack<T, kWidth> pack = nn::load_pack<T, kWidth>(start + k * kWidth);
#pragma unroll
      for (int v = 0; v < kWidth; ++v) {
        part = combine(part, norm_term<kKind>(static_cast<Acc>(to_compute(pack.item[v])), p));
      }
    }
    done = packs * kWidth;
  }
  for (std::int64_t i = done + threadIdx.x; i < count; i += blockDim.x) {
    part = combine(part, norm_term<kKind>(static_cast<Acc>(to_compute(start[i])), p));
  }
  return part;
}

template <NormKind kKind, typename Acc>
__global__ void __launch_bounds__(kThreads) norm_partials_kernel(TensorTable<1> table, Acc p, Acc* partials) {
  const BlockWork work(table);
  const int s = work.slot;
  const void* data = table.data[0][s];
  Acc part;
  switch (table.dtype[0][s]) {
    case ScalarType::Float16:
      part = chunk_norm_part<kKind>(static_cast<const __half*>(data), work.begin, work.end, p);
      break;
    case ScalarType::BFloat16:
      part = chunk_norm_part<kKind>(static_cast<const __nv_bfloat16*>(data), work.begin, work.end, p);
      break;
    case ScalarType::Float64:
      // a call with a float64 array accumulates in float64: only that kernel reads float64
      if constexpr (std::is_same_v<Acc, double>) {
        part = chunk_norm_part<kKind>(static_cast<const double*>(data), work.begin, work.end, p);
        break;
      }
      [[fallthrough]];
    default: part = chunk_norm_part<kKind>(static_cast<const float*>(data), work.begin, work.end, p); break;
  }
  __shared__ Acc scratch[32];
  part = nn::block_reduce(part, NormCombine<kKind>{}, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = part;
}

// One block: the partials combined in order (the max of them for kMaxAbs, else their sum), then the
// root the norm takes (square root, 1/p-th power, or none).
template <typename Acc>
__global__ void __launch_bounds__(kThreads)
    norm_finish_kernel(const Acc* partials, std::int64_t count, NormKind kind, Acc inverse_p, Acc* out) {
  const bool take_max = kind == NormKind::kMaxAbs;
  Acc total = Acc(0);
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    total = take_max ? nn::max_propagating_nan(total, partials[i]) : total + partials[i];
  }
  __shared__ Acc scratch[32];
  total = take_max ? nn::block_reduce(total, NormCombine<NormKind::kMaxAbs>{}, scratch)
                   : nn::block_reduce(total, NormCombine<NormKind::kSumOfSquares>{}, scratch);
  if (threadIdx.x != 0) return;
  if (kind == NormKind::kSumOfSquares) {
    total = nn::sqrt_of(total);
  } else if (kind == NormKind::kSumOfPowers) {
    total = power_of(total, inverse_p);
  }
  *out = total;
}

// ------------------------------------------------------------------------------------------------
// Host side.

// The lists of one call, checked: every present list as long as the first, each tensor's arrays
// contiguous, floating point, the same size and on one device.
template <int kLists>
struct TensorLists {
  const std::vector<DeviceArray>* lists[kLists];
  std::size_t count = 0;

  void check(const char* op) {
    count = lists[0]->size();
    for (int l = 0; l < kLists; ++l) {
      if (lists[l] == nullptr || lists[l]->empty()) continue;
      require(lists[l]->size() == count, op,
              "every list needs one array per parameter (" + std::to_string(count) + "), got " +
                  std::to_string(lists[l]->size()));
    }
    for (std::size_t t = 0; t < count; ++t) {
      const DeviceArray& first = (*lists[0])[t];
      require(first.device() == (*lists[0])[0].device(), op, "every tensor must be on one device");
      for (int l = 0; l < kLists; ++l) {
        if (lists[l] == nullptr || lists[l]->empty()) continue;
        const DeviceArray& a = (*lists[l])[t];
        require(a.numel() == first.numel() && a.is_contiguous() && is_floating_point(a.dtype()) &&
                    a.device() == first.device(),
                op, "tensor " + std::to_string(t) + ": arrays " + format_dims(first.shape()) + " and " +
                        format_dims(a.shape()) + " " + scalar_type_name(a.dtype()) +
                        " must be contiguous floating point arrays of one size on one device");
      }
    }
  }

  bool present(int l) const { return lists[l] != nullptr && !lists[l]->empty(); }

  // Whether any of the lists `which` holds a float64 array (then the math is fp64).
  bool any_float64(std::initializer_list<int> which) const {
    for (int l : which) {
      if (!present(l)) continue;
      for (const DeviceArray& a : *lists[l]) {
        if (a.dtype() == ScalarType::Float64) return true;
      }
    }
    return false;
  }
};

// Runs `launch(table, blocks, stream)` over table-fuls of chunks of every tensor.
template <int kLists, typename Launch>
void multi_tensor_apply(const TensorLists<kLists>& lists, const KernelLaunch& launch, Launch&& run) {
  TensorTable<kLists> table{};
  int tensors = 0, blocks = 0;
  auto flush = [&]() {
    if (blocks > 0) run(table, blocks, launch.stream());
    tensors = 0;
    blocks = 0;
  };
  for (std::size_t t = 0; t < lists.count; ++t) {
    const std::int64_t n = (*lists.lists[0])[t].numel();
    if (n == 0) continue;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    int slot = -1;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      if (blocks == kMaxBlocks) {
        flush();
        slot = -1;
      }
      if (slot < 0) {
        if (tensors == kMaxTensors) flush();
        slot = tensors++;
        table.size[slot] = n;
        table.aligned[slot] = true;
        for (int l = 0; l < kLists; ++l) {
          const bool present = lists.present(l);
          table.data[l][slot] = present ? (*lists.lists[l])[t].data_ptr() : nullptr;
          table.dtype[l][slot] = present ? (*lists.lists[l])[t].dtype() : ScalarType::Float32;
          table.aligned[slot] = table.aligned[slot] && reinterpret_cast<std::uintptr_t>(table.data[l][slot]) % 16 == 0;
        }
      }
      table.block_tensor[blocks] = static_cast<unsigned char>(slot);
      table.block_chunk[blocks] = static_cast<int>(chunk);
      ++blocks;
    }
  }
  flush();
  ADCUDA_CHECK_LAUNCH();
}

// Orders `launch`'s stream after every earlier use of the lists' arrays on other streams.
template <int kLists>
void use_all_on(const TensorLists<kLists>& lists, const KernelLaunch& launch) {
  for (int l = 0; l < kLists; ++l) {
    if (!lists.present(l)) continue;
    for (const DeviceArray& a : *lists.lists[l]) a.storage()->use_on(launch.stream(), launch.device());
  }
}

// The dtype combinations SGD and Adam are compiled for (kOther: anything else).
enum class StepKind {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kFloat16Master,
  kBFloat16Master,
  kFloat16Copy,  // an fp16 working copy of an fp32 master with fp32 gradients
  kBFloat16Copy,
  kOther,
  kKinds
};

// `target`, `param`, `grad`, `state` lists and `master` index the lists of one call.
struct StepLayout {
  int param, grad, master;
  std::vector<int> state;
};

template <int kLists>
StepKind step_kind(const TensorLists<kLists>& lists, const StepLayout& layout, std::size_t t) {
  const ScalarType param = (*lists.lists[layout.param])[t].dtype();
  const bool master = lists.present(layout.master);
  const ScalarType state = master ? ScalarType::Float32 : param;
  const ScalarType grad = (*lists.lists[layout.grad])[t].dtype();
  // the fp32 master's own gradient: the half parameter is only its working copy
  const bool working_copy =
      master && grad == ScalarType::Float32 && (param == ScalarType::Float16 || param == ScalarType::BFloat16);
  if (grad != param && !working_copy) return StepKind::kOther;
  for (int l : layout.state) {
    if (lists.present(l) && (*lists.lists[l])[t].dtype() != state) return StepKind::kOther;
  }
  if (master) {
    if ((*lists.lists[layout.master])[t].dtype() != ScalarType::Float32) return StepKind::kOther;
    if (param == ScalarType::Float16) return working_copy ? StepKind::kFloat16Copy : StepKind::kFloat16Master;
    if (param == ScalarType::BFloat16) return working_copy ? StepKind::kBFloat16Copy : StepKind::kBFloat16Master;
    return StepKind::kOther;
  }
  switch (param) {
    case ScalarType::Float32: return StepKind::kFloat32;
    case ScalarType::Float64: return StepKind::kFloat64;
    case ScalarType::Float16: return StepKind::kFloat16;
    case ScalarType::BFloat16: return StepKind::kBFloat16;
    default: return StepKind::kOther;
  }
}

// A call's tensors split by dtype combination. A tensor of no compiled combination joins the float32
// (or, for a float64 parameter or master, the float64) group through copies of its arrays in that
// type, and `copy_backs` (destination, copy) put the results back after the launches; its master, if
// any, becomes the stepped parameter and is copied into the real parameter.
template <int kLists>
struct StepGroups {
  std::array<std::array<std::vector<DeviceArray>, kLists>, static_cast<int>(StepKind::kKinds)> arrays;
  std::vector<std::pair<DeviceArray, DeviceArray>> copy_backs;

  StepGroups(const TensorLists<kLists>& lists, const StepLayout& layout) {
    for (std::size_t t = 0; t < lists.count; ++t) {
      const StepKind kind = step_kind(lists, layout, t);
      if (kind != StepKind::kOther) {
        auto& group = arrays[static_cast<int>(kind)];
        for (int l = 0; l < kLists; ++l) {
          if (lists.present(l)) group[l].push_back((*lists.lists[l])[t]);
        }
        continue;
      }
      const bool master = lists.present(layout.master);
      const DeviceArray& target = (*lists.lists[master ? layout.master : layout.param])[t];
      const ScalarType acc = target.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
      auto& group = arrays[static_cast<int>(acc == ScalarType::Float64 ? StepKind::kFloat64 : StepKind::kFloat32)];
      const auto in_acc = [&](const DeviceArray& a, bool written) {
        if (a.dtype() == acc) return a;
        DeviceArray copy = astype(a, acc);
        if (written) copy_backs.emplace_back(a, copy);
        return copy;
      };
      const DeviceArray stepped = in_acc(target, true);
      group[layout.param].push_back(stepped);
      if (master) copy_backs.emplace_back((*lists.lists[layout.param])[t], stepped);
      group[layout.grad].push_back(in_acc((*lists.lists[layout.grad])[t], false));
      for (int l : layout.state) {
        if (lists.present(l)) group[l].push_back(in_acc((*lists.lists[l])[t], true));
      }
    }
  }

  // The lists of one group, or count 0 when it has no tensor.
  TensorLists<kLists> lists(StepKind kind) const {
    TensorLists<kLists> out{};
    const auto& group = arrays[static_cast<int>(kind)];
    for (int l = 0; l < kLists; ++l) out.lists[l] = &group[l];
    out.count = group[0].size();
    return out;
  }

  void copy_results_back() const {
    for (const auto& [destination, copy] : copy_backs) copy_(destination, copy);
  }
};

// Calls run(TypeTag<StepTypes<...>>, lists) for every group of `groups` that has tensors.
template <int kLists, typename Run>
void for_each_step_group(const StepGroups<kLists>& groups, Run&& run) {
  const auto group = [&](StepKind kind, auto types) {
    const TensorLists<kLists> lists = groups.lists(kind);
    if (lists.count > 0) run(types, lists);
  };
  group(StepKind::kFloat32, TypeTag<StepTypes<float, float, float, void>>{});
  group(StepKind::kFloat64, TypeTag<StepTypes<double, double, double, void>>{});
  group(StepKind::kFloat16, TypeTag<StepTypes<__half, __half, __half, void>>{});
  group(StepKind::kBFloat16, TypeTag<StepTypes<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, void>>{});
  group(StepKind::kFloat16Master, TypeTag<StepTypes<__half, __half, float, float>>{});
  group(StepKind::kBFloat16Master, TypeTag<StepTypes<__nv_bfloat16, __nv_bfloat16, float, float>>{});
  group(StepKind::kFloat16Copy, TypeTag<StepTypes<__half, float, float, float>>{});
  group(StepKind::kBFloat16Copy, TypeTag<StepTypes<__nv_bfloat16, float, float, float>>{});
}

}  // namespace

void sgd_step_(const std::vector<DeviceArray>& params, const std::vector<DeviceArray>& grads,
               const std::vector<DeviceArray>& bufs, const std::vector<DeviceArray>& masters, const SgdOptions& options) {
  const char* op = "sgd_step_";
  TensorLists<kSgdLists> lists{{&params, &grads, &bufs, &masters}};
  lists.check(op);
  require(options.momentum == 0.0 || bufs.size() == params.size(), op, "momentum needs one buffer per parameter");
  if (lists.count == 0) return;
  const SgdConstants constants{options.lr,           options.momentum, 1.0 - options.dampening,
                               options.weight_decay, options.nesterov, options.first_step};
  KernelLaunch launch(params[0]);
  use_all_on(lists, launch);
  const StepGroups<kSgdLists> groups(lists, {kSgdParam, kSgdGrad, kSgdMaster, {kSgdBuf}});
  for_each_step_group(groups, [&](auto types, const TensorLists<kSgdLists>& group) {
    using Types = typename decltype(types)::type;
    multi_tensor_apply(group, launch, [&](const auto& table, int blocks, cudaStream_t stream) {
      sgd_kernel<Types><<<blocks, kThreads, 0, stream>>>(table, constants);
    });
  });
  groups.copy_results_back();
}

void adam_step_(const std::vector<DeviceArray>& params, const std::vector<DeviceArray>& grads,
                const std::vector<DeviceArray>& exp_avgs, const std::vector<DeviceArray>& exp_avg_sqs,
                const std::vector<DeviceArray>& masters, const std::vector<DeviceArray>& max_exp_avg_sqs,
                const AdamOptions& options, const DeviceArray* grad_multiplier) {
  const char* op = "adam_step_";
  TensorLists<kAdamLists> lists{{&params, &grads, &exp_avgs, &exp_avg_sqs, &max_exp_avg_sqs, &masters}};
  lists.check(op);
  require(exp_avgs.size() == params.size() && exp_avg_sqs.size() == params.size(), op,
          "Adam needs both moments for every parameter");
  require(options.step >= 1, op, "the step count is 1-based, got " + std::to_string(options.step));
  if (lists.count == 0) return;
  // as the CPU backend: the bias corrections in fp64 on the host
  const double bias_correction1 = 1.0 - std::pow(options.beta1, static_cast<double>(options.step));
  const double bias_correction2_sqrt = std::sqrt(1.0 - std::pow(options.beta2, static_cast<double>(options.step)));
  AdamConstants constants{};
  constants.decay_factor = 1.0 - options.lr * options.weight_decay;
  constants.weight_decay = options.weight_decay;
  constants.beta1_complement = 1.0 - options.beta1;
  constants.beta2 = options.beta2;
  constants.beta2_complement = 1.0 - options.beta2;
  constants.bias_correction2_sqrt = bias_correction2_sqrt;
  constants.eps = options.eps;
  constants.step_size = options.lr / bias_correction1;
  constants.decoupled = options.decoupled;
  if (grad_multiplier != nullptr) {
    require(grad_multiplier->numel() == 1 && grad_multiplier->dtype() == ScalarType::Float32 &&
                grad_multiplier->device() == params[0].device(),
            op, "the gradient multiplier must be a one-element float32 array on the parameters' device");
    constants.grad_multiplier = grad_multiplier->data<float>();
  }
  KernelLaunch launch(params[0]);
  use_all_on(lists, launch);
  if (grad_multiplier != nullptr) grad_multiplier->storage()->use_on(launch.stream(), launch.device());
  const StepGroups<kAdamLists> groups(lists, {kAdamParam, kAdamGrad, kAdamMaster,
                                              {kAdamExpAvg, kAdamExpAvgSq, kAdamMaxExpAvgSq}});
  for_each_step_group(groups, [&](auto types, const TensorLists<kAdamLists>& group) {
    using Types = typename decltype(types)::type;
    multi_tensor_apply(group, launch, [&](const auto& table, int blocks, cudaStream_t stream) {
      adam_kernel<Types><<<blocks, kThreads, 0, stream>>>(table, constants);
    });
  });
  groups.copy_results_back();
}

DeviceArray unscale_and_check_(const std::vector<DeviceArray>& outs, const std::vector<DeviceArray>& grads,
                               const DeviceArray* inv_scale_array, double inv_scale_value, int device) {
  const char* op = "unscale_and_check_";
  TensorLists<kUnscaleLists> lists{{&outs, &grads}};
  lists.check(op);
  require(grads.size() == outs.size(), op, "one output per gradient");
  if (inv_scale_array != nullptr) {
    require(inv_scale_array->numel() == 1 && inv_scale_array->dtype() == ScalarType::Float32 &&
                inv_scale_array->device() == device,
            op, "the inverse scale must be a one-element float32 array on cuda:" + std::to_string(device));
  }
  DeviceArray found_inf = DeviceArray::empty({}, ScalarType::Float32, device);
  KernelLaunch launch(found_inf);
  ADCUDA_CHECK(cudaMemsetAsync(found_inf.data_ptr(), 0, sizeof(float), launch.stream()));
  if (lists.count == 0) return found_inf;
  require(grads[0].device() == device, op, "the gradients must be on cuda:" + std::to_string(device));
  use_all_on(lists, launch);
  if (inv_scale_array != nullptr) inv_scale_array->storage()->use_on(launch.stream(), launch.device());
  const float* inv_scale_pointer = inv_scale_array != nullptr ? inv_scale_array->data<float>() : nullptr;
  const bool wide = lists.any_float64({kUnscaleOut, kUnscaleGrad});
  multi_tensor_apply(lists, launch, [&](const auto& table, int blocks, cudaStream_t stream) {
    if (wide) {
      unscale_kernel<double><<<blocks, kThreads, 0, stream>>>(table, inv_scale_pointer, inv_scale_value,
                                                              found_inf.data<float>());
    } else {
      unscale_kernel<float><<<blocks, kThreads, 0, stream>>>(table, inv_scale_pointer, inv_scale_value,
                                                             found_inf.data<float>());
    }
  });
  return found_inf;
}

void update_scale_(const DeviceArray& scale, const DeviceArray& growth_tracker, const DeviceArray& found_inf,
                   const ScaleUpdate& update) {
  const char* op = "update_scale_";
  require(scale.numel() == 1 && scale.dtype() == ScalarType::Float32, op, "the scale must be one float32 element");
  require(growth_tracker.numel() == 1 && growth_tracker.dtype() == ScalarType::Int32, op,
          "the growth tracker must be one int32 element");
  require(found_inf.numel() == 1 && found_inf.dtype() == ScalarType::Float32, op,
          "found_inf must be one float32 element");
  KernelLaunch launch(scale, growth_tracker, found_inf);
  update_scale_kernel<<<1, 1, 0, launch.stream()>>>(scale.data<float>(), growth_tracker.data<int>(),
                                                    found_inf.data<float>(), update);
  ADCUDA_CHECK_LAUNCH();
}

DeviceArray global_norm(const std::vector<DeviceArray>& arrays, double norm_type, int device) {
  const char* op = "global_norm";
  require(norm_type > 0.0, op, "norm_type must be positive or inf, got " + std::to_string(norm_type));
  TensorLists<1> lists{{&arrays}};
  lists.check(op);
  const int target = arrays.empty() ? device : arrays[0].device();
  const bool wide = lists.any_float64({0});
  std::int64_t chunks = 0;
  for (const DeviceArray& a : arrays) chunks += (a.numel() + kChunk - 1) / kChunk;
  DeviceArray out = DeviceArray::empty({}, wide ? ScalarType::Float64 : ScalarType::Float32, target);
  DeviceArray partials = DeviceArray::empty({std::max<std::int64_t>(chunks, 1)}, out.dtype(), target);
  KernelLaunch launch(out, partials);
  use_all_on(lists, launch);
  const auto run = [&](auto acc_tag, auto kind_tag) {
    using Acc = typename decltype(acc_tag)::type;
    constexpr NormKind kKind = decltype(kind_tag)::value;
    Acc* next = partials.data<Acc>();
    multi_tensor_apply(lists, launch, [&](const auto& table, int blocks, cudaStream_t stream) {
      norm_partials_kernel<kKind, Acc><<<blocks, kThreads, 0, stream>>>(table, static_cast<Acc>(norm_type), next);
      next += blocks;
    });
    norm_finish_kernel<Acc><<<1, kThreads, 0, launch.stream()>>>(partials.data<Acc>(), chunks, kKind,
                                                                 static_cast<Acc>(1.0 / norm_type), out.data<Acc>());
    ADCUDA_CHECK_LAUNCH();
  };
  const auto with_kind = [&](auto acc_tag) {
    using Kind = NormKind;
    if (norm_type == 2.0) {
      run(acc_tag, std::integral_constant<Kind, Kind::kSumOfSquares>{});
    } else if (norm_type == 1.0) {
      run(acc_tag, std::integral_constant<Kind, Kind::kSumOfAbs>{});
    } else if (std::isinf(norm_type)) {
      run(acc_tag, std::integral_constant<Kind, Kind::kMaxAbs>{});
    } else {
      run(acc_tag, std::integral_constant<Kind, Kind::kSumOfPowers>{});
    }
  };
  if (wide) {
    with_kind(TypeTag<double>{});
  } else {
    with_kind(TypeTag<float>{});
  }
  return out;
}

}  // namespace adcuda
