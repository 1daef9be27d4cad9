"""Bounded memos: the plain dicts that keep what a per-call path works out once per shape, layout or
arguments (a squeeze's shape, an expand's strides, a pooling plan, a grid of positions), with one size
bound and one eviction policy for all of them.

A memo stays a plain ``dict`` so that a hit costs the one ``get`` (or subscript) the hot path already
does (a dict subclass makes each look-up some 20 ns slower, a method call per look-up more, on rows of
1-2 us). Only a miss goes through :func:`remember`. The policy: where the memo already holds ``bound`` entries and
``key`` is new, the memo is emptied before the entry goes in. A program calls with a few keys, which come
back at their next miss; a sweep of shapes (a benchmark, a test suite) cannot grow it without end; and
emptying is one atomic ``clear`` (a thread that reads the memo meanwhile misses and works the value out
again, where dropping one entry at a time would need a look at the memo's order that another thread may
change under it).

This module sits with the backends (the lowest layer that keeps memos) so that the backends and the ops
above them both use it."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, bound: int) -> V:
    """``value``, stored in ``memo`` under ``key``; ``memo`` emptied first where it already holds ``bound``
    entries and ``key`` is not one of them."""
    if len(memo) >= bound and key not in memo:
        memo.clear()
    memo[key] = value
    return value
