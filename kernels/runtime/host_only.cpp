// The device API of a build without CUDA (ADCUDA_CUDA=OFF, or no CUDA compiler at build time): there
// is never a device, and asking one for anything says why.
#include <stdexcept>

#include "runtime/device.h"

namespace adcuda {
namespace {

const char kNotCompiled[] =
    "this adcuda build has no CUDA support (it was built with ADCUDA_CUDA=OFF or without a CUDA compiler); "
    "reinstall with nvcc on PATH and ADCUDA_CUDA=ON to use a GPU";

[[noreturn]] void throw_not_compiled() { throw std::runtime_error(kNotCompiled); }

}  // namespace

DeviceCount device_count() { return {0, kNotCompiled}; }
std::optional<std::vector<DeviceSummary>> visible_devices_without_initialising() { return std::vector<DeviceSummary>{}; }
DeviceProperties device_properties(int) { throw_not_compiled(); }
int driver_version() { return 0; }
int runtime_version() { return 0; }
int current_device() { throw_not_compiled(); }
void set_device(int) { throw_not_compiled(); }
void synchronize() { throw_not_compiled(); }
void initialize_context(int) { throw_not_compiled(); }
std::pair<std::size_t, std::size_t> memory_info(int) { throw_not_compiled(); }

}  // namespace adcuda
