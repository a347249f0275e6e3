"""Shared fixtures. XLA runs on the CPU here (PJRT_DEVICE=CPU).

torch_xla must be initialised before the first backward() of the process: the autograd engine
otherwise asserts on the XLA device index. So when torch_xla is installed, the device is created
at session start, before any test (CPU ones included) runs a backward.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

HAS_XLA = importlib.util.find_spec("torch_xla") is not None
XLA_SKIP_REASON = "torch_xla is not installed: `pip install -e '.[xla]'` (CI installs it, so XLA tests run there)"


def pytest_configure(config: pytest.Config) -> None:
    if HAS_XLA:
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        import torch_xla

        torch_xla.device()


@pytest.fixture(scope="session")
def xla_device() -> torch.device:
    if not HAS_XLA:
        pytest.skip(XLA_SKIP_REASON)
    import torch_xla

    return torch_xla.device()


@pytest.fixture(params=["cpu", "xla"])
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each test that takes it runs on CPU eager and on XLA:CPU."""
    if request.param == "xla":
        return request.getfixturevalue("xla_device")
    return torch.device("cpu")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
