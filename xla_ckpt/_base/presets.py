"""Preset configs by name: ``apply(model, "megatron_selective")``, from a wheel or from a checkout.

``policies/`` in the repository is the one source. The wheel carries the same files as
``xla_ckpt/presets/`` (pyproject maps the folder into the package); a source checkout or an editable
install reads ``policies/`` next to the package.

A file listing with no import from the library, so every layer above may read it: the policy registry
(for its "that is a preset" hint), the config loader, the accepted-forms check (``_api.forms``) and
``fit``. ``presets()``, which loads each file, lives in ``_api.config_load``.
"""

from __future__ import annotations

import os
from typing import Optional

__all__ = ["preset_dir", "preset_path", "preset_names"]

EXTENSIONS = (".toml", ".yaml", ".yml", ".json")
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # xla_ckpt/


def preset_dir() -> Optional[str]:
    """The folder the presets are read from, or None if neither layout is present."""
    installed = os.path.join(_PACKAGE, "presets")
    if os.path.isdir(installed):
        return installed
    root = os.path.dirname(_PACKAGE)
    checkout = os.path.join(root, "policies")
    # Only our own checkout: a "policies" folder next to site-packages' copy would be someone else's.
    if os.path.isdir(checkout) and os.path.isfile(os.path.join(root, "pyproject.toml")):
        return checkout
    return None


def preset_names() -> list[str]:
    """Every preset name (file stem), sorted."""
    d = preset_dir()
    if d is None:
        return []
    return sorted({os.path.splitext(f)[0] for f in os.listdir(d) if f.endswith(EXTENSIONS)})


def preset_path(name: str) -> Optional[str]:
    """The file of preset ``name`` (``"full"`` or ``"full.yaml"``; TOML first), or None."""
    d = preset_dir()
    if d is None or os.sep in name or "/" in name:
        return None
    stem, ext = os.path.splitext(name)
    for e in ((ext,) if ext else EXTENSIONS):
        path = os.path.join(d, stem + e)
        if os.path.isfile(path):
            return path
    return None

