"""PyTorch's ``torch.backends.cuda`` matmul switches, accepted so that scripts which set them run
unchanged, and what each one means in adcuda.

- ``matmul.allow_tf32`` (False): adcuda's float32 matmuls always compute in full fp32 (the
  hand-written SIMT kernels, and cuBLASLt with ``CUBLAS_COMPUTE_32F``); True is accepted and changes
  nothing, so results never lose precision behind a flag.
- ``matmul.allow_fp16_reduced_precision_reduction`` / ``allow_bf16_reduced_precision_reduction``
  (True): float16 and bfloat16 matmuls always accumulate in fp32 whatever the flag says.

``adcuda.backends.cuda`` is the CUDA backend package in every build, and its ``matmul`` primitive
carries these flags as attributes (in a build without CUDA that primitive only raises when called).
(``adcuda.backends.cudnn`` has cuDNN's, which adcuda does not use.)
"""

MATMUL_FLAGS = {
    "allow_tf32": False,
    "allow_fp16_reduced_precision_reduction": True,
    "allow_bf16_reduced_precision_reduction": True,
}


def expose_matmul_flags(matmul):
    """Give the CUDA backend's ``matmul`` primitive PyTorch's flags, at their defaults."""
    for name, default in MATMUL_FLAGS.items():
        setattr(matmul, name, default)
