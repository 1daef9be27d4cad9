#include "runtime/device.h"

#include <cuda_runtime_api.h>
#if !defined(ADCUDA_EMULATION)
#include <dlfcn.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include "runtime/device_errors.h"
#include "runtime/errors.h"
#include "runtime/graph.h"
#include "runtime/process.h"
#include "runtime/stream.h"

namespace adcuda {

#if !defined(ADCUDA_EMULATION)
namespace {

// The few NVML entry points needed, looked up in the driver's libnvidia-ml.so.1 at run time (adcuda does
// not link it: a machine without a driver must still import the module).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;

struct Nvml {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  NvmlReturn (*device_count)(unsigned int*);
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*);
  NvmlReturn (*compute_capability)(NvmlDevice, int*, int*);
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*uuid)(NvmlDevice, char*, unsigned int);
  NvmlReturn (*driver_cuda_version)(int*);
};

std::optional<Nvml> load_nvml() {
  void* library = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) return std::nullopt;
  Nvml nvml{};
  bool found = true;
  auto bind = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
    found = found && function != nullptr;
  };
  bind(nvml.init, "nvmlInit_v2");
  bind(nvml.shutdown, "nvmlShutdown");
  bind(nvml.device_count, "nvmlDeviceGetCount_v2");
  bind(nvml.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(nvml.compute_capability, "nvmlDeviceGetCudaComputeCapability");
  bind(nvml.name, "nvmlDeviceGetName");
  bind(nvml.uuid, "nvmlDeviceGetUUID");
  bind(nvml.driver_cuda_version, "nvmlSystemGetCudaDriverVersion_v2");
  if (!found) return std::nullopt;  // the library stays loaded: unloading a driver library buys nothing
  return nvml;
}

struct NvmlDeviceInfo {
  DeviceSummary summary;
  std::string uuid;
};

// The NVML devices CUDA_VISIBLE_DEVICES leaves visible, in CUDA's order; nullopt when that cannot be
// told without the CUDA runtime. Entries as CUDA reads them: comma-separated indices or UUID prefixes
// ("GPU-..."), up to the first one that names no device.
std::optional<std::vector<DeviceSummary>> visible(const std::vector<NvmlDeviceInfo>& devices) {
  std::vector<DeviceSummary> all;
  for (const NvmlDeviceInfo& device : devices) all.push_back(device.summary);
  const char* setting = std::getenv("CUDA_VISIBLE_DEVICES");
  if (setting == nullptr) return all;
  // NVML numbers devices by PCI bus; CUDA by speed unless CUDA_DEVICE_ORDER=PCI_BUS_ID. Indices mean the
  // same devices only then, or when the devices are all alike.
  const char* order = std::getenv("CUDA_DEVICE_ORDER");
  bool alike = true;
  for (const NvmlDeviceInfo& device : devices) {
    alike = alike && device.summary.name == devices.front().summary.name &&
            device.summary.major == devices.front().summary.major &&
            device.summary.minor == devices.front().summary.minor;
  }
  const bool indices_match = alike || (order != nullptr && std::string(order) == "PCI_BUS_ID");
  std::vector<DeviceSummary> chosen;
  std::vector<std::size_t> taken;
  std::string text(setting);
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    std::string entry = text.substr(start, end - start);
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    start = end + 1;
    if (entry.empty()) break;
    std::optional<std::size_t> index;
    if (entry.rfind("GPU-", 0) == 0) {
      for (std::size_t i = 0; i < devices.size(); ++i) {
        if (devices[i].uuid.rfind(entry, 0) == 0) index = i;
      }
    } else if (entry.rfind("MIG-", 0) == 0) {
      return std::nullopt;  // MIG instances are not NVML devices
    } else {
      char* rest = nullptr;
      const long value = std::strtol(entry.c_str(), &rest, 10);
      if (*rest != '\0') return std::nullopt;
      if (!indices_match) return std::nullopt;
      if (value >= 0 && static_cast<std::size_t>(value) < devices.size()) index = static_cast<std::size_t>(value);
    }
    if (!index || std::find(taken.begin(), taken.end(), *index) != taken.end()) break;
    taken.push_back(*index);
    chosen.push_back(devices[*index].summary);
  }
  return chosen;
}

struct UninitialisedQuery {
  DeviceCount count;
  std::vector<DeviceSummary> devices;
};

std::optional<UninitialisedQuery> query_nvml() {
  static const std::optional<Nvml> nvml = load_nvml();
  if (!nvml || nvml->init() != kNvmlSuccess) return std::nullopt;
  std::optional<UninitialisedQuery> result;
  int driver_cuda = 0;
  unsigned int count = 0;
  if (nvml->driver_cuda_version(&driver_cuda) == kNvmlSuccess && nvml->device_count(&count) == kNvmlSuccess) {
    std::vector<NvmlDeviceInfo> devices;
    bool complete = true;
    for (unsigned int i = 0; i < count && complete; ++i) {
      NvmlDevice handle = nullptr;
      char name[96] = {};
      char uuid[96] = {};
      NvmlDeviceInfo info{};
      complete = nvml->handle_by_index(i, &handle) == kNvmlSuccess &&
                 nvml->compute_capability(handle, &info.summary.major, &info.summary.minor) == kNvmlSuccess &&
                 nvml->name(handle, name, sizeof(name)) == kNvmlSuccess &&
                 nvml->uuid(handle, uuid, sizeof(uuid)) == kNvmlSuccess;
      info.summary.name = name;
      info.uuid = uuid;
      devices.push_back(info);
    }
    std::optional<std::vector<DeviceSummary>> shown = complete ? visible(devices) : std::nullopt;
    if (shown) {
      result = UninitialisedQuery{{static_cast<int>(shown->size()), ""}, *shown};
      if (driver_cuda / 1000 < CUDART_VERSION / 1000) {
        result->count = {0, "the NVIDIA driver supports CUDA " + std::to_string(driver_cuda / 1000) + "." +
                                std::to_string(driver_cuda % 1000 / 10) + ", older than the CUDA " +
                                std::to_string(CUDART_VERSION / 1000) + "." +
                                std::to_string(CUDART_VERSION % 1000 / 10) +
                                " runtime of this build needs (cudaErrorInsufficientDriver)"};
        result->devices.clear();
      } else if (shown->empty()) {
        result->count.unavailable_reason = "no NVIDIA GPU is visible (" + std::to_string(count) +
                                           " found by the driver, none left by CUDA_VISIBLE_DEVICES)";
        if (count == 0) result->count.unavailable_reason = "the NVIDIA driver found no GPU";
      }
    }
  }
  nvml->shutdown();
  return result;
}

std::mutex query_mutex;
std::optional<std::vector<DeviceSummary>> nvml_devices;  // what the last NVML query found

}  // namespace
#endif

DeviceCount device_count() {
  if (in_bad_fork()) {
    return {0, "this process was forked after its parent initialised CUDA, which makes CUDA unusable here; "
               "start it with the 'spawn' or 'forkserver' start method"};
  }
#if !defined(ADCUDA_EMULATION)
  {
    std::lock_guard<std::mutex> lock(query_mutex);
    if (std::optional<UninitialisedQuery> answer = query_nvml()) {
      nvml_devices = answer->devices;
      return answer->count;
    }
    nvml_devices.reset();
  }
#endif
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return {0, "cudaGetDeviceCount failed with " + describe_cuda_error(static_cast<int>(status))};
  }
  if (count == 0) {
    return {0, "the CUDA runtime found no device"};
  }
#if !defined(ADCUDA_EMULATION)
  // The driver is initialised now: a child forked from here on cannot use CUDA. (The emulator's count
  // creates no state, as NVML's does not.)
  note_cuda_used();
#endif
  return {count, ""};
}

std::optional<std::vector<DeviceSummary>> visible_devices_without_initialising() {
#if !defined(ADCUDA_EMULATION)
  std::lock_guard<std::mutex> lock(query_mutex);
  return nvml_devices;
#else
  // The emulated device, as the emulated runtime describes it (no state is created by asking).
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return std::vector<DeviceSummary>{{prop.name, prop.major, prop.minor}};
#endif
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
  refuse_during_any_capture("adcuda.cuda.synchronize()");
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
