import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))

from envs import PACKAGES, ROOT, build_wheel, third_party_site


@pytest.fixture(scope="session")
def build_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compat")


@pytest.fixture(scope="session")
def site(build_root: Path) -> Path:
    """Third-party packages of the main environment, without any zoo distribution."""
    return third_party_site(build_root / "third-party")


@pytest.fixture(scope="session")
def wheels(build_root: Path) -> dict[str, Path]:
    """A wheel of every zoo package, built from the working tree."""
    dist = build_root / "dist-current"
    return {name: build_wheel(ROOT / path, dist) for name, path in PACKAGES.items()}


@pytest.fixture(scope="session")
def contract2_wheel(build_root: Path) -> Path:
    return build_wheel(
        Path(__file__).parent / "compat" / "contract2-kernel", build_root / "dist-contract2"
    )


@pytest.fixture
def env_dir(tmp_path: Path):
    yield tmp_path / "venv"
    shutil.rmtree(tmp_path / "venv", ignore_errors=True)
