// Scaled dot-product attention, forward and backward: the CUDA backend's attention and
// attention_backward primitives (host side). Two kernel families compute it:
//   - attention_flash.cuh: tensor cores, FlashAttention-2 style, for fp16 and bf16 with head dims up to
//     128 that are multiples of 8 (compiled for 32, 64 and 128; 80 and 96 run in the 128 kernels);
//   - attention_simt.cuh: CUDA cores, for fp32 and fp64, other head dims, and GPUs (or builds) without
//     sm_80 tensor-core code.
// choose_attention_path is the one place that picks between them. Both take the same AttentionArgs
// (attention_args.cuh), dropout included (attention_dropout.cuh), and give the same results up to
// rounding.
#include "attention.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attention_args.cuh"
#include "attention_flash.cuh"
#include "attention_simt.cuh"
#include "launch_utils.cuh"
#include "runtime/copy.h"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/launch.cuh"

namespace adcuda {
namespace {

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

// The dropout of one call: the keep threshold and scale from p (0 <= p <= 1), and the tile counts of
// the counter layout (attention_dropout.cuh). The CPU backend computes the threshold the same way.
AttentionDropout make_dropout(const DropoutDraw& draw, std::int64_t L, std::int64_t S, const char* op) {
  require(draw.p >= 0.0 && draw.p <= 1.0, op,
          "dropout probability has to be between 0 and 1, but got " + std::to_string(draw.p));
  AttentionDropout dropout{};
  dropout.enabled = draw.p > 0.0;
  // The fused attention kernels take their Philox key by value, which a graph would replay unchanged.
  if (dropout.enabled && capture_philox_state(current_stream()) != nullptr) {
    throw GraphCaptureError(std::string(op) +
                            " with dropout_p > 0 cannot be captured into a CUDA graph yet (its dropout would draw "
                            "the same numbers on every replay); capture it with dropout_p=0 or in eval mode");
  }
  constexpr double kWords = 4294967296.0;  // 2^32
  dropout.keep_threshold = static_cast<std::uint32_t>(std::min(std::floor((1.0 - draw.p) * kWords), kWords - 1.0));
  dropout.scale = draw.p < 1.0 ? 1.0 / (1.0 - draw.p) : 0.0;
  dropout.seed = draw.seed;
  dropout.offset = draw.offset;
  dropout.query_tiles = (L + 15) / 16;
  dropout.key_tiles = (S + 15) / 16;
  return dropout;
}

// The checked shapes and strides of one call, shared by the forward and the backward.
AttentionArgs make_args(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v, const DeviceArray* mask,
                        bool is_causal, double scale, const DropoutDraw& dropout, Dims& batch, const char* op) {
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
  args.dropout = make_dropout(dropout, L, S, op);
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

// The CUDA-core kernels' dtypes: float16 and bfloat16 reach them as float32 (simt_through_float32).
template <typename F>
void dispatch_simt(ScalarType type, const char* op, F&& f) {
  if (type == ScalarType::Float32) return f(TypeTag<float>{});
  if (type == ScalarType::Float64) return f(TypeTag<double>{});
  throw std::logic_error(std::string(op) + ": the CUDA-core kernels were given " + scalar_type_name(type) +
                         " (half types go through float32)");
}

// ------------------------------------------------------------------------------------------------
// Which kernels run.

enum class AttentionPath { kCudaCore, kTensorCore };

// Whether `device` runs the tensor-core kernels: compute capability 8.0 or newer, and this build's code
// for it compiled from sm_80+ PTX (a build for older targets alone would run them JIT-compiled from
// PTX whose kernels only trap). Asked once per device.
bool tensor_cores_usable(int device) {
  if (device_facts(device).major < 8) return false;
  static std::mutex mutex;
  static std::vector<int> known;  // per device: -1 not asked yet, 0 no, 1 yes
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(known.size())) known.resize(device + 1, -1);
  if (known[device] < 0) {
    DeviceGuard guard(device);  // the attributes are those of the current device's code
    cudaFuncAttributes attributes{};
    ADCUDA_CHECK(cudaFuncGetAttributes(&attributes, flash::flash_forward_kernel<__half, 64, false>));
    known[device] = attributes.ptxVersion >= 80 ? 1 : 0;
  }
  return known[device] == 1;
}

// The one dispatch decision: tensor cores for fp16/bf16 whose head dims (both E and Ev) are multiples
// of 8 up to 128 (whole 16-byte cp.async chunks per row, at most the 128-wide tile) on a GPU with
// sm_80 tensor-core code; CUDA cores for everything else (fp32, fp64, other head dims, older GPUs).
AttentionPath choose_attention_path(ScalarType dtype, int E, int Ev, int device) {
  const bool half_precision = dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16;
  const bool head_dims_fit = E > 0 && Ev > 0 && E <= 128 && Ev <= 128 && E % 8 == 0 && Ev % 8 == 0;
  if (!half_precision || !head_dims_fit) return AttentionPath::kCudaCore;
  return tensor_cores_usable(device) ? AttentionPath::kTensorCore : AttentionPath::kCudaCore;
}

// Whether the tensor-core kernels can cp.async `a`'s rows as they are: a 16-byte aligned start and
// every stride but the last (rows, batch dims) a multiple of 8 elements.
bool rows_are_16_byte_aligned(const DeviceArray& a) {
  if (reinterpret_cast<std::uintptr_t>(a.data_ptr()) % 16 != 0) return false;
  for (int d = 0; d + 1 < a.ndim(); ++d) {
    if (a.shape()[d] > 1 && a.strides()[d] % 8 != 0) return false;
  }
  return true;
}

// `a`, or a fresh contiguous copy of it when its rows are not aligned for cp.async (an offset view):
// one pass over the operand, small next to attention's L x S work on it.
DeviceArray with_aligned_rows(const DeviceArray& a) { return rows_are_16_byte_aligned(a) ? a : astype(a, a.dtype()); }

// float16/bfloat16 on the CUDA-core path (head dims the tensor-core kernels do not take, or a GPU
// without them) run the float32 kernels between casts: those kernels read half types into float32,
// compute in float32 (the same block shapes: both keep float32 in shared memory) and round each result
// once, so the values are the same by construction, and 8 kernels fewer are compiled. The casts cost
// one pass over the operands, small next to the L x S work of this rare path.
bool simt_through_float32(ScalarType dtype, const AttentionArgs& args, int device) {
  return (dtype == ScalarType::Float16 || dtype == ScalarType::BFloat16) &&
         choose_attention_path(dtype, args.E, args.Ev, device) == AttentionPath::kCudaCore;
}

DeviceArray as_float32(const DeviceArray& a) { return astype(a, ScalarType::Float32); }

// An additive mask as float32 (a bool mask as it is).
std::optional<DeviceArray> float32_mask(const DeviceArray* mask) {
  if (mask == nullptr || mask->dtype() == ScalarType::Bool) return std::nullopt;
  return as_float32(*mask);
}

// Runs `f(tag, kD, kDropout)` for the tensor-core kernels: kD the head-dim tile for max(E, Ev), and
// kDropout whether dropout is drawn (a compile-time choice: the draws' registers would otherwise be
// reserved in every kernel).
template <typename F>
void dispatch_flash(ScalarType dtype, const AttentionArgs& args, const char* op, F&& f) {
  auto with_dropout = [&](auto tag, auto head_dim) {
    if (args.dropout.enabled) {
      f(tag, head_dim, std::true_type{});
    } else {
      f(tag, head_dim, std::false_type{});
    }
  };
  dispatch_type(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (is_reduced_float_v<T>) {
      switch (flash::head_dim_tile(std::max(args.E, args.Ev))) {
        case 32: with_dropout(tag, std::integral_constant<int, 32>{}); break;
        case 64: with_dropout(tag, std::integral_constant<int, 64>{}); break;
        default: with_dropout(tag, std::integral_constant<int, 128>{}); break;
      }
    }
  });
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// ------------------------------------------------------------------------------------------------
// Launches.

void flash_forward(const AttentionArgs& args, ScalarType dtype, const DeviceArray& out, const DeviceArray& lse,
                   const KernelLaunch& launch, const char* op) {
  dispatch_flash(dtype, args, op, [&](auto tag, auto head_dim, auto dropout) {
    using T = typename decltype(tag)::type;
    constexpr int kD = decltype(head_dim)::value;
    constexpr bool kDropout = decltype(dropout)::value;
    constexpr int bytes = flash::ForwardTiles<kD, kDropout>::kBytes;
    allow_shared_bytes(flash::flash_forward_kernel<T, kD, kDropout>, bytes, launch.device());
    const std::int64_t blocks = args.batch * ceil_div(args.L, flash::kBlockQueries);
    require(blocks < (std::int64_t(1) << 31), op,
            "too many query blocks (" + std::to_string(blocks) + ") for one launch");
    flash::flash_forward_kernel<T, kD, kDropout>
        <<<static_cast<unsigned>(blocks), flash::kForwardThreads, bytes, launch.stream()>>>(args, out.data<T>(),
                                                                                     lse.data<float>());
  });
}

void simt_forward(const AttentionArgs& args, ScalarType dtype, const DeviceArray& out, const DeviceArray& lse,
                  const KernelLaunch& launch, const char* op) {
  using simt::kTile;
  using simt::odd_stride;
  dispatch_simt(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    const auto [warps, bytes] = block_shape(std::int64_t(kTile) * (odd_stride(args.E) + args.Ev),
                                            args.E + args.Ev + kTile, sizeof(Acc), launch.device(), args, op);
    allow_shared_bytes(simt::attention_forward_kernel<T>, bytes, launch.device());
    const std::int64_t items = args.batch * ((args.L + warps - 1) / warps);
    simt::attention_forward_kernel<T><<<work_blocks(items), warps * 32, bytes, launch.stream()>>>(
        args, out.data<T>(), lse.data<Acc>());
  });
}

// Scratch of the tensor-core backward: delta and the lse in log2 units over rows padded to whole
// query steps, and the fp32 dq accumulator over the same rows.
struct FlashBackwardScratch {
  std::int64_t padded_L;
  DeviceArray lse_log2, delta, dq_accum;

  static FlashBackwardScratch make(const AttentionArgs& args, int device) {
    const std::int64_t padded_L = ceil_div(args.L, flash::kPaddedRows) * flash::kPaddedRows;
    const std::int64_t rows = args.batch * padded_L;
    return {padded_L, DeviceArray::empty({rows}, ScalarType::Float32, device),
            DeviceArray::empty({rows}, ScalarType::Float32, device),
            DeviceArray::empty({rows * args.E}, ScalarType::Float32, device)};
  }
};

void flash_backward(const AttentionArgs& args, ScalarType dtype, const DeviceArray& g, const DeviceArray& out,
                    const DeviceArray& lse, const FlashBackwardScratch& scratch, const DeviceArray& dq,
                    const DeviceArray& dk, const DeviceArray& dv, const KernelLaunch& launch, const char* op) {
  const std::int64_t padded_rows = args.batch * scratch.padded_L;
  ADCUDA_CHECK(cudaMemsetAsync(scratch.dq_accum.data_ptr(), 0, scratch.dq_accum.numel() * sizeof(float),
                               launch.stream()));
  dispatch_flash(dtype, args, op, [&](auto tag, auto head_dim, auto dropout) {
    using T = typename decltype(tag)::type;
    constexpr int kD = decltype(head_dim)::value;
    constexpr bool kDropout = decltype(dropout)::value;
    flash::flash_backward_prepare_kernel<T><<<work_blocks(ceil_div(padded_rows, 8)), 256, 0, launch.stream()>>>(
        g.data<T>(), out.data<T>(), lse.data<float>(), scratch.lse_log2.data<float>(), scratch.delta.data<float>(),
        args.batch, args.L, scratch.padded_L, args.Ev);
    ADCUDA_CHECK_LAUNCH();
    const std::int64_t blocks = args.batch * ceil_div(args.S, flash::kBlockKeys);
    if (blocks > 0) {
      require(blocks < (std::int64_t(1) << 31), op,
              "too many key blocks (" + std::to_string(blocks) + ") for one launch");
      constexpr int bytes = flash::BackwardTiles<kD>::kBytes;
      allow_shared_bytes(flash::flash_backward_kernel<T, kD, kDropout>, bytes, launch.device());
      flash::flash_backward_kernel<T, kD, kDropout>
          <<<static_cast<unsigned>(blocks), flash::kBackwardThreads, bytes, launch.stream()>>>(
              args, g.data<T>(), scratch.lse_log2.data<float>(), scratch.delta.data<float>(), scratch.padded_L,
          scratch.dq_accum.data<float>(), dk.data<T>(), dv.data<T>());
      ADCUDA_CHECK_LAUNCH();
    }
    if (dq.numel() > 0) {
      flash::flash_dq_convert_kernel<T><<<grid_size(dq.numel()), kBlockSize, 0, launch.stream()>>>(
          scratch.dq_accum.data<float>(), dq.data<T>(), args.batch, args.L, scratch.padded_L, args.E,
          static_cast<float>(args.scale));
    }
  });
}

void simt_backward(const AttentionArgs& args, ScalarType dtype, const DeviceArray& g, const DeviceArray& out,
                   const DeviceArray& lse, const DeviceArray& delta, const DeviceArray& dq, const DeviceArray& dk,
                   const DeviceArray& dv, const KernelLaunch& launch, const char* op) {
  using simt::kTile;
  using simt::odd_stride;
  const std::int64_t query_rows = args.batch * args.L, key_rows = args.batch * args.S;
  dispatch_simt(dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = compute_t<T>;
    const int device = launch.device();
    if (query_rows > 0) {
      simt::attention_delta_kernel<T><<<work_blocks((query_rows + 7) / 8), 256, 0, launch.stream()>>>(
          g.data<T>(), out.data<T>(), delta.data<Acc>(), query_rows, args.Ev);
      const auto [warps, bytes] =
          block_shape(std::int64_t(kTile) * (odd_stride(args.E) + odd_stride(args.Ev)), 2 * args.E + args.Ev + kTile,
                      sizeof(Acc), device, args, op);
      allow_shared_bytes(simt::attention_dq_kernel<T>, bytes, device);
      simt::attention_dq_kernel<T><<<work_blocks(args.batch * ((args.L + warps - 1) / warps)), warps * 32, bytes,
                                     launch.stream()>>>(args, g.data<T>(), lse.data<Acc>(), delta.data<Acc>(),
                                                        dq.data<T>());
    }
    if (key_rows > 0) {
      const auto [warps, bytes] =
          block_shape(std::int64_t(kTile) * (odd_stride(args.E) + odd_stride(args.Ev) + 2),
                      2 * args.E + 2 * args.Ev + 2 * kTile, sizeof(Acc), device, args, op);
      allow_shared_bytes(simt::attention_dkdv_kernel<T>, bytes, device);
      simt::attention_dkdv_kernel<T><<<work_blocks(args.batch * ((args.S + warps - 1) / warps)), warps * 32, bytes,
                                       launch.stream()>>>(args, g.data<T>(), lse.data<Acc>(), delta.data<Acc>(),
                                                          dk.data<T>(), dv.data<T>());
    }
  });
}

}  // namespace

std::pair<DeviceArray, DeviceArray> attention(const DeviceArray& q, const DeviceArray& k, const DeviceArray& v,
                                              const DeviceArray* mask, bool is_causal, double scale,
                                              const DropoutDraw& dropout) {
  const char* op = "attention";
  Dims batch;
  AttentionArgs args = make_args(q, k, v, mask, is_causal, scale, dropout, batch, op);
  if (simt_through_float32(q.dtype(), args, q.device())) {
    const std::optional<DeviceArray> mask32 = float32_mask(mask);
    auto [out32, lse32] = attention(as_float32(q), as_float32(k), as_float32(v), mask32 ? &*mask32 : mask, is_causal,
                                    scale, dropout);
    return {astype(out32, q.dtype()), lse32};
  }
  DeviceArray out = DeviceArray::empty(with_tail(batch, {args.L, args.Ev}), q.dtype(), q.device());
  DeviceArray lse = DeviceArray::empty(with_tail(batch, {args.L}), statistics_type(q.dtype()), q.device());
  if (lse.numel() == 0) return {out, lse};
  if (choose_attention_path(q.dtype(), args.E, args.Ev, q.device()) == AttentionPath::kTensorCore) {
    const DeviceArray qa = with_aligned_rows(q), ka = with_aligned_rows(k), va = with_aligned_rows(v);
    args = make_args(qa, ka, va, mask, is_causal, scale, dropout, batch, op);
    KernelLaunch launch(out, lse, qa, ka, va);
    if (mask != nullptr) mask->storage()->use_on(launch.stream(), launch.device());
    flash_forward(args, q.dtype(), out, lse, launch, op);
  } else {
    KernelLaunch launch(out, lse, q, k, v);
    if (mask != nullptr) mask->storage()->use_on(launch.stream(), launch.device());
    simt_forward(args, q.dtype(), out, lse, launch, op);
  }
  ADCUDA_CHECK_LAUNCH();
  return {out, lse};
}

DeviceArray attention_dropout_mask(const Dims& shape, const DropoutDraw& dropout, int device) {
  const char* op = "attention_dropout_mask";
  require(shape.size() >= 2, op, "shape " + format_dims(shape) + " needs at least 2 dims (..., L, S)");
  DeviceArray keep = DeviceArray::empty(shape, ScalarType::Bool, device);
  if (keep.numel() == 0) return keep;
  const std::int64_t L = shape[shape.size() - 2], S = shape.back();
  const AttentionDropout draw = make_dropout(dropout, L, S, op);
  const std::int64_t batch = keep.numel() / (L * S);
  KernelLaunch launch(keep);
  attention_dropout_mask_kernel<<<work_blocks(ceil_div(batch * draw.query_tiles * draw.key_tiles * 64, 256)), 256,
                                  0, launch.stream()>>>(draw, keep.data<bool>(), batch, L, S);
  ADCUDA_CHECK_LAUNCH();
  return keep;
}

std::string attention_kernel_path(const DeviceArray& q, const DeviceArray& v) {
  require(q.ndim() >= 1 && v.ndim() >= 1, "attention_kernel_path", "q and v need a head dim");
  const auto E = static_cast<int>(std::min<std::int64_t>(q.shape().back(), 1 << 20));
  const auto Ev = static_cast<int>(std::min<std::int64_t>(v.shape().back(), 1 << 20));
  return choose_attention_path(q.dtype(), E, Ev, q.device()) == AttentionPath::kTensorCore ? "tensor cores"
                                                                                           : "cuda cores";
}

std::tuple<DeviceArray, DeviceArray, DeviceArray> attention_backward(const DeviceArray& g, const DeviceArray& q,
                                                                     const DeviceArray& k, const DeviceArray& v,
                                                                     const DeviceArray& out, const DeviceArray& lse,
                                                                     const DeviceArray* mask, bool is_causal,
                                                                     double scale, const DropoutDraw& dropout) {
  const char* op = "attention_backward";
  Dims batch;
  AttentionArgs args = make_args(q, k, v, mask, is_causal, scale, dropout, batch, op);
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
  if (simt_through_float32(q.dtype(), args, q.device())) {
    const std::optional<DeviceArray> mask32 = float32_mask(mask);
    auto [dq32, dk32, dv32] = attention_backward(as_float32(g), as_float32(q), as_float32(k), as_float32(v),
                                                 as_float32(out), lse, mask32 ? &*mask32 : mask, is_causal, scale,
                                                 dropout);
    return {astype(dq32, q.dtype()), astype(dk32, q.dtype()), astype(dv32, q.dtype())};
  }
  DeviceArray dq = DeviceArray::empty(with_tail(batch, {args.L, args.E}), q.dtype(), q.device());
  DeviceArray dk = DeviceArray::empty(with_tail(batch, {args.S, args.E}), q.dtype(), q.device());
  DeviceArray dv = DeviceArray::empty(with_tail(batch, {args.S, args.Ev}), q.dtype(), q.device());
  if (args.batch * args.L == 0 && args.batch * args.S == 0) return {dq, dk, dv};
  if (choose_attention_path(q.dtype(), args.E, args.Ev, q.device()) == AttentionPath::kTensorCore) {
    const DeviceArray qa = with_aligned_rows(q), ka = with_aligned_rows(k), va = with_aligned_rows(v);
    const DeviceArray ga = with_aligned_rows(g);
    args = make_args(qa, ka, va, mask, is_causal, scale, dropout, batch, op);
    const FlashBackwardScratch scratch = FlashBackwardScratch::make(args, q.device());
    KernelLaunch launch(dq, dk, dv, scratch.lse_log2, scratch.delta, scratch.dq_accum, ga, qa, ka, va, out, lse);
    if (mask != nullptr) mask->storage()->use_on(launch.stream(), launch.device());
    flash_backward(args, q.dtype(), ga, out, lse, scratch, dq, dk, dv, launch, op);
  } else {
    DeviceArray delta = DeviceArray::empty({args.batch * args.L}, stats, q.device());
    KernelLaunch launch(dq, dk, dv, delta, g, q, k, v, out, lse);
    if (mask != nullptr) mask->storage()->use_on(launch.stream(), launch.device());
    simt_backward(args, q.dtype(), g, out, lse, delta, dq, dk, dv, launch, op);
  }
  ADCUDA_CHECK_LAUNCH();
  return {dq, dk, dv};
}

}  // namespace adcuda
