#include "runtime/copy.h"

#include <stdexcept>
#include <string>
#include <type_traits>

#include "runtime/device_errors.h"
#include "runtime/dispatch.cuh"
#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/launch.cuh"
#include "runtime/pinned_pool.h"
#include "runtime/stream.h"

namespace adcuda {

namespace {

template <typename Dst, typename Src, typename index_t>
__global__ void copy_strided_kernel(Dst* dst, const Src* src, std::int64_t n, StridedIndexer<2, index_t> indexer) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    index_t offsets[2];
    indexer.offsets(static_cast<index_t>(i), offsets);
    dst[offsets[0]] = convert<Dst>(src[offsets[1]]);
  }
}

template <typename T, typename index_t>
__global__ void fill_kernel(T* dst, std::int64_t n, StridedIndexer<1, index_t> indexer, T value) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) {
    index_t offsets[1];
    indexer.offsets(static_cast<index_t>(i), offsets);
    dst[offsets[0]] = value;
  }
}

template <typename T, typename Wide>
__global__ void arange_kernel(T* out, std::int64_t n, Wide start, Wide step) {
  ADCUDA_GRID_STRIDE_LOOP(i, n) { out[i] = convert<T>(static_cast<Wide>(start + static_cast<Wide>(i) * step)); }
}

template <typename T>
T scalar_as(const Scalar& value) {
  switch (value.kind) {
    case Scalar::Kind::Bool: return convert<T>(value.as_bool);
    case Scalar::Kind::Int: return convert<T>(value.as_int);
    case Scalar::Kind::Float: return convert<T>(value.as_float);
  }
  return convert<T>(value.as_float);
}

// A contiguous copy of `src` (same dtype) on `device`.
DeviceArray copy_to_device(const DeviceArray& src, int device) {
  DeviceArray packed = contiguous(src);
  DeviceArray out = DeviceArray::empty(packed.shape(), packed.dtype(), device);
  if (out.numel() == 0) return out;
  KernelLaunch launch(out);
  packed.storage()->use_on(launch.stream(), launch.device());
  ADCUDA_CHECK(cudaMemcpyPeerAsync(out.data_ptr(), device, packed.data_ptr(), packed.device(), out.nbytes(),
                                   launch.stream()));
  return out;
}

bool same_view(const DeviceArray& a, const DeviceArray& b) {
  return a.data_ptr() == b.data_ptr() && a.dtype() == b.dtype() && a.strides() == b.strides();
}

// Casts between two of bool, int32, int64, float16 and bfloat16 (other than int32 <-> int64) run as
// two casts through float32: convert() computes them through float32 anyway (or, for a bool result,
// compares with zero, which float32 preserves for these types), so the values are the same. It saves
// 18 of the 49 dtype pairs' kernels, twice (two index types), for casts no training step runs often;
// the common ones (to and from float32 and float64, int32 <-> int64, same dtype) stay one pass.
template <typename Dst, typename Src>
constexpr bool kCastsThroughFloat32 = !std::is_same_v<Dst, Src> && !std::is_floating_point_v<Dst> &&
                                      !std::is_floating_point_v<Src> &&
                                      !(std::is_integral_v<Dst> && std::is_integral_v<Src> &&
                                        !std::is_same_v<Dst, bool> && !std::is_same_v<Src, bool>);

bool casts_through_float32(ScalarType dst, ScalarType src) {
  return dispatch_type(dst, "copy_", [&](auto dst_tag) {
    return dispatch_type(src, "copy_", [&](auto src_tag) {
      return kCastsThroughFloat32<typename decltype(dst_tag)::type, typename decltype(src_tag)::type>;
    });
  });
}

// dst = src for operands a StridedIndexer can index (at most kMaxDims dims after merging).
void launch_cast_copy_part(const DeviceArray& dst, const DeviceArray& src) {
  const std::int64_t n = dst.numel();
  if (casts_through_float32(dst.dtype(), src.dtype())) {
    // Stream-ordered: the caching allocator reuses `wide` only after the second cast has run.
    const DeviceArray wide = DeviceArray::empty(dst.shape(), ScalarType::Float32, dst.device());
    launch_cast_copy_part(wide, src);
    launch_cast_copy_part(dst, wide);
    return;
  }
  KernelLaunch launch(dst, src);
  if (dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype()) {
    ADCUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                                 launch.stream()));
    return;
  }
  // Contiguous operands merge into one dim, so the indexer costs one division per element there.
  auto run = [&](auto index_tag) {
    using index_t = typename decltype(index_tag)::type;
    const auto indexer = make_strided_indexer<2, index_t>(dst.shape(), {&dst.strides(), &src.strides()});
    dispatch_type(dst.dtype(), "copy_", [&](auto dst_tag) {
      using Dst = typename decltype(dst_tag)::type;
      dispatch_type(src.dtype(), "copy_", [&](auto src_tag) {
        using Src = typename decltype(src_tag)::type;
        if constexpr (!kCastsThroughFloat32<Dst, Src>) {
          copy_strided_kernel<Dst, Src, index_t><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(
              dst.data<Dst>(), src.data<Src>(), n, indexer);
        }
      });
    });
  };
  if (fits_int32_indexing(dst, src)) {
    run(TypeTag<std::int32_t>{});
  } else {
    run(TypeTag<std::int64_t>{});
  }
  ADCUDA_CHECK_LAUNCH();
}

void launch_cast_copy(const DeviceArray& dst, const DeviceArray& src) {
  for_each_indexable_part(&launch_cast_copy_part, dst, src);
}

void launch_fill_part(const DeviceArray& dst, const Scalar& value) {
  const std::int64_t n = dst.numel();
  KernelLaunch launch(dst);
  auto run = [&](auto index_tag) {
    using index_t = typename decltype(index_tag)::type;
    const auto indexer = make_strided_indexer<1, index_t>(dst.shape(), {&dst.strides()});
    dispatch_type(dst.dtype(), "fill_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      fill_kernel<T, index_t><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(dst.data<T>(), n, indexer,
                                                                                 scalar_as<T>(value));
    });
  };
  if (fits_int32_indexing(dst)) {
    run(TypeTag<std::int32_t>{});
  } else {
    run(TypeTag<std::int64_t>{});
  }
  ADCUDA_CHECK_LAUNCH();
}

}  // namespace

void copy_(const DeviceArray& dst, const DeviceArray& src) {
  if (dst.shape() != src.shape()) {
    throw std::invalid_argument("copy_: destination shape " + format_dims(dst.shape()) + " and source shape " +
                                format_dims(src.shape()) + " differ (expand the source to broadcast it)");
  }
  if (dst.numel() == 0) return;
  if (src.device() != dst.device()) {
    launch_cast_copy(dst, copy_to_device(src, dst.device()));
    return;
  }
  if (same_view(dst, src)) return;
  if (may_overlap(dst, src)) {
    // Reading elements the copy has already overwritten would be wrong: read from a snapshot.
    launch_cast_copy(dst, astype(src, src.dtype()));
    return;
  }
  launch_cast_copy(dst, src);
}

void fill_(const DeviceArray& dst, const Scalar& value) {
  if (dst.numel() == 0) return;
  for_each_indexable_part([&](const DeviceArray& part) { launch_fill_part(part, value); }, dst);
}

DeviceArray astype(const DeviceArray& a, ScalarType dtype) {
  DeviceArray out = DeviceArray::empty(a.shape(), dtype, a.device());
  if (out.numel() > 0) launch_cast_copy(out, a);
  return out;
}

DeviceArray contiguous(const DeviceArray& a) { return a.is_contiguous() ? a : astype(a, a.dtype()); }

DeviceArray arange(const Scalar& start, const Scalar& step, std::int64_t n, ScalarType dtype, int device) {
  if (n < 0) throw std::invalid_argument("arange: negative length " + std::to_string(n));
  DeviceArray out = DeviceArray::empty({n}, dtype, device);
  if (n == 0) return out;
  KernelLaunch launch(out);
  dispatch_type(dtype, "arange", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (is_floating_point(dtype)) {
      arange_kernel<T, double><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(out.data<T>(), n, start.as_float,
                                                                                  step.as_float);
    } else {
      arange_kernel<T, std::int64_t><<<grid_size(n), kBlockSize, 0, launch.stream()>>>(out.data<T>(), n, start.as_int,
                                                                                        step.as_int);
    }
  });
  ADCUDA_CHECK_LAUNCH();
  return out;
}

void copy_host_to_device(const DeviceArray& dst, const void* host, std::size_t nbytes, bool synchronize) {
  if (!dst.is_contiguous() || nbytes != dst.nbytes()) {
    throw std::invalid_argument("copy_host_to_device: needs a contiguous destination of " + std::to_string(nbytes) +
                                " bytes, got " + std::to_string(dst.nbytes()) + " bytes" +
                                (dst.is_contiguous() ? "" : " (not contiguous)"));
  }
  if (nbytes == 0) return;
  KernelLaunch launch(dst);
  refuse_during_capture(launch.stream(),
                        "copying host memory to the device (a CUDA tensor made from host data, .to('cuda'), "
                        "or a host scalar an op uploads)");
  ADCUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), host, nbytes, cudaMemcpyHostToDevice, launch.stream()));
  if (PinnedBlock* block = pinned_block_containing(host)) pinned_record_use(block, launch.stream(), launch.device());
  if (synchronize) {
    ADCUDA_CHECK(cudaStreamSynchronize(launch.stream()));
    raise_device_errors();
  }
}

void copy_device_to_host(void* host, const DeviceArray& src, std::size_t nbytes) {
  if (!src.is_contiguous() || nbytes != src.nbytes()) {
    throw std::invalid_argument("copy_device_to_host: needs a contiguous source of " + std::to_string(nbytes) +
                                " bytes, got " + std::to_string(src.nbytes()) + " bytes" +
                                (src.is_contiguous() ? "" : " (not contiguous)"));
  }
  if (nbytes == 0) return;
  KernelLaunch launch(src);
  refuse_during_capture(launch.stream(),
                        "reading CUDA memory on the host (.item(), .numpy(), .tolist(), bool(tensor), printing, or "
                        "an op whose result size depends on the values, such as nonzero or a boolean mask)");
  ADCUDA_CHECK(cudaMemcpyAsync(host, src.data_ptr(), nbytes, cudaMemcpyDeviceToHost, launch.stream()));
  if (PinnedBlock* block = pinned_block_containing(host)) pinned_record_use(block, launch.stream(), launch.device());
  ADCUDA_CHECK(cudaStreamSynchronize(launch.stream()));
  raise_device_errors();
}

}  // namespace adcuda
