"""The backward engine: non-recursive, in dependency order.

1. Walk the graph from the roots (an explicit stack, so a 100,000-op chain is fine) and count, for
   each node, how many edges from needed nodes point at it.
2. Run nodes whose count reached zero; each sums the gradients that arrived for its outputs, runs
   its tensor hooks, calls its backward rule (with grad mode = ``create_graph``, so backward rules
   written with differentiable ops give higher-order gradients) and hands the results on.
"""
from ..errors import AutogradError
from . import anomaly
from .grad_mode import is_grad_enabled, _set_enabled
from .graph import FREED_MESSAGE, AccumulateGrad, take_grad_for_leaf


def _collect(roots, capture_nodes):
    """Dependency counts of the nodes that lead to something useful (a leaf's .grad or a capture)."""
    deps = {}
    needed = {}
    stack = [(node, False) for node in roots]
    visited = set()
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if capture_nodes is None:
                useful = isinstance(node, AccumulateGrad)
            else:
                useful = node in capture_nodes
            for edge in node.next_edges:
                if edge is not None and needed.get(edge[0]):
                    useful = True
            needed[node] = useful
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        for edge in node.next_edges:
            if edge is not None and edge[0] not in visited:
                stack.append((edge[0], False))
    for node, useful in needed.items():
        if not useful:
            continue
        for edge in node.next_edges:
            if edge is not None and needed[edge[0]]:
                deps[edge[0]] = deps.get(edge[0], 0) + 1
    return deps, needed


def _check_anomaly(node, results):
    from ..tensor import Tensor
    for i, g in enumerate(results):
        if isinstance(g, Tensor) and g.dtype.is_floating_point and not g._all_finite():
            where = f"\nThe forward call that created it:\n{node.trace}" if node.trace else (
                "\n(run the forward under detect_anomaly() to see where it was called)")
            raise AutogradError(f"Function '{node.name}' returned nan or inf values in its {i}th output."
                                + where)


def _accumulate_into_leaf(node, grads, create_graph):
    leaf = node.variable
    if leaf is None:
        return
    g, exclusive = take_grad_for_leaf(grads)
    if g is None:
        return
    if leaf._hooks:
        for hook in list(leaf._hooks.values()):
            result = hook(g)
            if result is not None:
                g, exclusive = result, False
    if create_graph:
        leaf.grad = g if leaf.grad is None else leaf.grad + g
    elif leaf.grad is None:
        leaf.grad = g.detach() if exclusive else g.detach().clone()
    else:
        leaf.grad._add_inplace_data(g)


def run_backward(roots, root_grads, retain_graph, create_graph, capture=None, allow_unused=False):
    """Backpropagate ``root_grads`` from ``roots`` (tensors).

    With ``capture`` (a list of tensors) gradients are returned for them instead of accumulated
    into leaves' ``.grad`` (``autograd.grad``).
    """
    root_nodes = []
    buffers = {}
    for t, g in zip(roots, root_grads):
        node, nr = t._edge()
        if node is None:
            raise AutogradError("element 0 of tensors does not require grad and does not have a grad_fn")
        root_nodes.append(node)
        buf = buffers.setdefault(node, [None] * node.num_outputs)
        buf[nr] = g if buf[nr] is None else buf[nr] + g

    capture_map = None
    if capture is not None:
        capture_map = {}
        for i, t in enumerate(capture):
            node, nr = t._edge()
            if node is None:
                raise AutogradError(f"autograd.grad: input {i} does not require grad")
            capture_map.setdefault(node, []).append((nr, i))
    deps, needed = _collect(root_nodes, capture_map)
    captured = [None] * (len(capture) if capture is not None else 0)

    ready = [n for n in dict.fromkeys(root_nodes) if deps.get(n, 0) == 0]
    check = anomaly.is_anomaly_enabled()
    prev_mode = is_grad_enabled()
    _set_enabled(create_graph)
    try:
        while ready:
            node = ready.pop()
            grads = buffers.pop(node, None) or [None] * node.num_outputs
            if node.pre_hooks:
                for nr, hooks in node.pre_hooks.items():
                    for hook in list(hooks.values()):
                        if grads[nr] is not None:
                            result = hook(grads[nr])
                            if result is not None:
                                grads[nr] = result
            if capture_map is not None and node in capture_map:
                for nr, i in capture_map[node]:
                    captured[i] = grads[nr]
            if isinstance(node, AccumulateGrad):
                if capture_map is None:
                    _accumulate_into_leaf(node, grads, create_graph)
                continue
            if not needed.get(node):
                continue
            if all(g is None for g in grads):
                results = (None,) * len(node.next_edges)
            else:
                if node._released:
                    raise AutogradError(FREED_MESSAGE)
                results = node.backward_fn(node, *grads)
                if not isinstance(results, (tuple, list)):
                    results = (results,)
                if check:
                    _check_anomaly(node, results)
                if not retain_graph:
                    node.release()
            for edge, g in zip(node.next_edges, results):
                if edge is None:
                    continue
                child, nr = edge
                if not needed.get(child):
                    continue
                if g is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        buf = buffers[child] = [None] * child.num_outputs
                    buf[nr] = g if buf[nr] is None else buf[nr] + g
                remaining = deps[child] - 1
                deps[child] = remaining
                if remaining == 0:
                    ready.append(child)
    finally:
        _set_enabled(prev_mode)

    if capture is not None:
        for i, g in enumerate(captured):
            if g is None and not allow_unused:
                raise AutogradError(
                    f"autograd.grad: one of the differentiated tensors (input {i}) appears to not have "
                    "been used in the graph. Set allow_unused=True if this is the desired behavior.")
        return tuple(captured)
    return None
