"""``DistributedDataParallel``: one model replica per rank, gradients averaged across ranks while
backward still runs.

At wrap time every rank checks that all ranks hold the same parameters (names, shapes, dtypes) and
receives rank 0's parameters and buffers. The parameters are packed, in reverse registration order
(roughly the order backward produces their gradients), into flat buckets of about ``bucket_cap_mb``
(the first one small, so that communication starts early). A hook on each parameter copies its
gradient into its bucket slot; the moment a bucket is full it is all-reduced asynchronously (MPI's
``Iallreduce``, or NCCL on its own stream), buckets always in the same order on every rank, as the
transports require. When the last gradient arrives, every bucket is waited for (within the group's
timeout) and each ``.grad`` receives the average. Under ``adcuda.profiler`` each bucket's launch
and the final wait are ranges, so a trace shows the all-reduces starting between backward ops.

A leaf's hook runs before its gradient is accumulated into ``.grad``; the hook therefore takes in
what ``.grad`` already held (gradients accumulated under ``no_sync()``), clears it, and hands back
the sum, which the engine stores as the new ``.grad`` (and the averaged value, for the gradient
that completes the last bucket). Mixed precision: buckets of float16 gradients are reduced in the
transport's wire dtype (float32 over MPI), and after the all-reduce every rank holds the same
gradients, so a GradScaler's found-inf agrees on every rank by construction; see
``adcuda.distributed.all_reduce_found_inf`` for gradients reduced some other way.
"""

import contextlib

from ... import distributed as dist
from ... import dtypes
from ...autograd.grad_mode import is_grad_enabled, no_grad
from ...device import as_device
from ...distributed.errors import DistributedError
from ...errors import DeviceError, fmt_shape
from ...factories import tensor as make_tensor
from ...factories import zeros
from ...ops.optim import _foreach_copy_
from ...profiler.record_function import record_function
from ...tensor import Tensor
from ..modules.module import Module

# PyTorch's first bucket: small, so that the first all-reduce starts after a few layers of backward
_FIRST_BUCKET_BYTES = 1024 * 1024


class _Bucket:
    __slots__ = ("params", "buffer", "slots", "pending", "work")

    def __init__(self, params, buffer, slots):
        self.params = params  # indices into DistributedDataParallel._params
        self.buffer = buffer  # a flat Tensor in the transport's wire dtype
        self.slots = slots  # per parameter: a view of the buffer, shaped like it
        self.pending = 0
        self.work = None


class _Iteration:
    """What one synchronised backward has done so far."""

    def __init__(self, count):
        self.ready = [False] * count
        self.next_bucket = 0  # buckets launch in order: the next one to launch
        self.hooks_fired = 0
        self.finished = False
        self.locally_used = None  # with find_unused_parameters: (usage mask tensor, its all-reduce)


class DistributedDataParallel(Module):
    def __init__(
        self,
        module,
        device_ids=None,
        output_device=None,
        broadcast_buffers=True,
        process_group=None,
        bucket_cap_mb=25,
        find_unused_parameters=False,
    ):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an adcuda.nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise DistributedError(
                "DistributedDataParallel: the default process group has not been initialized; "
                "call adcuda.distributed.init_process_group() first"
            )
        if process_group is not None:
            raise DistributedError("DistributedDataParallel: only the default process group is supported")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.world_size = dist.get_world_size()
        named = [(name, p) for name, p in module.named_parameters() if p.requires_grad]
        self._names = [name for name, _ in named]
        self._params = [p for _, p in named]
        self.device = self._check_devices(module, device_ids)
        self._verify_same_parameters(named)
        self._sync_from_rank0(p for _, p in module.named_parameters())
        self._sync_from_rank0(module.buffers())
        self._buckets, self._bucket_of = self._build_buckets(int(bucket_cap_mb * 1024 * 1024))
        self._iteration = None
        for i, p in enumerate(self._params):
            p.register_hook(self._gradient_hook(i))

    # ------------------------------------------------------------------ wrap-time checks and set-up
    def _check_devices(self, module, device_ids):
        devices = {str(t.device) for t in list(module.parameters()) + list(module.buffers())}
        if len(devices) > 1:
            raise DeviceError(
                f"DistributedDataParallel: the module's parameters and buffers are on several devices "
                f"({', '.join(sorted(devices))}); one device per rank is supported"
            )
        device = devices.pop() if devices else "cpu"
        if device == "cpu" and device_ids is not None:
            raise DeviceError(
                f"DistributedDataParallel: device_ids={device_ids!r} was given for a module on the CPU; "
                "pass device_ids=None for CPU modules"
            )
        if device != "cpu" and device_ids is not None and [as_device(d) for d in device_ids] != [as_device(device)]:
            raise DeviceError(f"DistributedDataParallel: device_ids={device_ids!r} but the module is on {device}")
        return device

    def _verify_same_parameters(self, named):
        """Every rank must hold the same parameters, or the buckets would not line up."""
        mine = [(name, tuple(p.shape), p.dtype.name) for name, p in named]
        everyone = [None] * self.world_size
        dist.all_gather_object(everyone, mine)
        reference = everyone[0]
        for rank, theirs in enumerate(everyone[1:], start=1):
            if theirs == reference:
                continue
            for i in range(max(len(reference), len(theirs))):
                ours = reference[i] if i < len(reference) else None
                other = theirs[i] if i < len(theirs) else None
                if ours != other:
                    raise DistributedError(
                        f"DistributedDataParallel: the ranks hold different parameters: parameter {i} is "
                        f"{_describe(ours)} on rank 0 but {_describe(other)} on rank {rank} (rank 0 has "
                        f"{len(reference)} parameters, rank {rank} has {len(theirs)}); every rank must wrap the "
                        "same model"
                    )

    def _sync_from_rank0(self, tensors):
        if self.world_size == 1:
            return
        with no_grad():
            for t in tensors:
                dist.broadcast(t.detach(), 0)

    def _build_buckets(self, cap_bytes):
        transport = dist.process_group._current("DistributedDataParallel").backend
        groups = {}  # (device, wire dtype) -> parameter indices of the bucket being filled
        sizes = {}
        closed = []
        for i in reversed(range(len(self._params))):
            p = self._params[i]
            key = (str(p.device), transport.wire_dtype(p.dtype))
            members = groups.setdefault(key, [])
            limit = _FIRST_BUCKET_BYTES if not closed else cap_bytes
            size = p.numel() * key[1].itemsize
            if members and sizes[key] + size > min(limit, cap_bytes):
                closed.append((key, members))
                members = groups[key] = []
                sizes[key] = 0
            members.append(i)
            sizes[key] = sizes.get(key, 0) + size
        closed.extend((key, members) for key, members in groups.items() if members)
        buckets, bucket_of = [], {}
        with no_grad():
            for (_, wire_dtype), members in closed:
                total = sum(self._params[i].numel() for i in members)
                buffer = zeros(total, dtype=wire_dtype, device=self._params[members[0]].device)
                slots, offset = [], 0
                for i in members:
                    p = self._params[i]
                    slots.append(buffer[offset : offset + p.numel()].view(tuple(p.shape)))
                    bucket_of[i] = (len(buckets), len(slots) - 1)
                    offset += p.numel()
                buckets.append(_Bucket(members, buffer, slots))
        return buckets, bucket_of

    # ------------------------------------------------------------------ forward
    def forward(self, *inputs, **kwargs):
        self._check_previous_iteration()
        if self.broadcast_buffers and self.world_size > 1:
            self._sync_from_rank0(self.module.buffers())
        output = self.module(*inputs, **kwargs)
        if is_grad_enabled() and self.require_backward_grad_sync and self._params:
            self._prepare_for_backward(output)
        else:
            self._iteration = None
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Backward passes of forwards run inside this block only accumulate gradients locally; the
        first synchronised backward after it averages the accumulated sums."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def _check_previous_iteration(self):
        it = self._iteration
        if it is None or it.finished or it.hooks_fired == 0:
            return
        missing = [self._names[i] for i, ready in enumerate(it.ready) if not ready]
        listed = ", ".join(f"'{n}'" for n in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise DistributedError(
            "DistributedDataParallel: the previous backward did not produce gradients for every parameter, so "
            f"its reduction never finished: {listed} got none. If the forward does not use every parameter, "
            "pass find_unused_parameters=True; the loss must depend on the output of every forward of the "
            "wrapped model"
        )

    def _prepare_for_backward(self, output):
        it = self._iteration = _Iteration(len(self._params))
        for bucket in self._buckets:
            bucket.pending = len(bucket.params)
            bucket.work = None
        if not self.find_unused_parameters:
            return
        reached = _reachable_leaves(output)
        used = [id(p) in reached for p in self._params]
        mask = make_tensor([int(u) for u in used], dtype=dtypes.int32, device=self.device)
        it.locally_used = (mask, dist.all_reduce(mask, dist.ReduceOp.MAX, async_op=True))
        for i, is_used in enumerate(used):
            if not is_used:
                self._write_slot(i, self._params[i].grad)
                self._mark_ready(i, from_hook=False)

    # ------------------------------------------------------------------ backward
    def _gradient_hook(self, index):
        def reduce_when_ready(grad):
            it = self._iteration
            if it is None:
                return None  # a forward under no_sync(), or run without the wrapper
            if it.ready[index]:
                raise DistributedError(
                    f"DistributedDataParallel: parameter '{self._names[index]}' received a gradient twice after one "
                    "forward; run one backward per forward of the wrapped model (accumulate several under "
                    "no_sync())"
                )
            p = self._params[index]
            with no_grad():
                contribution = grad if p.grad is None else (p.grad + grad).to(dtype=p.dtype)
            self._write_slot(index, contribution)
            p.grad = None
            self._mark_ready(index, from_hook=True)
            if self._iteration.finished:
                return self._slot_value(index)  # the average: this gradient completed the last bucket
            return None if contribution is grad else contribution

        return reduce_when_ready

    def _write_slot(self, index, contribution):
        """Copy this rank's contribution (None: nothing, a zero) into the parameter's bucket slot."""
        b, s = self._bucket_of[index]
        slot = self._buckets[b].slots[s]
        with no_grad():
            if contribution is None:
                slot.zero_()
            else:
                slot.copy_(contribution)

    def _slot_value(self, index):
        """A copy of the parameter's slot (after the reduction: the average) as its gradient."""
        b, s = self._bucket_of[index]
        with no_grad():
            return self._buckets[b].slots[s].to(dtype=self._params[index].dtype, copy=True)

    def _mark_ready(self, index, from_hook):
        """Count ``index`` in; launch every complete bucket that is next in order; once all are
        launched, wait for them and hand out the averages."""
        it = self._iteration
        it.ready[index] = True
        it.hooks_fired += 1
        bucket = self._buckets[self._bucket_of[index][0]]
        bucket.pending -= 1
        while it.next_bucket < len(self._buckets) and self._buckets[it.next_bucket].pending == 0:
            launching = self._buckets[it.next_bucket]
            with record_function(f"DistributedDataParallel.all_reduce(bucket {it.next_bucket})"):
                launching.work = dist.all_reduce(launching.buffer, dist.ReduceOp.AVG, async_op=True)
            it.next_bucket += 1
        for earlier in self._buckets[: it.next_bucket]:
            earlier.work.is_completed()  # lets MPI progress the transfers in flight while backward computes
        if it.next_bucket == len(self._buckets):
            self._finish(index if from_hook else None)

    def _finish(self, current):
        """Wait for every bucket; write the averages into the ``.grad`` of every parameter but
        ``current`` (its hook returns the average to the engine instead)."""
        it = self._iteration
        with record_function("DistributedDataParallel.wait(all buckets)"):
            for bucket in self._buckets:
                bucket.work.wait()
        globally_used = None
        if it.locally_used is not None:
            mask, work = it.locally_used
            work.wait()
            globally_used = mask.tolist()
        grads, averages = [], []
        for bucket in self._buckets:
            for s, i in enumerate(bucket.params):
                if i == current:
                    continue
                p = self._params[i]
                if p.grad is not None:
                    grads.append(p.grad)
                    averages.append(bucket.slots[s])
                elif globally_used is not None and globally_used[i]:
                    p.grad = self._slot_value(i)
        with no_grad():
            _foreach_copy_(grads, averages)
        it.finished = True


def _reachable_leaves(output):
    """ids of the leaf tensors whose gradients the output's graph reaches."""
    stack, reached, seen = [], set(), set()
    for t in _tensors_in(output):
        if t.grad_fn is not None:
            stack.append(t.grad_fn)
        elif t.requires_grad:
            reached.add(id(t))
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None:
            reached.add(id(variable))
        stack.extend(child for child, _ in node.next_functions if child is not None)
    return reached


def _tensors_in(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)


def _describe(entry):
    if entry is None:
        return "missing"
    name, shape, dtype = entry
    return f"'{name}' of shape {fmt_shape(shape)} ({dtype})"
