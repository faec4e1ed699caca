"""A batch placed as one packed array holds exactly the entries it was made from, and a step on
it computes what the same step computes on the plain batch."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from tiny_lm import loaders, make_model

import zoo_train
from zoo_train.parallel import BatchLayout, PackedBatch, make_mesh, make_rules


def random_batch(rng: np.random.Generator, rows: int = 4, width: int = 16) -> dict:
    ints = lambda: rng.integers(-(2**31), 2**31 - 1, (rows, width), dtype=np.int32)
    return {
        "input_ids": ints(),
        "targets": ints(),
        "segment_ids": ints(),
        "loss_mask": rng.normal(size=(rows, width)).astype(np.float32),
        "weights": (rng.normal(size=(rows, width)) * 1e30).astype(np.float32),
    }


def test_a_packed_batch_unpacks_bit_for_bit_inside_jit():
    rng = np.random.default_rng()
    batch = random_batch(rng)
    layout = BatchLayout(make_mesh(), make_rules(), 4)
    packed = layout.place_packed(batch)
    assert isinstance(packed, PackedBatch) and packed.rows.shape == (4, 5, 16)
    out = jax.jit(lambda b: b.unpack())(packed)
    assert set(out) == set(batch)
    for name, value in batch.items():
        assert out[name].dtype == value.dtype
        np.testing.assert_array_equal(np.asarray(out[name]).view(np.int32), value.view(np.int32))
    assert {k: (v.shape, v.dtype) for k, v in packed.shapes().items()} == {
        k: (v.shape, v.dtype) for k, v in batch.items()
    }


@pytest.mark.parametrize(
    "change",
    [
        lambda b: {**b, "positions": np.zeros((4, 8), np.int32)},  # another shape
        lambda b: {**b, "input_ids": b["input_ids"].astype(np.int64)},  # 8-byte ids
        lambda b: {**b, "loss_mask": b["loss_mask"] > 0},  # bool
        lambda b: {**b, "pixels": np.zeros((4, 16, 3), np.float32)},  # not [B, T]
    ],
)
def test_batches_that_cannot_be_packed_are_placed_entry_by_entry(change):
    batch = change(random_batch(np.random.default_rng()))
    placed = BatchLayout(make_mesh(), make_rules(), 4).place_packed(batch)
    assert isinstance(placed, dict) and set(placed) == set(batch)
    for name, value in batch.items():
        np.testing.assert_array_equal(np.asarray(placed[name]), value)


def test_the_train_step_on_a_packed_batch_matches_the_plain_batch():
    train_data, _ = loaders(int(np.random.default_rng().integers(1000)))
    host = train_data.next_batch(4)
    mesh, rules = make_mesh(), make_rules()
    layout = BatchLayout(mesh, rules, 4)
    results = []
    optimizer = optax.adamw(1e-3)
    step = zoo_train.make_train_step(optimizer, zoo_train.make_lm_loss(), lambda s: 1e-3)
    for batch in (layout.place(host), layout.place_packed(host)):
        state = zoo_train.init_train_state(make_model(0), optimizer)
        state, metrics = step(batch, state)
        results.append((jax.tree.leaves(state.params), metrics))
    assert isinstance(layout.place_packed(host), PackedBatch)
    (p_plain, m_plain), (p_packed, m_packed) = results
    for a, b in zip(p_plain, p_packed, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert jnp.isfinite(m_packed["loss"]) and float(m_packed["loss"]) == float(m_plain["loss"])
