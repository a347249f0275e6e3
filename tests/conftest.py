"""Shared fixtures. XLA runs on the CPU here (PJRT_DEVICE=CPU).

torch_xla must be initialised before the first backward() of the process: the autograd engine
otherwise asserts on the XLA device index. So when torch_xla is installed, the device is created
at session start, before any test (CPU ones included) runs a backward.

Tiers: `make test` runs ``-m "not slow"`` (the fast tier); `make test-all` runs everything. The fuzz
tests take their example counts from a hypothesis profile chosen by ``XLA_CKPT_FUZZ`` (``fast``, the
default, or ``full``), as JAX's ``JAX_NUM_GENERATED_CASES`` does.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest
import torch
from hypothesis import HealthCheck, settings

from xla_ckpt._base.warn import forgetting

# The tree is laid out by kind (unit/<layer>, integration/<kind>, peers, regressions, fuzz); shared code lives in
# the support modules at its top (helpers, fuzz_programs, fuzz_check, ...), imported by name from any folder.
# Only tests/ is put on sys.path: a test module never imports another (test_test_imports.py checks).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

HAS_XLA = importlib.util.find_spec("torch_xla") is not None

# Under pytest-xdist (`make test PYTEST_ARGS="-n 2"`, xdist installed by hand) each worker compiles into its own inductor cache: two
# processes writing one cache at once left truncated .so files ("file too short"). Set before any compile;
# subprocesses a test starts inherit it.
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _XDIST_WORKER:
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = (
        f"{os.environ.get('TORCHINDUCTOR_CACHE_DIR') or default_cache_dir()}-{_XDIST_WORKER}")
# Derandomized (the same programs on every run, so a red CI run reproduces locally), no deadline
# (an XLA example compiles), no example database (nothing written into the checkout).
_FUZZ_COMMON = dict(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck),
                    print_blob=True)
# max_examples is the CPU fuzz's count; fuzz_check.fuzz derives the XLA and verify counts from it.
FUZZ_PROFILES = {"fast": 25, "full": 200, "hunt": 2000}
for _name, _n in FUZZ_PROFILES.items():
    # ``hunt``: new programs on every run (not derandomized), for a search by hand, never in CI; a failure
    # it finds prints its ``@reproduce_failure`` blob, and the class of failure goes into the generator.
    _common = _FUZZ_COMMON if _name != "hunt" else {**_FUZZ_COMMON, "derandomize": False}
    settings.register_profile(_name, max_examples=_n, **_common)
FUZZ = os.environ.get("XLA_CKPT_FUZZ", "fast")
if FUZZ not in FUZZ_PROFILES:
    raise pytest.UsageError(f"XLA_CKPT_FUZZ={FUZZ!r}: expected one of {sorted(FUZZ_PROFILES)}")
settings.load_profile(FUZZ)

XLA_SKIP_REASON = "torch_xla is not installed: `pip install -e '.[xla]'` (CI installs it, so XLA tests run there)"


# XLA rounds a bf16 value to bf16 only where a compiled graph materialises it: by default
# (``xla_allow_excess_precision``) a fused consumer reads it in f32. Checkpointing moves the graph's
# boundaries (a saved value is materialised, a recomputed one is fused anew), so under autocast the
# checkpointed and the plain step round differently, by bf16 steps (docs/correctness.md). The tests
# compare with that rounding exact; the flag is read once, when torch_xla starts.
_EXACT_BF16 = "--xla_allow_excess_precision=false"
# XLA:CPU's LLVM code generation at -O0. The tests' programs are tiny, so compiling them is most of an XLA
# test's time, and -O0 halves it (the fast tier's XLA module zoo and engine cases: 35 s -> 20 s here). The
# flag picks LLVM's optimisation level only: XLA's HLO passes, hence the graphs, their fusion and buffer
# assignment (the compiled peaks the tests pin), are the same at every level.
_FAST_CPU_CODEGEN = "--xla_backend_optimization_level=0"


def pytest_configure(config: pytest.Config) -> None:
    if HAS_XLA:
        os.environ.setdefault("PJRT_DEVICE", "CPU")
        flags = os.environ.get("XLA_FLAGS")
        wanted = {"xla_allow_excess_precision": _EXACT_BF16}
        if os.environ["PJRT_DEVICE"] == "CPU":
            wanted["xla_backend_optimization_level"] = _FAST_CPU_CODEGEN
        added = [flag for key, flag in wanted.items() if key not in (flags or "")]
        if added:
            os.environ["XLA_FLAGS"] = " ".join([flags or "", *added]).strip()
        import torch_xla

        try:
            torch_xla.device()
            torch_xla.sync()
        finally:  # this process only: the probes and benches a test starts measure with XLA's defaults
            if flags is None:
                os.environ.pop("XLA_FLAGS", None)
            else:
                os.environ["XLA_FLAGS"] = flags


@pytest.fixture(scope="session")
def xla_device() -> torch.device:
    if not HAS_XLA:
        pytest.skip(XLA_SKIP_REASON)
    import torch_xla

    return torch_xla.device()


@pytest.fixture(params=["cpu", pytest.param("xla", marks=pytest.mark.xla)])
def device(request: pytest.FixtureRequest) -> torch.device:
    """Each test that takes it runs on CPU eager and on XLA:CPU (that case carries the ``xla`` mark,
    so ``-m "not xla"`` deselects it where torch_xla is missing)."""
    if request.param == "xla":
        return request.getfixturevalue("xla_device")
    return torch.device("cpu")


@pytest.hookimpl(tryfirst=True)  # before -m deselects: the slow mark added here counts
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        # `slow_on_xla`: the CPU case is fast, the XLA case (compiles for every variant) is slow tier.
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("slow_on_xla") and callspec is not None and callspec.params.get("device") == "xla":
            item.add_marker(pytest.mark.slow)
        if "cuda" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))


@pytest.fixture(autouse=True)
def _fresh_notices():
    """Each test starts with no once-per-process notice given (``xla_ckpt._base.warn``), and the
    process's record comes back after it: a test expecting a notice never depends on test order."""
    with forgetting():
        yield


@pytest.fixture(autouse=True)
def _compile_flag_restored():
    """Put back torch's process-wide "a non-infra dispatch mode is active" flag after each test.

    torch keeps it in one module global that every mode saves on enter and restores on exit; modes of
    two threads interleaving (the tests that replay regions on several threads at once) leave it set,
    and torch.compile then skips every later frame of the process (0 graphs). It is torch's race, not
    a value the library computes; without this a thread test would fail later, unrelated compiled tests.
    """
    from torch.utils import _python_dispatch

    before = _python_dispatch._is_in_any_mode_without_ignore_compile_internals
    yield
    _python_dispatch._is_in_any_mode_without_ignore_compile_internals = before


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches empty before and after the test: each compile is its own, never another test's hit.

    Not autouse (the compiled tests opt in with ``pytestmark``): test_compiled.py builds its compiled
    artifacts once per module and reuses them.
    """
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
