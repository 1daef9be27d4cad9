// Device discovery and control. Plain C++ (no CUDA types) so that bindings.cpp and the host-only
// build share it: device.cu implements it with the CUDA runtime, host_only.cpp for a build without CUDA.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace adcuda {

struct DeviceCount {
  int count;
  // Why no device is usable ("" when count > 0): the CUDA error text, e.g. no driver or no GPU.
  std::string unavailable_reason;
};

struct DeviceProperties {
  std::string name;
  int major;
  int minor;
  std::size_t total_memory;
  int multi_processor_count;
  int warp_size;
  int max_threads_per_block;
  std::size_t shared_memory_per_block;
  int l2_cache_size;
  int pci_domain_id;
  int pci_bus_id;
  int pci_device_id;
};

// What is known of a visible device before CUDA is initialised.
struct DeviceSummary {
  std::string name;
  int major;
  int minor;
};

// Never throws for a missing driver or GPU: those give count 0 and the reason. Asks the driver's
// management library (NVML) where it can, as PyTorch's NVML-based check does, so that the CUDA driver
// is not initialised and a process forked after asking can still use CUDA; falls back to
// cudaGetDeviceCount (which initialises it) where NVML cannot answer (no libnvidia-ml, MIG devices or
// ambiguous CUDA_VISIBLE_DEVICES entries).
DeviceCount device_count();
// Name and compute capability of each visible device, when device_count() learned them without
// initialising CUDA; nullopt when it had to ask the CUDA runtime (then use device_properties).
std::optional<std::vector<DeviceSummary>> visible_devices_without_initialising();
// The remaining calls throw CudaError when the CUDA runtime reports an error.
DeviceProperties device_properties(int index);
// CUDA versions as the runtime encodes them (1000 * major + 10 * minor); the driver's is 0 without a driver.
int driver_version();
int runtime_version();
int current_device();
void set_device(int index);
// Waits for all work on the current device; raises what kernels reported meanwhile (device_errors.h).
void synchronize();
// Makes `index` the thread's current device, creates its context and the thread's stream on it.
void initialize_context(int index);
// (free, total) bytes of device memory, as the driver reports them.
std::pair<std::size_t, std::size_t> memory_info(int index);

}  // namespace adcuda
