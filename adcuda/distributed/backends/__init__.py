"""Transports under ``adcuda.distributed``: MPI (mpi4py) for CPU tensors and start-up, NCCL (CuPy's
bindings) for CUDA tensors. Each is imported only when a process group asks for it.

A backend works on contiguous backend arrays and offers ``all_reduce(array, op)``, ``broadcast(array,
src)``, ``all_gather(out, array)`` and ``barrier()``, each returning a request that ``test(request)``
polls and ``wait(request, what)`` waits for (``what`` names the call in errors: a string, or
a function that makes it), never longer than the group's timeout; plus
``all_gather_bytes(data)`` for small Python objects, ``wire_dtype(dtype)`` (the dtype it reduces a
tensor of ``dtype`` in) and ``close()``. ``op`` is one of ``"sum" "product" "max" "min"``.
"""
