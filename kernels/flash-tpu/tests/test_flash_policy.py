"""The block-size policy table and the kernel's support check."""

from __future__ import annotations

import pytest

import zoo_attention
from zoo_flash_tpu import GENERATIONS, KERNEL, BlockSizes, choose_block_sizes, generation_for
from zoo_flash_tpu._policy import INTERPRET, backward_vmem_bytes, forward_vmem_bytes


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("TPU v4", "v4"),
        ("TPU v5 lite", "v5e"),
        ("TPU v5", "v5p"),
        ("TPU v5p", "v5p"),
        ("TPU v6 lite", "v6e"),
    ],
)
def test_table_is_keyed_by_device_kind(kind: str, name: str) -> None:
    gen = generation_for(kind)
    assert gen.name == name
    assert gen.vmem_limit_bytes <= gen.vmem_bytes


def test_unknown_kind_is_conservative_and_interpret_is_small() -> None:
    assert generation_for("TPU v99").vmem_limit_bytes == GENERATIONS["TPU v4"].vmem_limit_bytes
    assert generation_for(None) is INTERPRET
    assert max(INTERPRET.preferred.__dict__.values()) <= 128


@pytest.mark.parametrize("kind", sorted(GENERATIONS))
@pytest.mark.parametrize("head_dim", [64, 96, 128, 256])
@pytest.mark.parametrize("itemsize", [2, 4])
def test_chosen_blocks_fit_the_budget(kind: str, head_dim: int, itemsize: int) -> None:
    gen = GENERATIONS[kind]
    blocks = choose_block_sizes(
        gen, q_len=131072, kv_len=131072, head_dim=head_dim, itemsize=itemsize
    )
    hp = -(-head_dim // 128) * 128
    assert forward_vmem_bytes(blocks.block_q, blocks.block_kv, hp, itemsize) <= gen.budget_bytes
    assert (
        backward_vmem_bytes(blocks.block_q_bwd, blocks.block_kv_bwd, hp, itemsize)
        <= gen.budget_bytes
    )
    assert min(blocks.__dict__.values()) >= 128


def test_blocks_never_exceed_the_padded_length_and_overrides_win() -> None:
    gen = GENERATIONS["TPU v6 lite"]
    small = choose_block_sizes(gen, q_len=200, kv_len=90, head_dim=128, itemsize=2)
    assert small == BlockSizes(256, 128, 256, 128)
    mine = BlockSizes(128, 256, 384, 128)
    assert (
        choose_block_sizes(gen, q_len=4096, kv_len=4096, head_dim=64, itemsize=2, override=mine)
        is mine
    )


@pytest.mark.parametrize("bad", [0, 100, -128, 64])
def test_block_sizes_must_be_lane_multiples(bad: int) -> None:
    with pytest.raises(ValueError, match="multiple of 128"):
        BlockSizes(block_q=bad)


def _spec(**kw: object) -> zoo_attention.AttentionSpec:
    base = {
        "batch": 1, "q_len": 8, "kv_len": 8, "num_heads": 2, "num_kv_heads": 1, "head_dim": 64,
        "dtype": "float32", "platform": "tpu", "scale": 0.125,
    }  # fmt: skip
    return zoo_attention.AttentionSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_check_refuses_what_it_cannot_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KERNEL.check(_spec()) is None
    assert "float16" in KERNEL.check(_spec(dtype="float16"))
    assert "head_dim" in KERNEL.check(_spec(head_dim=512))
    monkeypatch.delenv("ZOO_FLASH_TPU_INTERPRET")
    reason = KERNEL.check(_spec(platform="cpu"))
    assert reason is not None and "ZOO_FLASH_TPU_INTERPRET=1" in reason
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    assert KERNEL.check(_spec(platform="cpu")) is None


def test_registered_through_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = zoo_attention.get_kernel("flash_tpu")
    assert kernel is KERNEL
    monkeypatch.delenv("ZOO_FLASH_TPU_INTERPRET")
    assert kernel.platforms == ("tpu",)
    # Outside interpret mode flash_tpu is in no CPU default order, whatever else is installed.
    assert "flash_tpu" not in [k.name for k in zoo_attention.default_order("cpu")]
    assert "flash_tpu" in [k.name for k in zoo_attention.default_order("tpu")]


def test_interpret_mode_puts_the_kernel_first_on_any_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ZOO_ATTENTION", raising=False)
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    assert zoo_attention.default_order("cpu")[0] is KERNEL
    resolution = zoo_attention.resolve(_spec(platform="cpu"))
    assert (resolution.kernel, resolution.source, resolution.skipped) == (
        "flash_tpu",
        "default",
        (),
    )
