#include "runtime/device.h"

#include <cuda_runtime_api.h>

#include "runtime/device_errors.h"
#include "runtime/errors.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace adcuda {

DeviceCount device_count() {
  if (in_bad_fork()) {
    return {0, "this process was forked after its parent initialised CUDA, which makes CUDA unusable here; "
               "start it with the 'spawn' or 'forkserver' start method"};
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return {0, "cudaGetDeviceCount failed with " + describe_cuda_error(static_cast<int>(status))};
  }
  if (count == 0) {
    return {0, "the CUDA runtime found no device"};
  }
  // The driver is initialised now: a child forked from here on cannot use CUDA.
  note_cuda_used();
  return {count, ""};
}

DeviceProperties device_properties(int index) {
  cudaDeviceProp prop{};
  ADCUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return {prop.name,
          prop.major,
          prop.minor,
          prop.totalGlobalMem,
          prop.multiProcessorCount,
          prop.warpSize,
          prop.maxThreadsPerBlock,
          prop.sharedMemPerBlock,
          prop.l2CacheSize,
          prop.pciDomainID,
          prop.pciBusID,
          prop.pciDeviceID};
}

int driver_version() {
  int version = 0;
  ADCUDA_CHECK(cudaDriverGetVersion(&version));
  return version;
}

int runtime_version() {
  int version = 0;
  ADCUDA_CHECK(cudaRuntimeGetVersion(&version));
  return version;
}

int current_device() {
  int index = 0;
  ADCUDA_CHECK(cudaGetDevice(&index));
  return index;
}

void set_device(int index) { ADCUDA_CHECK(cudaSetDevice(index)); }

void synchronize() {
  ADCUDA_CHECK(cudaDeviceSynchronize());
  raise_device_errors();
}

void initialize_context(int index) {
  ensure_usable_after_fork("initialise CUDA");
  ADCUDA_CHECK(cudaSetDevice(index));
  // Creates the device's primary context now rather than inside the first kernel launch.
  ADCUDA_CHECK(cudaFree(nullptr));
  note_cuda_used();
  thread_stream(index);
}

std::pair<std::size_t, std::size_t> memory_info(int index) {
  ensure_usable_after_fork("query CUDA memory");
  DeviceGuard guard(index);
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  ADCUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return {free_bytes, total_bytes};
}

}  // namespace adcuda
