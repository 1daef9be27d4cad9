// Launch helpers the GEMM and attention kernels share: per-device facts read once, and the opt-in for
// more than 48 KiB of dynamic shared memory. For .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/errors.h"

namespace adcuda {

struct DeviceFacts {
  int major = 0;
  int minor = 0;
  int multiprocessors = 0;
  int max_shared_per_block = 0;  // with the opt-in
};

// Asked once per device and cached (cudaDeviceGetAttribute is cheap, but not free per launch).
inline DeviceFacts device_facts(int device) {
  static std::mutex mutex;
  static std::vector<DeviceFacts> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (device >= static_cast<int>(cache.size())) cache.resize(device + 1);
  DeviceFacts& facts = cache[device];
  if (facts.multiprocessors == 0) {
    ADCUDA_CHECK(cudaDeviceGetAttribute(&facts.major, cudaDevAttrComputeCapabilityMajor, device));
    ADCUDA_CHECK(cudaDeviceGetAttribute(&facts.minor, cudaDevAttrComputeCapabilityMinor, device));
    ADCUDA_CHECK(cudaDeviceGetAttribute(&facts.max_shared_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    ADCUDA_CHECK(cudaDeviceGetAttribute(&facts.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  }
  return facts;
}

// Raises `kernel`'s dynamic shared-memory limit on `device` to at least `bytes` (needed above 48 KiB);
// remembers the highest limit set per kernel and device, so repeated launches cost a lookup.
template <typename Kernel>
void allow_shared_bytes(Kernel kernel, int bytes, int device) {
  constexpr int kDefaultLimit = 48 * 1024;
  if (bytes <= kDefaultLimit) return;
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> limits;
  std::lock_guard<std::mutex> lock(mutex);
  int& limit = limits.try_emplace({reinterpret_cast<const void*>(kernel), device}, kDefaultLimit).first->second;
  if (limit < bytes) {
    ADCUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    limit = bytes;
  }
}

}  // namespace adcuda
