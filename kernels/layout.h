// Layout kernels (layout.cu): the CUDA backend's cat, tril and triu primitives. Copies, casts, fills
// and ranges are the runtime's (runtime/copy.h); flips are views there, materialised by its strided
// copy. Plain C++ for the bindings.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device_array.h"

namespace adcuda {

// Concatenation along `axis` of arrays that match in every other dim, in the first array's dtype.
// Contiguous inputs are copied by one batched kernel (up to 64 per launch, 128-bit moves where the
// layout allows); others through the runtime's strided copy.
DeviceArray cat(const std::vector<DeviceArray>& arrays, std::int64_t axis);

// The lower (tril) or upper (triu) triangle of the last two dims, relative to diagonal k; the rest 0.
DeviceArray tril(const DeviceArray& a, std::int64_t k);
DeviceArray triu(const DeviceArray& a, std::int64_t k);

}  // namespace adcuda
