"""The version is written in one place (xla_ckpt/_base/version.py): pyproject reads it, the package
exports it, an editable install of this checkout reports it, and CHANGELOG.md has a section for it."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pathlib
import re

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import xla_ckpt

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# PEP 440's public version: release, then an optional pre-, post- and dev-release.
PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def _version_from_pyproject() -> str:
    """What setuptools builds: the literal ``__version__`` of the module the dynamic attr names, read
    statically as setuptools reads it (no import)."""
    attr = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, name = attr.rsplit(".", 1)
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} has no literal {name} = '...'")


def test_pyproject_reads_the_version_from_the_package():
    assert "version" not in PYPROJECT["project"], "pyproject writes a version of its own: keep it in _base/version.py"
    assert "version" in PYPROJECT["project"]["dynamic"]
    assert _version_from_pyproject() == xla_ckpt.__version__
    assert PEP440.match(xla_ckpt.__version__), xla_ckpt.__version__


def _of_this_checkout(dist: importlib.metadata.Distribution) -> bool:
    """An editable install of this checkout: its direct_url names it, or its metadata folder (the
    egg-info setuptools writes beside the package) lies in it."""
    url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    if url.removeprefix("file://").rstrip("/") == str(ROOT):
        return True
    folder = getattr(dist, "_path", None)  # PathDistribution: the .dist-info / .egg-info folder
    return folder is not None and pathlib.Path(folder).resolve().parent == ROOT


def test_an_install_of_this_checkout_reports_the_same_version():
    ours = [d for d in importlib.metadata.distributions(name="xla-ckpt") if _of_this_checkout(d)]
    if not ours:
        pytest.skip("no install of this checkout (the tests import it from the working tree)")
    for dist in ours:
        assert dist.version == xla_ckpt.__version__, (
            f"installed metadata says {dist.version}, the package {xla_ckpt.__version__}: reinstall (`make install`)")


def test_the_changelog_has_a_section_for_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    release = re.match(r"\d+(\.\d+)*", xla_ckpt.__version__).group(0)
    headings = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert headings, "CHANGELOG.md has no '## [version]' sections"
    if ".dev" in xla_ckpt.__version__:
        # A tree ahead of the last release: its changes sit under "Unreleased", which names the release.
        assert headings[0] == "Unreleased", headings[:3]
        assert re.search(rf"^## \[Unreleased\].*\b{re.escape(release)}\b", text, flags=re.M), (
            f"the Unreleased heading should name the version it becomes ({release})")
    else:
        assert release in headings, f"no '## [{release}]' section in CHANGELOG.md"
