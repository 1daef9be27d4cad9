// What every attention kernel is given (attention.cu builds it from the primitive's arrays): the
// operands' pointers and strides, the mask, causality, scale and dropout, and the batch walk. Shared by
// the CUDA-core kernels (attention_simt.cuh) and the tensor-core ones (attention_flash.cuh).
#pragma once

#include <cstdint>

#include "attention_dropout.cuh"
#include "runtime/dispatch.cuh"
#include "runtime/launch.cuh"

namespace adcuda {

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
  AttentionDropout dropout;
  StridedIndexer<4, std::int64_t> batch_offsets;  // q, k, v, mask: element offsets of batch entry b
};

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

}  // namespace adcuda
