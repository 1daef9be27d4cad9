"""PyTorch's ``torch.backends.cudnn`` flags, accepted so that scripts which set them run unchanged.

adcuda does not use cuDNN: its convolutions and other kernels are its own (``kernels/``), so
``is_available()`` is False and the flags select nothing. ``deterministic = True`` is what adcuda
gives anyway for the ops that have a deterministic order (see each kernel's notes); ``benchmark``
(autotuning convolution algorithms) and ``allow_tf32`` have no effect (float32 stays full fp32).
"""

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True  # PyTorch's default; adcuda never computes float32 in TF32


def is_available():
    """False: adcuda does not call cuDNN."""
    return False


def version():
    """None: no cuDNN is linked."""
    return None
