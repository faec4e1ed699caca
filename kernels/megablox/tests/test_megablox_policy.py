"""The tiling policy: TPU-shaped tiles, never larger than the largest that compiled, and the
waste of groups that start mid-tile kept within an eighth of the rows."""

import numpy as np
import pytest

from zoo_megablox import MAX_TILES, Tiling, choose_tiling, tiling_problem


@pytest.mark.parametrize("dtype", sorted(MAX_TILES))
def test_random_shapes_get_tpu_shaped_tiles_within_the_limits(dtype):
    rng = np.random.default_rng()
    for _ in range(500):
        m, k, n = (int(x) for x in rng.integers(1, 20000, 3))
        groups = int(rng.integers(1, 65))
        t = choose_tiling(m, k, n, groups, dtype)
        assert tiling_problem(t, dtype) is None, (m, k, n, groups, t)
        assert all(x <= y for x, y in zip(t.as_tuple(), MAX_TILES[dtype], strict=True))
        assert t.tm & (t.tm - 1) == 0 and t.tm >= 128
        # Never wider than the dimension needs (rounded up to the lane width) ...
        assert t.tk < k + 128 and t.tn < n + 128
        # ... and a larger tm only while a tile a group stays within an eighth of the rows.
        assert t.tm == 128 or groups * t.tm * 8 <= m


def test_mixtral_like_shapes():
    # 32k routed rows per device, 8 local experts, Mixtral's widths.
    assert choose_tiling(32768, 4096, 14336, 8, "bfloat16") == Tiling(512, 1024, 1024)
    assert choose_tiling(32768, 14336, 4096, 8, "float32") == Tiling(512, 512, 512)
    # A small layer: the tiles shrink to the dimensions.
    assert choose_tiling(96, 16, 24, 8, "bfloat16") == Tiling(128, 128, 128)


@pytest.mark.parametrize(
    ("tiling", "dtype", "bad"),
    [
        (Tiling(128, 128, 128), "float32", False),
        (Tiling(8, 128, 256), "float32", False),
        (Tiling(8, 128, 256), "bfloat16", True),
        (Tiling(128, 64, 128), "float32", True),
        (Tiling(128, 128, 0), "float32", True),
    ],
)
def test_fixed_tilings_are_checked(tiling, dtype, bad):
    assert (tiling_problem(tiling, dtype) is not None) == bad
