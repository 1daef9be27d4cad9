#include "runtime/device_errors.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>

#include "runtime/errors.h"
#include "runtime/stream.h"

namespace adcuda {
namespace {

constexpr int kMaxDevices = 64;

struct DeviceErrorState {
  unsigned long long* claim;
  DeviceErrorRecord* record;
};

// Created once per device and never freed (kernels may still hold the pointers).
std::atomic<DeviceErrorState*> states[kMaxDevices];
std::mutex states_mutex;

DeviceErrorState* state_for(int device) {
  if (device < 0 || device >= kMaxDevices) {
    throw std::invalid_argument("device error report: device index " + std::to_string(device) + " out of range");
  }
  if (DeviceErrorState* state = states[device].load(std::memory_order_acquire)) return state;
  std::lock_guard<std::mutex> lock(states_mutex);
  if (DeviceErrorState* state = states[device].load(std::memory_order_acquire)) return state;
  DeviceGuard guard(device);
  auto* state = new DeviceErrorState{};
  // through a void* (this file is host C++, built without nvcc's typed cudaMalloc overload)
  void* claim = nullptr;
  ADCUDA_CHECK(cudaMalloc(&claim, sizeof(*state->claim)));
  state->claim = static_cast<decltype(state->claim)>(claim);
  ADCUDA_CHECK(cudaMemsetAsync(state->claim, 0, sizeof(*state->claim), cudaStreamLegacy));
  ADCUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
  // With unified addressing (every 64-bit platform CUDA supports) the host address of mapped
  // page-locked memory is also its device address.
  void* record = nullptr;
  ADCUDA_CHECK(cudaHostAlloc(&record, sizeof(DeviceErrorRecord), cudaHostAllocMapped | cudaHostAllocPortable));
  state->record = static_cast<DeviceErrorRecord*>(record);
  state->record->flag = 0;
  states[device].store(state, std::memory_order_release);
  return state;
}

std::string describe(int check, long long value, long long bound) {
  switch (static_cast<DeviceCheck>(check)) {
    case DeviceCheck::kEmbeddingIndex:
      return "embedding: index " + std::to_string(value) + " is out of range for num_embeddings=" +
             std::to_string(bound);
    case DeviceCheck::kIndexBounds:
      return "indexing: index " + std::to_string(value) + " is out of bounds for dimension with size " +
             std::to_string(bound);
  }
  return "a kernel reported error " + std::to_string(check) + " (value " + std::to_string(value) + ")";
}

}  // namespace

DeviceErrorReport device_error_report(int device, DeviceCheck check) {
  DeviceErrorState* state = state_for(device);
  return {state->claim, state->record, static_cast<int>(check)};
}

void raise_device_errors() {
  for (int device = 0; device < kMaxDevices; ++device) {
    DeviceErrorState* state = states[device].load(std::memory_order_acquire);
    if (state == nullptr || state->record->flag == 0) continue;
    std::lock_guard<std::mutex> lock(states_mutex);
    if (state->record->flag == 0) continue;  // another thread raised it
    std::atomic_thread_fence(std::memory_order_acquire);
    const int check = state->record->check;
    const long long value = state->record->value;
    const long long bound = state->record->bound;
    state->record->flag = 0;
    {
      DeviceGuard guard(device);
      ADCUDA_CHECK(cudaMemsetAsync(state->claim, 0, sizeof(*state->claim), cudaStreamLegacy));
      ADCUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
    }
    throw DeviceSideError(describe(check, value, bound) + " (found on cuda:" + std::to_string(device) +
                          " by a kernel queued before this synchronising call; the result of that op is not "
                          "valid)");
  }
}

}  // namespace adcuda
