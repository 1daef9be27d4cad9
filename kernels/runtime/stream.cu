#include "runtime/stream.h"

#include <mutex>
#include <vector>

#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/process.h"

namespace adcuda {
namespace {

// Handles recycled across threads, per device. Leaked on purpose: thread-exit handlers and Python
// finalisers may run after static destructors would have destroyed it.
struct HandlePools {
  std::mutex mutex;
  std::vector<std::vector<cudaStream_t>> streams;
  std::vector<std::vector<cudaEvent_t>> events;
};

HandlePools& pools() {
  static HandlePools* instance = new HandlePools();
  return *instance;
}

template <typename Handle>
std::vector<Handle>& for_device(std::vector<std::vector<Handle>>& by_device, int device) {
  if (by_device.size() <= static_cast<std::size_t>(device)) by_device.resize(device + 1);
  return by_device[device];
}

// The calling thread's streams by device: its own, and the one `with adcuda.cuda.stream(s)` selected.
struct ThreadStreams {
  std::vector<cudaStream_t> own;
  std::vector<cudaStream_t> selected;

  ~ThreadStreams() {
    if (in_bad_fork()) return;
    for (std::size_t device = 0; device < own.size(); ++device) {
      if (own[device] != nullptr) release_stream(static_cast<int>(device), own[device]);
    }
  }
};

thread_local ThreadStreams thread_streams;

cudaStream_t& slot(std::vector<cudaStream_t>& by_device, int device) {
  if (by_device.size() <= static_cast<std::size_t>(device)) by_device.resize(device + 1, nullptr);
  return by_device[device];
}

int current_device_index() {
  int device = 0;
  ADCUDA_CHECK(cudaGetDevice(&device));
  return device;
}

}  // namespace

cudaStream_t acquire_stream(int device) {
  ensure_usable_after_fork("acquire a CUDA stream");
  {
    std::lock_guard<std::mutex> lock(pools().mutex);
    auto& free_streams = for_device(pools().streams, device);
    if (!free_streams.empty()) {
      cudaStream_t stream = free_streams.back();
      free_streams.pop_back();
      return stream;
    }
  }
  DeviceGuard guard(device);
  cudaStream_t stream = nullptr;
  ADCUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  note_cuda_used();
  return stream;
}

void release_stream(int device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(pools().mutex);
  for_device(pools().streams, device).push_back(stream);
}

std::size_t pooled_stream_count(int device) {
  std::lock_guard<std::mutex> lock(pools().mutex);
  return for_device(pools().streams, device).size();
}

cudaEvent_t acquire_event(int device) {
  {
    std::lock_guard<std::mutex> lock(pools().mutex);
    auto& free_events = for_device(pools().events, device);
    if (!free_events.empty()) {
      cudaEvent_t event = free_events.back();
      free_events.pop_back();
      return event;
    }
  }
  DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  ADCUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  note_cuda_used();
  return event;
}

void release_event(int device, cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(pools().mutex);
  for_device(pools().events, device).push_back(event);
}

cudaStream_t thread_stream(int device) {
  cudaStream_t& own = slot(thread_streams.own, device);
  if (own == nullptr) own = acquire_stream(device);
  return own;
}

cudaStream_t current_stream(int device) {
  ensure_usable_after_fork("use the current CUDA stream");
  cudaStream_t selected = slot(thread_streams.selected, device);
  return selected != nullptr ? selected : thread_stream(device);
}

cudaStream_t current_stream() {
  ensure_usable_after_fork("use the current CUDA stream");
  return current_stream(current_device_index());
}

cudaStream_t exchange_current_stream(int device, cudaStream_t stream) {
  cudaStream_t& selected = slot(thread_streams.selected, device);
  cudaStream_t previous = selected;
  selected = stream;
  return previous;
}

void stream_wait_stream(cudaStream_t waiter, cudaStream_t producer, int producer_device) {
  if (waiter == producer) return;
  // A capture cannot depend on work outside it (cudaErrorStreamCaptureIsolation), and needs not: it
  // starts after the whole device synchronised (graph.cu), so that work is done.
  if (stream_is_capturing(waiter) && !stream_is_capturing(producer)) return;
  cudaEvent_t event = acquire_event(producer_device);
  // cudaStreamWaitEvent waits for the record made before the call, so the event can be recycled at
  // once: recording it again later does not change what `waiter` waits for.
  try {
    ADCUDA_CHECK(cudaEventRecord(event, producer));
    ADCUDA_CHECK(cudaStreamWaitEvent(waiter, event, 0));
  } catch (...) {
    release_event(producer_device, event);
    throw;
  }
  release_event(producer_device, event);
}

DeviceGuard::DeviceGuard(int device) : previous_(current_device_index()), device_(device) {
  if (device_ != previous_) ADCUDA_CHECK(cudaSetDevice(device_));
}

DeviceGuard::~DeviceGuard() {
  if (device_ != previous_) cudaSetDevice(previous_);
}

}  // namespace adcuda
