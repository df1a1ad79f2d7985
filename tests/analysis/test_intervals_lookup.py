"""`intervals.lookup`: the join of GPU activity to its launching call by correlation id."""

from __future__ import annotations

import numpy as np

from membound.analysis import intervals as iv


def test_lookup_finds_the_first_equal_key_and_minus_one_for_none():
    keys = np.array([7, 3, -1, 3, 9])
    got = iv.lookup(keys, np.array([3, 9, 4, -1, 7, 10]))
    # 3 stands at 1 and 3: the first; 4 and 10 are absent; a negative query matches nothing
    assert got.tolist() == [1, 4, -1, -1, 0, -1]
    assert iv.lookup(np.array([], dtype=np.int64), np.array([1])).tolist() == [-1]
    assert iv.lookup(keys, np.array([], dtype=np.int64)).tolist() == []
