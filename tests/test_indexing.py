"""The per-tree gathers and scatters of :mod:`jaxpuct.indexing` against NumPy
indexing, under ``jit``, for ``[B]``, ``[B, A]`` and ``[K, B]`` indices, one and two
indexed axes, in-range and dropped writes, and adds of duplicate indices."""

from __future__ import annotations

import jax
import numpy as np

from jaxpuct.indexing import row_add, row_set, row_take


def test_reads_and_writes_match_numpy_indexing():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 5, 2)).astype(np.float32)
    rows = np.arange(3)
    i, j = rng.integers(0, 7, size=3), rng.integers(0, 5, size=3)
    wide = rng.integers(0, 7, size=(3, 4))  # [B, A]
    stacked = rng.integers(0, 7, size=(4, 3))  # [K, B]
    update = rng.normal(size=(3, 5, 2)).astype(np.float32)
    past_end = np.array([7, 2, 8])  # trees 0 and 2 write nothing
    duplicates = np.array([[1, 1, 2], [0, 3, 3], [6, 6, 6]])

    @jax.jit
    def run(x, update):
        return dict(
            one=row_take(x, i), two=row_take(x, i, j), wide=row_take(x, wide),
            wide_two=row_take(x, wide, wide % 5),
            stacked=row_take(x, stacked, tree_axis=1),
            set_one=row_set(x, i, update), set_two=row_set(x, (i, j), 1.5),
            set_past_end=row_set(x, past_end, update),
            add_duplicates=row_add(x, duplicates, 1.0),
            add_stacked=row_add(x, stacked, 2.0, tree_axis=1))

    got = jax.tree.map(np.asarray, run(x, update))
    np.testing.assert_array_equal(got["one"], x[rows, i])
    np.testing.assert_array_equal(got["two"], x[rows, i, j])
    np.testing.assert_array_equal(got["wide"], x[rows[:, None], wide])
    np.testing.assert_array_equal(got["wide_two"], x[rows[:, None], wide, wide % 5])
    np.testing.assert_array_equal(got["stacked"], x[rows[None, :], stacked])
    expected = x.copy()
    expected[rows, i] = update
    np.testing.assert_array_equal(got["set_one"], expected)
    expected = x.copy()
    expected[rows, i, j] = 1.5
    np.testing.assert_array_equal(got["set_two"], expected)
    expected = x.copy()
    expected[1, 2] = update[1]
    np.testing.assert_array_equal(got["set_past_end"], expected)
    expected = x.copy()
    np.add.at(expected, (rows[:, None], duplicates), 1.0)
    np.testing.assert_allclose(got["add_duplicates"], expected, rtol=1e-6)
    expected = x.copy()
    np.add.at(expected, (rows[None, :], stacked), 2.0)
    np.testing.assert_allclose(got["add_stacked"], expected, rtol=1e-6)
