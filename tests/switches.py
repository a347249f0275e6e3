"""The library's paths turned on or watched for one block, for tests that prove each path matters.

The library ships no switch for tests: each helper here sets one private seam of the library (or wraps
the function it watches) and puts it back when the block ends, even when the block raises.

- ``general_replay()``: XLA regions run ``fn`` again instead of their recorded program
  (``xla_ckpt/_engine/direct.py``'s ``_replay``), so both replays are tested on XLA.

Example::

    with general_replay():
        loss = model(x).sum()
    loss.backward()  # recomputed by running the regions' functions again
"""

from __future__ import annotations

import contextlib
from typing import Iterator


@contextlib.contextmanager
def general_replay() -> Iterator[None]:
    """XLA regions whose forward starts in this block (on this thread) replay by running ``fn`` again,
    never their recorded program. Example: ``with general_replay(): loss = model(x).sum()``."""
    from xla_ckpt._engine import direct

    was = direct._replay.program
    direct._replay.program = False
    try:
        yield
    finally:
        direct._replay.program = was

