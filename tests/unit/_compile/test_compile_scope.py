"""Settings made for one compile are put back when it ends, also after ``torch._dynamo.reset()``."""

from __future__ import annotations

import torch

from xla_ckpt._base.compile_scope import active, set_for_this_compile


class _Box:
    value = "class default"


def test_a_setting_lives_for_one_compile_only_even_across_dynamo_resets():
    from torch._dynamo.callback import CallbackTrigger, callback_handler

    box = _Box()
    for compile_id in range(2):
        torch._dynamo.reset()  # clears every registered compile callback (ours included)
        with callback_handler.install_callbacks(CallbackTrigger.DYNAMO, str(compile_id)):
            set_for_this_compile(box, "added", 1)
            set_for_this_compile(box, "value", "set")
            set_for_this_compile(box, "value", "set again")  # the value before is the first one's
            assert (box.added, box.value) == (1, "set again")
        assert not hasattr(box, "added")
        assert box.value == "class default"
        assert active() == []
