"""Transports under ``adcuda.distributed``: MPI (mpi4py) for CPU tensors and start-up, NCCL (CuPy's
bindings) for CUDA tensors. Each loads its library (mpi4py, CuPy) only when a process group asks for it.

A backend works in place on contiguous tensors that record no graph (it reaches their memory through
NumPy for MPI, ``__cuda_array_interface__`` for NCCL) and offers ``all_reduce(tensor, op)``,
``broadcast(tensor, src)``, ``all_gather(out, tensor)`` and ``barrier()``, each returning a request
that ``test(request)`` polls and ``wait(request, what)`` waits for (``what`` names the call in errors:
a string, or a function that makes it), never longer than the group's timeout; plus
``all_gather_bytes(data)`` for small Python objects, ``wire_dtype(dtype)`` (the dtype it reduces a
tensor of ``dtype`` in) and ``close()``. ``op`` is one of ``"sum" "product" "max" "min"``.
"""
