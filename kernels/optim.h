// Multi-tensor optimizer steps and dynamic loss scaling on the GPU (kernels/optim.cu): the CUDA
// backend's sgd_step_, adam_step_, unscale_and_check_, update_scale_ and global_norm primitives, with the CPU
// backend's math (adcuda/backends/cpu/optim.py: PyTorch's single-tensor SGD and Adam). Plain C++: included
// by the bindings.
//
// Each list holds one array per parameter; all arrays of a parameter have the same number of elements
// and are contiguous. Any floating dtype in any list (float16, bfloat16, float32, float64): SGD and Adam
// step each dtype combination of a call with its own kernel (see optim.cu), so fp16/bf16 parameters
// with fp32 master weights and fp32 state step in the same call as fp32 ones. A parameter's math is
// fp32, or fp64 when it (or its master) is fp64; unscale_and_check_ and global_norm compute in fp64
// when any array of the call is fp64.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device_array.h"

namespace adcuda {

struct SgdOptions {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // momentum buffers start as the gradient
};

// `bufs` empty when momentum == 0; `masters` empty unless parameters step through fp32 copies (then
// the masters are stepped and the parameters receive the result).
void sgd_step_(const std::vector<DeviceArray>& params, const std::vector<DeviceArray>& grads,
               const std::vector<DeviceArray>& bufs, const std::vector<DeviceArray>& masters, const SgdOptions& options);

struct AdamOptions {
  std::int64_t step;  // 1-based, shared by the call
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;  // AdamW
};

// `max_exp_avg_sqs` empty unless AMSGrad; `masters` as for SGD (an fp32 master with fp32 gradients
// may have an fp16/bf16 parameter: its working copy, written in the same pass). `grad_multiplier`
// (nullptr: none) is a one-element float32 array on the device multiplying every gradient first
// (clip_grad_norm_'s coefficient, read by the kernel: no host sync).
void adam_step_(const std::vector<DeviceArray>& params, const std::vector<DeviceArray>& grads,
                const std::vector<DeviceArray>& exp_avgs, const std::vector<DeviceArray>& exp_avg_sqs,
                const std::vector<DeviceArray>& masters, const std::vector<DeviceArray>& max_exp_avg_sqs,
                const AdamOptions& options, const DeviceArray* grad_multiplier = nullptr);

// outs[i] = grads[i] * inv_scale for every tensor (outs[i] may be grads[i], or a wider array), where
// inv_scale is the 0-d float32 array `inv_scale_array` if given, else `inv_scale_value`. Returns a new
// 0-d float32 array on `device`: 1.0 if any gradient holds an inf or a NaN, else 0.0. Nothing is
// copied to the host.
DeviceArray unscale_and_check_(const std::vector<DeviceArray>& outs, const std::vector<DeviceArray>& grads,
                               const DeviceArray* inv_scale_array, double inv_scale_value, int device);

struct ScaleUpdate {
  double growth_factor, backoff_factor;
  std::int64_t growth_interval;
  double min_scale, max_scale;
};

// PyTorch's _amp_update_scale_ on the 0-d float32 `scale` and int32 `growth_tracker`, in place, from
// the 0-d float32 `found_inf`, the scale kept in [min_scale, max_scale]; one thread on the device.
void update_scale_(const DeviceArray& scale, const DeviceArray& growth_tracker, const DeviceArray& found_inf,
                   const ScaleUpdate& update);

// The norm_type-norm (> 0, or inf) of all elements of `arrays` (contiguous floating, one device) taken
// together, for clip_grad_norm_: a new 0-d array on the arrays' device (`device` when there are none),
// float32, or float64 if any array is float64 (the accumulation type too), left on the device. The
// multi-tensor launches write one partial per chunk and one more block combines them in order: the same
// result on every run, no float atomics. NaN anywhere gives NaN, an inf (without NaN) inf.
DeviceArray global_norm(const std::vector<DeviceArray>& arrays, double norm_type, int device);

}  // namespace adcuda
