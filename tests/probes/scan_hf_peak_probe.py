"""The compiled peak of an SGD training step of an HF Llama, scanned or unrolled, on XLA:CPU: one JSON line.

    XLA_FLAGS=--xla_dump_to=DIR python tests/probes/scan_hf_peak_probe.py DIR SCAN [PRESET LAYERS D_MODEL VOCAB]

``xla_ckpt.apply(model, PRESET, scan=SCAN)`` on a Llama from its default config (hidden D_MODEL, MLP
2 x D_MODEL, 4 heads, seq 64, batch 2, fp32), then three steps of ``zero_grad(set_to_none=True)``, forward,
backward, ``SGD.step()``, ``torch_xla.sync()``. Prints the largest compiled program's peak in DIR
(``*buffer-assignment.txt``, exact), the weights' bytes and the losses. Run in a fresh process per
setting (the dump folder is fixed when the runtime starts).
"""

from __future__ import annotations

import json
import os
import sys
import warnings


def main(argv: list[str]) -> None:
    dump, scan = argv[0], bool(int(argv[1]))
    preset = argv[2] if len(argv) > 2 else "megatron_selective"
    layers, d_model, vocab = (int(a) for a in (argv[3:6] if len(argv) > 5 else (8, 256, 1280)))
    warnings.simplefilter("ignore")  # the use_cache notice
    import torch
    import torch_xla

    import xla_ckpt
    from xla_ckpt import hf_models
    # the dump parser, bench/xla_dump.py (bench/ is scripts, not a package)
    sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "bench"))
    from xla_dump import compiled_peaks

    dev = torch_xla.device()
    model = hf_models.to_device(hf_models.build("llama", d_model=d_model, n_layer=layers, n_head=4, seq_len=64,
                                                vocab_size=vocab), dev)
    xla_ckpt.apply(model, preset, scan=scan)
    batch = hf_models.batch("llama", model, batch=2, seq_len=64, vocab_size=vocab, device=dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        opt.zero_grad(set_to_none=True)
        loss = model(**batch, use_cache=False).loss
        loss.backward()
        opt.step()
        torch_xla.sync()
        losses.append(loss.item())
    peaks = compiled_peaks(dump)
    print(json.dumps({"scan": scan, "preset": preset, "layers": layers, "d_model": d_model, "vocab": vocab,
                      "weights_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                      "peak_bytes": max(peaks.values()), "losses": losses}))


if __name__ == "__main__":
    main(sys.argv[1:])
