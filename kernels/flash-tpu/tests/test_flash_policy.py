"""The block-size policy table and the kernel's support check."""

from __future__ import annotations

import dataclasses
import itertools
import logging

import jax
import jax.numpy as jnp
import pytest
from jax.experimental.pallas import tpu as pltpu

import zoo_attention
from zoo_flash_tpu import GENERATIONS, KERNEL, BlockSizes, choose_block_sizes, generation_for
from zoo_flash_tpu._api import make_config
from zoo_flash_tpu._policy import (
    INTERPRET,
    backward_vmem_bytes,
    forward_vmem_bytes,
    unknown_generation,
)


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


def test_unknown_kind_is_conservative_logged_and_interpret_is_small(caplog) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.WARNING, logger="zoo_flash_tpu"):
        unknown = generation_for("TPU v99")
        again = generation_for("TPU v99")
    assert unknown is again and unknown.vmem_limit_bytes == GENERATIONS["TPU v4"].vmem_limit_bytes
    assert [r.getMessage() for r in caplog.records if "'TPU v99'" in r.getMessage()] != []
    assert sum("'TPU v99'" in r.getMessage() for r in caplog.records) == 1  # logged once
    # The logger names the package; the message does not say it a second time.
    assert not any(r.getMessage().startswith("zoo_flash_tpu") for r in caplog.records)
    assert generation_for(None, interpret=True) is INTERPRET
    assert max(v for v in INTERPRET.preferred.__dict__.values() if v is not None) <= 128


def test_no_device_kind_is_no_warning(caplog) -> None:  # type: ignore[no-untyped-def]
    # A check about a TPU in general (a kernel listing on a CPU host) names no chip to warn about.
    unknown_generation.cache_clear()
    with caplog.at_level(logging.WARNING, logger="zoo_flash_tpu"):
        row = generation_for(None)
    assert row.vmem_limit_bytes == GENERATIONS["TPU v4"].vmem_limit_bytes
    assert caplog.records == []


def test_a_mosaic_compile_never_gets_the_interpret_row() -> None:
    q = jax.ShapeDtypeStruct((1, 4096, 4, 128), jnp.bfloat16)
    cfg = make_config(
        q, q, scale=1.0, is_causal=True, has_segments=False, local_window=None,
        logits_soft_cap=None, interpret=None,
    )  # fmt: skip
    assert generation_for(None) is not INTERPRET
    assert cfg.blocks == choose_block_sizes(
        GENERATIONS["TPU v4"], q_len=4096, kv_len=4096, head_dim=128, itemsize=2, heads=1
    )


@pytest.mark.parametrize(("kind", "chip"), [("TPU v4", "v4"), ("TPU v5 lite", "v5e"),
                                            ("TPU v5p", "v5p"), ("TPU v6 lite", "v6e")])  # fmt: skip
def test_vmem_sizes_are_jaxs_own(kind: str, chip: str) -> None:
    info = pltpu.get_tpu_info_for_chip(pltpu.ChipVersion(chip), 1)
    assert GENERATIONS[kind].vmem_bytes == info.vmem_capacity_bytes
    assert GENERATIONS[kind].vmem_limit_bytes <= info.vmem_capacity_bytes


def test_a_chip_jax_knows_but_the_table_does_not_gets_its_vmem_and_the_safe_limit() -> None:
    row = generation_for("TPU7x")
    assert (
        row.vmem_bytes
        == pltpu.get_tpu_info_for_chip(pltpu.ChipVersion("7x"), 1).vmem_capacity_bytes
    )
    assert row.vmem_limit_bytes == GENERATIONS["TPU v4"].vmem_limit_bytes
    assert row.preferred == GENERATIONS["TPU v4"].preferred


@pytest.mark.parametrize("kind", sorted(GENERATIONS))
@pytest.mark.parametrize("head_dim", [64, 96, 128, 256])
@pytest.mark.parametrize("itemsize", [2, 4])
@pytest.mark.parametrize("heads", [1, 8])
def test_chosen_blocks_fit_the_budget(kind: str, head_dim: int, itemsize: int, heads: int) -> None:
    gen = GENERATIONS[kind]
    blocks = choose_block_sizes(
        gen, q_len=131072, kv_len=131072, head_dim=head_dim, itemsize=itemsize, heads=heads
    )
    hp = -(-head_dim // 128) * 128
    fwd = forward_vmem_bytes(
        blocks.block_q, blocks.block_kv, hp, itemsize, heads, blocks.block_kv_compute
    )
    bwd = backward_vmem_bytes(
        blocks.block_q_bwd, blocks.block_kv_bwd, hp, itemsize, heads, blocks.block_kv_bwd_compute
    )
    assert max(fwd, bwd) <= gen.budget_bytes
    assert min(v for v in blocks.__dict__.values() if v is not None) >= 128
    assert blocks.block_kv % blocks.kv_compute == 0
    assert blocks.block_kv_bwd % blocks.kv_bwd_compute == 0


@pytest.mark.parametrize("kind", ["TPU v4", "TPU v5 lite", "TPU v6 lite"])
def test_compute_sub_blocks_let_the_dma_block_stay_large(kind: str) -> None:
    """Computing a key block in sub-blocks shrinks the float32 tiles, not the loads: the
    policy never picks smaller DMA blocks with them than it would computing whole blocks."""
    gen = GENERATIONS[kind]
    whole = dataclasses.replace(
        gen,
        preferred=dataclasses.replace(
            gen.preferred, block_kv_compute=None, block_kv_bwd_compute=None
        ),
    )
    larger = 0
    for head_dim, itemsize, heads in itertools.product((128, 256), (2, 4), (1, 8)):
        shape = {"q_len": 65536, "kv_len": 65536, "head_dim": head_dim, "itemsize": itemsize}
        sub = choose_block_sizes(gen, heads=heads, **shape)
        plain = choose_block_sizes(whole, heads=heads, **shape)
        assert sub.block_q * sub.block_kv >= plain.block_q * plain.block_kv
        assert sub.block_q_bwd * sub.block_kv_bwd >= plain.block_q_bwd * plain.block_kv_bwd
        larger += sub != dataclasses.replace(plain, **_computes(sub))
        if sub.block_kv_compute is not None:
            assert sub.block_kv_compute < sub.block_kv
    # Where VMEM is tight (v4; f32 with 256-wide heads on v6e) some DMA block is larger.
    assert larger > 0 or kind == "TPU v5 lite"


def _computes(blocks: BlockSizes) -> dict[str, int | None]:
    return {
        "block_kv_compute": blocks.block_kv_compute,
        "block_kv_bwd_compute": blocks.block_kv_bwd_compute,
    }


def test_compute_sub_blocks_must_divide_their_block() -> None:
    assert BlockSizes(128, 512, block_kv_compute=256).kv_compute == 256
    assert BlockSizes(128, 512).kv_compute == 512  # unset: the whole block
    with pytest.raises(ValueError, match="must divide block_kv=512"):
        BlockSizes(128, 512, block_kv_compute=384)
    with pytest.raises(ValueError, match="multiple of 128"):
        BlockSizes(128, 512, block_kv_bwd_compute=64)


def test_more_heads_per_step_never_need_larger_blocks() -> None:
    gen = GENERATIONS["TPU v4"]
    sizes = [
        choose_block_sizes(gen, q_len=65536, kv_len=65536, head_dim=256, itemsize=4, heads=p)
        for p in (1, 2, 4, 8)
    ]
    for fewer, more in itertools.pairwise(sizes):
        assert more.block_q * more.block_kv <= fewer.block_q * fewer.block_kv


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


# (query heads, key/value heads, head_dim, window) of the published Gemma 3 and Qwen3 models.
MODEL_SHAPES = {
    "gemma-3-1b": (4, 1, 256, (511, 0)),
    "gemma-3-4b": (8, 4, 256, (1023, 0)),
    "qwen3-0.6b": (16, 8, 128, None),
    "qwen3-8b": (32, 8, 128, None),
}


@pytest.mark.parametrize("kind", sorted(GENERATIONS))
@pytest.mark.parametrize("model", sorted(MODEL_SHAPES))
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_gemma3_and_qwen3_attention_is_served(kind: str, model: str, dtype: str) -> None:
    n, k, h, window = MODEL_SHAPES[model]
    spec = _spec(
        q_len=8192, kv_len=8192, num_heads=n, num_kv_heads=k, head_dim=h, dtype=dtype,
        is_causal=True, local_window=window, device_kind=kind,
    )  # fmt: skip
    assert KERNEL.check(spec) is None


def test_a_call_no_block_fits_falls_back_loudly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With too little VMEM for the smallest blocks the kernel says so, and the default order
    passes it over with a logged warning naming the reason."""
    import zoo_flash_tpu._kernel as kernel_module

    tight = dataclasses.replace(INTERPRET, name="tight", vmem_limit_bytes=4 * 2**20)
    monkeypatch.setattr(kernel_module, "generation_for", lambda kind, interpret: tight)
    monkeypatch.delenv("ZOO_ATTENTION", raising=False)
    monkeypatch.setenv("ZOO_FLASH_TPU_INTERPRET", "1")
    spec = _spec(platform="cpu", num_heads=8, num_kv_heads=1, head_dim=256)
    reason = KERNEL.check(spec)
    assert reason is not None and "above the tight limit of 4 MiB" in reason
    assert KERNEL.check(_spec(platform="cpu")) is None  # one small head still fits
    # A block of its own: the fallback warning is logged once per block.
    with zoo_attention.recording(), caplog.at_level(logging.WARNING):
        resolution = zoo_attention.resolve(spec)
    assert resolution.kernel != "flash_tpu" and resolution.source == "default"
    assert dict(resolution.skipped)["flash_tpu"] == reason
    assert any(reason in r.getMessage() for r in caplog.records)


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
