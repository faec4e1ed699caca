"""The README's version claims are true of the tree: every pinned or named kernel release is
one that releases.toml records, and every contract version it states is the one the tree's
zoo-attention provides (what `zoo kernels --here` prints)."""

from __future__ import annotations

import pathlib
import re
import tomllib

from packaging.version import Version

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
RELEASES = tomllib.loads((ROOT / "releases.toml").read_text())
# A kernel's name in zoo_attention and its distribution.
KERNELS = {
    "flash_tpu": "zoo-flash-tpu",
    "chunked": "zoo-chunked",
    "splash": "zoo-splash",
    "megablox": "zoo-megablox",
    "tokamax": "zoo-tokamax",
}


def _released(package: str, version: str) -> bool:
    return any(Version(v) == Version(version) for v in RELEASES.get(package, {}))


def test_every_pin_and_named_kernel_version_is_a_release():
    pins = re.findall(r"\b(zoo-[a-z-]+?)(==|>=)(\d+(?:\.\d+)+)\b", README)
    assert len(pins) >= 5  # the pin section's examples are found
    named = [
        (KERNELS[name], version)
        for name, version in re.findall(
            rf"`?\b({'|'.join(KERNELS)})`? \(?(\d+\.\d+\.\d+)\b(?!\.dev)", README
        )
    ]
    assert named  # `flash_tpu 0.1.1` in the pin section, `flash_tpu 0.3.0` in zoo compile's
    wrong = [f"{p} {v}" for p, _, v in pins if not _released(p, v)]
    wrong += [f"{p} {v}" for p, v in named if not _released(p, v)]
    assert not wrong, f"the README names versions that releases.toml does not record: {wrong}"


def test_every_contract_version_is_the_trees():
    from zoo_attention import CONTRACT_VERSION
    from zoo_attention.cross_entropy import CROSS_ENTROPY_CONTRACT_VERSION
    from zoo_attention.grouped import GROUPED_MATMUL_CONTRACT_VERSION

    here = re.findall(r"zoo kernels --here\s+# \w+ [\d.]+, contract (\d+\.\d+)", README)
    assert here == [CONTRACT_VERSION]
    assert re.findall(r"through the contract \((\d+\.\d+)\)", README) == [CONTRACT_VERSION]
    grouped = re.findall(r"grouped_matmul`, contract (\d+\.\d+)\)", README)
    assert grouped == [GROUPED_MATMUL_CONTRACT_VERSION]
    loss = re.findall(r"linear_cross_entropy`, contract (\d+\.\d+)\)", README)
    assert loss == [CROSS_ENTROPY_CONTRACT_VERSION]
