#include "runtime/device_array.h"

#include <iterator>
#include <stdexcept>
#include <string>

#include "runtime/allocator.h"
#include "runtime/errors.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace adcuda {

namespace {

int resolve_device(int device) {
  if (device >= 0) return device;
  ADCUDA_CHECK(cudaGetDevice(&device));
  return device;
}

std::int64_t checked_numel(const Dims& shape) {
  std::int64_t numel = 1;
  for (std::int64_t size : shape) {
    if (size < 0) throw std::invalid_argument("DeviceArray: negative dimension in shape " + format_dims(shape));
    if (__builtin_mul_overflow(numel, size, &numel)) {
      throw std::invalid_argument("DeviceArray: shape " + format_dims(shape) + " has more elements than fit in int64");
    }
  }
  return numel;
}

}  // namespace

std::string format_dims(const Dims& dims) {
  std::string text = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(dims[i]);
  }
  return text + (dims.size() == 1 ? ",)" : ")");
}

Storage::Storage(void* data, std::size_t nbytes, int device, Block* block, std::shared_ptr<void> owner,
                 cudaStream_t last_stream)
    : data_(data),
      nbytes_(nbytes),
      device_(device),
      block_(block),
      owner_(std::move(owner)),
      last_stream_(last_stream),
      last_stream_device_(device) {}

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, int device) {
  ensure_usable_after_fork("allocate CUDA memory");
  device = resolve_device(device);
  cudaStream_t stream = current_stream(device);
  if (nbytes == 0) return std::shared_ptr<Storage>(new Storage(nullptr, 0, device, nullptr, nullptr, stream));
  Block* block = device_malloc(nbytes, device, stream);
  return std::shared_ptr<Storage>(new Storage(block_pointer(block), nbytes, device, block, nullptr, stream));
}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t nbytes, int device, std::shared_ptr<void> owner,
                                       cudaStream_t last_stream) {
  ensure_usable_after_fork("wrap CUDA memory");
  note_cuda_used();
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, nullptr, std::move(owner), last_stream));
}

Storage::~Storage() {
  if (block_ != nullptr) {
    StreamUse uses[1 + 8];
    std::vector<StreamUse> more;
    std::size_t count = 0;
    auto add = [&](StreamUse use) {
      if (use.stream == nullptr) return;
      if (count < std::size(uses)) {
        uses[count++] = use;
      } else {
        more.push_back(use);
      }
    };
    add({last_stream_, last_stream_device_});
    for (const StreamUse& use : external_users_) add(use);
    if (!more.empty()) {
      more.insert(more.begin(), uses, uses + count);
      device_free(block_, more.data(), more.size());
    } else {
      device_free(block_, uses, count);
    }
    return;
  }
  // The owner (another library) may reuse the memory at once: let the work queued on it finish first.
  if (owner_ != nullptr && !in_bad_fork()) {
    auto finish = [](cudaStream_t stream) {
      if (stream != nullptr && cudaStreamQuery(stream) != cudaSuccess) cudaStreamSynchronize(stream);
    };
    finish(last_stream_);
    for (const StreamUse& use : external_users_) finish(use.stream);
    cudaGetLastError();
  }
}

std::pair<cudaStream_t, int> Storage::last_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {last_stream_, last_stream_device_};
}

std::uint64_t Storage::wait_for_earlier_uses(cudaStream_t stream, int stream_device) {
  (void)stream_device;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const StreamUse& user : external_users_) {
    if (user.stream != stream) stream_wait_stream(stream, user.stream, user.device);
  }
  if (last_stream_ != nullptr && last_stream_ != stream) stream_wait_stream(stream, last_stream_, last_stream_device_);
  return recorded_uses_;
}

void Storage::record_use(cudaStream_t stream, int stream_device, std::uint64_t seen) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (recorded_uses_ != seen && last_stream_ != nullptr && last_stream_ != stream) {
    // Another thread recorded a use on another stream after this launch waited: order this stream after
    // it as well, so that the last stream alone still stands for every use.
    try {
      stream_wait_stream(stream, last_stream_, last_stream_device_);
    } catch (...) {
      cudaGetLastError();  // the next CUDA call reports a broken context
    }
  }
  last_stream_ = stream;
  last_stream_device_ = stream_device;
  ++recorded_uses_;
}

void Storage::use_on(cudaStream_t stream, int stream_device) {
  const std::uint64_t seen = wait_for_earlier_uses(stream, stream_device);
  if (LaunchInProgress* launch = LaunchInProgress::on_stream(stream)) {
    launch->defer(shared_from_this(), seen);
  } else {
    record_use(stream, stream_device, seen);
  }
}

void Storage::add_external_user(cudaStream_t stream, int stream_device) {
  wait_for_earlier_uses(stream, stream_device);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const StreamUse& user : external_users_) {
    if (user.stream == stream) return;
  }
  external_users_.push_back({stream, stream_device});
}

std::vector<StreamUse> Storage::external_users() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return external_users_;
}

namespace {
thread_local LaunchInProgress* innermost_launch = nullptr;
}  // namespace

LaunchInProgress::LaunchInProgress(cudaStream_t stream, int device)
    : stream_(stream), device_(device), enclosing_(innermost_launch) {
  innermost_launch = this;
}

LaunchInProgress::~LaunchInProgress() {
  for (DeferredUse& use : uses_) use.storage->record_use(stream_, device_, use.seen);
  // Launches end in the reverse order they began, except when one is kept alive past a later one
  // (elementwise_loops.cuh holds it in a plan): unlink it wherever it is.
  LaunchInProgress** link = &innermost_launch;
  while (*link != nullptr && *link != this) link = &(*link)->enclosing_;
  if (*link == this) *link = enclosing_;
}

LaunchInProgress* LaunchInProgress::on_stream(cudaStream_t stream) {
  for (LaunchInProgress* launch = innermost_launch; launch != nullptr; launch = launch->enclosing_) {
    if (launch->stream_ == stream) return launch;
  }
  return nullptr;
}

void LaunchInProgress::defer(std::shared_ptr<Storage> storage, std::uint64_t seen) {
  for (DeferredUse& use : uses_) {
    if (use.storage == storage) return;  // the first wait covers both; one record is enough
  }
  if (uses_.empty()) uses_.reserve(4);
  uses_.push_back({std::move(storage), seen});
}

DeviceArray::DeviceArray(std::shared_ptr<Storage> storage, Dims shape, Dims strides, std::int64_t offset,
                         ScalarType dtype)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype),
      numel_(checked_numel(shape_)) {
  if (strides_.size() != shape_.size()) {
    throw std::invalid_argument("DeviceArray: shape " + format_dims(shape_) + " and strides " + format_dims(strides_) +
                                " differ in length");
  }
  const auto [lowest, end] = extent();
  const auto capacity = static_cast<std::int64_t>(storage_->nbytes() / itemsize());
  if (numel_ > 0 && (lowest < 0 || end > capacity)) {
    throw std::invalid_argument("DeviceArray: a view with shape " + format_dims(shape_) + ", strides " +
                                format_dims(strides_) + " and offset " + std::to_string(offset_) +
                                " reaches elements [" + std::to_string(lowest) + ", " + std::to_string(end) +
                                ") outside its storage of " + std::to_string(capacity) + " elements");
  }
}

DeviceArray DeviceArray::empty(const Dims& shape, ScalarType dtype, int device) {
  const std::int64_t numel = checked_numel(shape);
  std::size_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(numel), adcuda::itemsize(dtype), &nbytes)) {
    throw std::invalid_argument("DeviceArray: shape " + format_dims(shape) + " needs more bytes than fit in size_t");
  }
  return DeviceArray(Storage::allocate(nbytes, device), shape, contiguous_strides(shape), 0, dtype);
}

bool DeviceArray::is_contiguous() const noexcept {
  if (numel_ == 0) return true;
  std::int64_t expected = 1;
  for (int dim = ndim() - 1; dim >= 0; --dim) {
    if (shape_[dim] == 1) continue;
    if (strides_[dim] != expected) return false;
    expected *= shape_[dim];
  }
  return true;
}

DeviceArray DeviceArray::as_strided(Dims shape, Dims strides, std::int64_t offset) const {
  return DeviceArray(storage_, std::move(shape), std::move(strides), offset, dtype_);
}

std::pair<std::int64_t, std::int64_t> DeviceArray::extent() const noexcept {
  if (numel_ == 0) return {offset_, offset_};
  std::int64_t lowest = offset_;
  std::int64_t highest = offset_;
  for (int dim = 0; dim < ndim(); ++dim) {
    const std::int64_t reach = (shape_[dim] - 1) * strides_[dim];
    (reach < 0 ? lowest : highest) += reach;
  }
  return {lowest, highest + 1};
}

Dims contiguous_strides(const Dims& shape) {
  Dims strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

bool may_overlap(const DeviceArray& a, const DeviceArray& b) noexcept {
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto span = [](const DeviceArray& x) {
    const auto [lowest, end] = x.extent();
    const auto base = reinterpret_cast<std::uintptr_t>(x.storage()->data());
    const auto size = static_cast<std::uintptr_t>(x.itemsize());
    return std::make_pair(base + static_cast<std::uintptr_t>(lowest) * size, base + static_cast<std::uintptr_t>(end) * size);
  };
  const auto [a_begin, a_end] = span(a);
  const auto [b_begin, b_end] = span(b);
  return a_begin < b_end && b_begin < a_end;
}

}  // namespace adcuda
