"""The package's version: the one place it is written.

pyproject.toml reads it (``[tool.setuptools.dynamic]``, parsed statically: building a wheel imports
nothing of the library) and ``xla_ckpt.__version__`` re-exports it. A ``.devN`` suffix marks a tree
ahead of the last release; CHANGELOG.md's "Unreleased" section says what it adds.

Example:
    >>> import xla_ckpt
    >>> xla_ckpt.__version__
    '0.7.0.dev0'
"""

__version__ = "0.7.0.dev0"
