"""The tests share code only through the support modules at the top of ``tests/``.

Only ``tests/`` itself is on ``sys.path`` (``tests/conftest.py``), so a test file imports ``helpers``,
``fuzz_programs``, ``fuzz_check``... and never another test module: pytest puts a test file's folder on
``sys.path`` only when it collects it, so ``from test_x import y`` would work or fail with the collection
order and the files selected. Static checks (``ast``) over every Python file under ``tests/``.
"""

from __future__ import annotations

import ast
import pathlib

from helpers import ROOT_DIR

TESTS = pathlib.Path(ROOT_DIR) / "tests"


def _local_modules() -> tuple[set[str], dict[str, pathlib.Path]]:
    """The support modules importable by name (``tests/*.py``) and every other module in a subfolder."""
    top = {p.stem for p in TESTS.glob("*.py") if p.stem != "conftest"}
    nested = {p.stem: p for p in TESTS.rglob("*.py") if p.parent != TESTS}
    return top, nested


def bad_imports(source: str, top: set[str], nested: dict[str, pathlib.Path]) -> list[tuple[int, str]]:
    """(line, why) for each import in ``source`` of a test module, of a module in a subfolder of
    ``tests/`` (not on ``sys.path``), or of a support module's private name."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [(node.module, [a.name for a in node.names])]
        else:
            continue
        for module, names in modules:
            head = module.split(".")[0]
            if head.startswith("test_"):
                bad.append((node.lineno, f"imports the test module {module}: move what it shares to tests/helpers.py "
                                         "or a support module at the top of tests/"))
            elif head in nested and head not in top:
                bad.append((node.lineno, f"imports {module} ({nested[head].relative_to(TESTS)}), which is not on "
                                         "sys.path: only tests/ is"))
            elif head in top:
                private = [n for n in names if n.startswith("_")]
                if private:
                    bad.append((node.lineno, f"imports {module}'s private {', '.join(private)}: make it public there"))
    return bad


def test_no_test_module_imports_another_or_its_private_names() -> None:
    top, nested = _local_modules()
    found = [f"{p.relative_to(TESTS)}:{line}: {why}"
             for p in sorted(TESTS.rglob("*.py")) for line, why in bad_imports(p.read_text(), top, nested)]
    assert not found, "\n".join(found)


def test_the_import_check_can_fail() -> None:
    top, nested = {"helpers", "fuzz_programs"}, {"ddp_probe": TESTS / "probes" / "ddp_probe.py"}
    source = ("import test_fuzz\nfrom test_engine import EXAMPLE_PARAMS\nfrom helpers import _private, sync\n"
              "from ddp_probe import main\nimport torch\nfrom helpers import assert_same\n"
              "def f():\n    from test_scan import _layers\n")
    assert sorted(line for line, _ in bad_imports(source, top, nested)) == [1, 2, 3, 4, 8]
