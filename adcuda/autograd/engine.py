"""The backward engine: non-recursive, in dependency order.

1. Walk the graph from the roots (an explicit stack, so a 100,000-op chain is fine), find the
   nodes that lead to a leaf's .grad (or to a captured input) and count, for each, how many edges
   from running nodes point at it.
2. Run nodes whose count reached zero; each sums the gradients that arrived for its outputs, runs
   its tensor hooks, calls its backward rule (with grad mode = ``create_graph``, so backward rules
   written with differentiable ops give higher-order gradients) and hands the results on.
"""

from .. import dtypes as dt
from ..backends.float_errors import QUIET, quiet, restore
from ..errors import AutogradError
from ..tensor import Tensor, primitives
from . import anomaly
from .grad_mode import state as grad_state
from .graph import FREED_MESSAGE, AccumulateGrad, edge_of, take_grad_for_leaf, version_counter

# Set through ``set_backward_observer`` by the profiler while it emits NVTX ranges or records a
# profile: backward rules and leaf accumulations then run as ``backward_observer(node, fn, *args)``,
# which calls ``fn(*args)`` in a range.
backward_observer = None


def set_backward_observer(observer):
    """Install ``observer(node, fn, *args)`` (or None); returns the previous one."""
    global backward_observer
    previous, backward_observer = backward_observer, observer
    return previous


def _collect(roots, capture_nodes):
    """Which nodes lead to something useful (a leaf's .grad or a captured input), and, among those
    whose backward rule must run, how many edges from running nodes point at each node. One
    depth-first walk: a node is settled after its inputs' nodes (the graph is acyclic)."""
    needed = {}
    deps = {}
    runs = set()
    stack = [(node, False) for node in roots]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if node in needed:
                continue
            useful = node in capture_nodes if capture_nodes is not None else node.__class__ is AccumulateGrad
            for edge in node.next_edges:
                if edge is not None and needed[edge[0]]:
                    useful = True
                    child = edge[0]
                    deps[child] = deps.get(child, 0) + 1
                    runs.add(node)
            needed[node] = useful
            continue
        if node in needed:
            continue
        stack.append((node, True))
        for edge in node.next_edges:
            if edge is not None and edge[0] not in needed:
                stack.append((edge[0], False))
    return deps, needed, runs


def _count_inputs(roots):
    """For backward into the leaves (no captured inputs): how many edges point at each node reached
    from ``roots``. Every recorded node leads to a leaf's AccumulateGrad (a node is recorded only for
    an input that takes part in the graph), so every node reached is needed and runs: one walk."""
    deps = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        for edge in node.next_edges:
            if edge is not None:
                child = edge[0]
                count = deps.get(child)
                if count is None:
                    deps[child] = 1
                    stack.append(child)
                else:
                    deps[child] = count + 1
    return deps


def _all_finite(t):
    bk = primitives(t)
    finite = bk.binary("eq", t._data, t._data, t.dtype)  # NaN != NaN
    bounded = bk.binary("lt", bk.unary("abs", t._data), float("inf"), t.dtype)
    every_dim = tuple(range(t._data.ndim))  # the seam's reduce takes its axes as a tuple, on every backend
    return bool(bk.to_numpy(bk.reduce("all", bk.binary("logical_and", finite, bounded, dt.bool_), every_dim, False)))


def _add_into(grad, g):
    """``grad += g`` on the arrays, outside the graph (accumulation into an existing ``.grad``)."""
    bk = primitives(grad)
    bk.copy_(grad._data, bk.binary("add", grad._data, g._data, grad.dtype))
    version_counter(grad).value += 1


def _sum(a, b):
    """Two gradients for one output, added: by the primitive where nothing is recorded and they have
    one shape and dtype (the usual case: a residual connection, the pieces of a split), else by the op."""
    if (
        not grad_state.enabled
        and a.__class__ is Tensor
        and b.__class__ is Tensor
        and a.dtype is b.dtype
        and a._device is b._device
        and a._data.shape == b._data.shape
    ):
        return Tensor._make(primitives(a).binary("add", a._data, b._data, a.dtype), a._device)
    return a + b


def _check_anomaly(node, results):
    for i, g in enumerate(results):
        if isinstance(g, Tensor) and g.dtype.is_floating_point and not _all_finite(g):
            raise AutogradError(
                f"Function '{node.name}' returned nan or inf values in its {i}th output." + _where_created(node)
            )


def _where_created(node):
    if node.trace:
        return f"\nThe forward call that created it (most recent call last):\n{node.trace}"
    return "\n(run the forward under detect_anomaly() to see where it was called)"


def _run_hooks(node, grads):
    """Tensor hooks on the node's outputs (a leaf's own hooks for AccumulateGrad), then the
    retain_grad hooks, which see the gradient the other hooks produced."""
    if isinstance(node, AccumulateGrad):
        leaf = node.variable
        if leaf is not None and leaf._hooks and grads[0] is not None:
            for hook in list(leaf._hooks.values()):
                result = hook(grads[0])
                if result is not None:
                    grads[0] = result
        return
    if node.pre_hooks:
        for nr, hooks in node.pre_hooks.items():
            for hook in list(hooks.values()):
                if grads[nr] is not None:
                    result = hook(grads[nr])
                    if result is not None:
                        grads[nr] = result
    if node.retain_hooks:
        for nr, hook in node.retain_hooks.items():
            if grads[nr] is not None:
                hook(grads[nr])


def _accumulate_into_leaf(node, grads, create_graph):
    leaf = node.variable
    if leaf is None:
        return
    if leaf.grad is not None and not create_graph:
        g = grads[0]
        if g is not None:
            _add_into(leaf.grad, g)
        return
    g, exclusive = take_grad_for_leaf(grads)
    if g is None:
        return
    if create_graph:
        # the sum keeps the graph; a fresh tensor either way, so leaves never share a .grad
        leaf.grad = (g if exclusive else g.clone()) if leaf.grad is None else leaf.grad + g
    elif exclusive and g._grad_fn is None and not g._requires_grad:
        # (made outside any graph, and nothing else refers to it: the gradient itself, its array made
        # contiguous, without the detach and contiguous calls below)
        data = primitives(g).contiguous(g._data)
        leaf.grad = g if data is g._data else Tensor._make(data, g._device)
    else:
        leaf.grad = g.detach().contiguous() if exclusive else g.detach().clone()


def _accumulate(node, grads, create_graph, capture_map, captured):
    """A leaf's sink: its hooks, then the gradient into ``.grad`` (or into ``captured``)."""
    leaf = node.variable
    if leaf is not None and leaf._hooks:
        _run_hooks(node, grads)
    if capture_map is not None:
        if node in capture_map:
            for nr, i in capture_map[node]:
                captured[i] = grads[nr]
    elif backward_observer is None:
        _accumulate_into_leaf(node, grads, create_graph)
    else:
        backward_observer(node, _accumulate_into_leaf, node, grads, create_graph)


def _run_node(node, grads, check, capture_map, captured, runs, retain_graph):
    """A node's step with everything that may watch it: hooks, captured inputs, anomaly checks, the
    profiler's observer. None where the node's backward rule must not run (it leads to no captured
    input)."""
    if node.pre_hooks or node.retain_hooks:
        _run_hooks(node, grads)
    if capture_map is not None and node in capture_map:
        for nr, i in capture_map[node]:
            captured[i] = grads[nr]
    if runs is not None and node not in runs:
        return None
    if grads[0] is None and (len(grads) == 1 or all(g is None for g in grads)):
        return (None,) * len(node.next_edges)
    results = _call_backward(node, grads, check)
    if not retain_graph:
        node.release()
    return results


def _call_backward(node, grads, check):
    if node._released:
        raise AutogradError(FREED_MESSAGE)
    try:
        results = (
            node.backward_fn(node, *grads)
            if backward_observer is None
            else backward_observer(node, node.backward_fn, node, *grads)
        )
    except Exception as e:
        if check and node.trace:
            e.add_note(f"Error in the backward of {node.name}." + _where_created(node))
        raise
    if not isinstance(results, (tuple, list)):
        results = (results,)
    if check:
        _check_anomaly(node, results)
    return results


def run_backward(roots, root_grads, retain_graph, create_graph, capture=None, allow_unused=False):
    """Backpropagate ``root_grads`` from ``roots`` (tensors).

    With ``capture`` (a list of tensors) gradients are returned for them instead of accumulated
    into leaves' ``.grad`` (``autograd.grad``).
    """
    root_nodes = []
    buffers = {}
    for t, g in zip(roots, root_grads):
        node, nr = edge_of(t) or (None, 0)
        if node is None:
            raise AutogradError("element 0 of tensors does not require grad and does not have a grad_fn")
        root_nodes.append(node)
        buf = buffers.setdefault(node, [None] * node.num_outputs)
        buf[nr] = g if buf[nr] is None else buf[nr] + g

    capture_map = None
    if capture is not None:
        capture_map = {}
        for i, t in enumerate(capture):
            node, nr = edge_of(t) or (None, 0)
            if node is None:
                raise AutogradError(f"autograd.grad: input {i} does not require grad")
            capture_map.setdefault(node, []).append((nr, i))
    root_nodes = list(dict.fromkeys(root_nodes))  # each once, in order
    if capture_map is None:
        deps, runs = _count_inputs(root_nodes), None
    else:
        deps, _, runs = _collect(root_nodes, capture_map)
    captured = [None] * (len(capture) if capture is not None else 0)

    ready = [n for n in root_nodes if n not in deps]
    check = anomaly.enabled_somewhere and anomaly.is_anomaly_enabled()
    # nothing watches, checks or captures: a node without hooks runs its backward rule directly
    plain = not check and backward_observer is None and capture_map is None
    prev_mode = grad_state.enabled
    grad_state.enabled = bool(create_graph)
    # backward rules compute with NumPy silent about inf and nan, as every op's entry does (float_errors.py)
    numpy_state = quiet(QUIET)
    try:
        while ready:
            node = ready.pop()
            grads = buffers.pop(node, None) or [None] * node.num_outputs
            if node.__class__ is AccumulateGrad:
                _accumulate(node, grads, create_graph, capture_map, captured)
                continue
            if plain and node.pre_hooks is None and node.retain_hooks is None:
                if grads[0] is None and (len(grads) == 1 or all(g is None for g in grads)):
                    results = (None,) * len(node.next_edges)
                else:
                    # (a node whose saved values were freed raises the error itself, reading them)
                    results = node.backward_fn(node, *grads)
                    if results.__class__ is not tuple and results.__class__ is not list:
                        results = (results,)
                    if not retain_graph and node._saved is not None:
                        node.release()
            else:
                results = _run_node(node, grads, check, capture_map, captured, runs, retain_graph)
                if results is None:
                    continue
            # drop our references, so a gradient that reaches a leaf unshared can become its .grad
            grads = None
            # hand each input's gradient to the node it flows into; queue the nodes that have them all
            for edge, g in zip(node.next_edges, results):
                if edge is None:
                    continue
                child = edge[0]
                remaining = deps.get(child)
                if remaining is None:  # leads to nothing that wants a gradient
                    continue
                if g is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        if child.num_outputs == 1:
                            buffers[child] = [g]
                        else:
                            buf = buffers[child] = [None] * child.num_outputs
                            buf[edge[1]] = g
                    else:
                        nr = edge[1]
                        buf[nr] = g if buf[nr] is None else _sum(buf[nr], g)
                if remaining == 1:
                    ready.append(child)
                deps[child] = remaining - 1
            # (the loop's last gradient too: the node queued last runs next, and may be the leaf it is for)
            results = g = None
    finally:
        grad_state.enabled = prev_mode
        restore(numpy_state)

    if capture is not None:
        for i, g in enumerate(captured):
            if g is None and not allow_unused:
                raise AutogradError(
                    f"autograd.grad: one of the differentiated tensors (input {i}) appears to not have "
                    "been used in the graph. Set allow_unused=True if this is the desired behavior."
                )
        return tuple(captured)
    return None
