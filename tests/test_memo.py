"""The bounded memo (adcuda/backends/memo.py) that every per-call memo of shapes, layouts, plans and grids
stores its misses through: its bound, its one eviction policy, and memos that use it staying bounded
while they keep what a program now asks for."""

import adcuda as torch
from adcuda.backends.memo import remember
from adcuda.ops import layout


def test_remember_stores_and_gives_the_value_back():
    memo = {}
    value = (3, 4)
    assert remember(memo, "k", value, 4) is value
    assert memo == {"k": value}


def test_a_new_key_at_the_bound_empties_the_memo_first():
    memo = {}
    for k in range(3):
        remember(memo, k, k * 10, 3)
    assert memo == {0: 0, 1: 10, 2: 20}  # up to the bound: all kept
    remember(memo, 3, 30, 3)
    assert memo == {3: 30}  # a fourth key: the memo emptied, the new entry in


def test_a_known_key_at_the_bound_is_replaced_in_place():
    memo = {}
    for k in range(3):
        remember(memo, k, k, 3)
    remember(memo, 1, "again", 3)
    assert memo == {0: 0, 1: "again", 2: 2}


def test_a_memo_of_the_ops_stays_bounded_and_keeps_the_latest_shapes():
    # a sweep of more shapes than squeeze's memo keeps: it never holds more than its bound, and the
    # shapes asked for last are kept (a memo that stopped storing once full would miss them forever)
    layout._SQUEEZED.clear()
    bound = layout._SHAPES_KEPT
    for n in range(2, bound + 40):
        torch.zeros(1, n, 1).squeeze()
        assert len(layout._SQUEEZED) <= bound
    assert layout._SQUEEZED[1, bound + 39, 1] == (bound + 39,)
    assert torch.zeros(1, 5, 1).squeeze().shape == (5,)
