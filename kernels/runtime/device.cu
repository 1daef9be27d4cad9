#include "runtime/device.h"

#include <cuda_runtime_api.h>

#include "runtime/errors.h"

namespace adcuda {

DeviceCount device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return {0, "cudaGetDeviceCount failed with " + describe_cuda_error(static_cast<int>(status))};
  }
  if (count == 0) {
    return {0, "the CUDA runtime found no device"};
  }
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

void synchronize() { ADCUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace adcuda
