// Copies the runtime itself needs: between device arrays (strided, broadcast, with dtype conversion),
// fills, ranges, and between host and device memory. Every call queues its work on the calling
// thread's current stream (KernelLaunch order included); only the device->host copy waits for it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/device_array.h"

namespace adcuda {

// A value to fill with, kept in the widest type of its kind so no precision is lost before the cast.
struct Scalar {
  enum class Kind { Bool, Int, Float } kind;
  bool as_bool;
  std::int64_t as_int;
  double as_float;

  static Scalar from_bool(bool value) { return {Kind::Bool, value, value, value ? 1.0 : 0.0}; }
  static Scalar from_int(std::int64_t value) { return {Kind::Int, value != 0, value, static_cast<double>(value)}; }
  static Scalar from_float(double value) {
    return {Kind::Float, value != 0.0, static_cast<std::int64_t>(value), value};
  }
};

// dst = src, element by element, converting to dst's dtype. The shapes must be equal (expand src first
// to broadcast). dst may be any strided view; overlapping src and dst are handled (through a copy of
// src); src may be on another device.
void copy_(const DeviceArray& dst, const DeviceArray& src);
// Every element of dst (any strided view) becomes value, converted to dst's dtype.
void fill_(const DeviceArray& dst, const Scalar& value);
// A contiguous copy of a in `dtype`.
DeviceArray astype(const DeviceArray& a, ScalarType dtype);
// `a` itself when contiguous, else a contiguous copy.
DeviceArray contiguous(const DeviceArray& a);
// [start + i * step for i in range(n)], computed in double (float dtypes) or int64 (the others).
DeviceArray arange(const Scalar& start, const Scalar& step, std::int64_t n, ScalarType dtype, int device = -1);

// nbytes from host memory into contiguous `dst`. From the pinned pool's memory the copy is queued
// and the block is kept from reuse until it completes; with `synchronize` the call waits for it (and
// raises what kernels reported meanwhile, device_errors.h). From pageable memory CUDA has taken the
// data when the call returns.
void copy_host_to_device(const DeviceArray& dst, const void* host, std::size_t nbytes, bool synchronize);
// nbytes of contiguous `src` into host memory; returns when the data is there, after raising what
// kernels reported meanwhile (device_errors.h).
void copy_device_to_host(void* host, const DeviceArray& src, std::size_t nbytes);

}  // namespace adcuda
