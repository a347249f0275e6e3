"""Vision and diffusion models through every preset: exactness and bytes kept (docs/vision.md's table).

Tiny configs, random weights, one training step each: the diffusers UNet2DConditionModel, timm ViT
(dropout), ResNet (BatchNorm, also cumulative ``momentum=None``) and ConvNeXt (stochastic depth), HF ViT
and CLIP. Each preset is applied to a deep copy and compared with the unwrapped model (same seed): loss,
every parameter grad, every buffer after the step; bytes kept are ``xla_ckpt.saved_activations().nbytes``
against the unwrapped model's, and against the family's own checkpointing (diffusers'
``enable_gradient_checkpointing``, timm's ``set_grad_checkpointing``, HF's
``gradient_checkpointing_enable``) run reentrant: its saved block inputs then reach the saved-tensor hooks
(non-reentrant, torch's checkpoint keeps them in a closure, out of the report's sight; same bytes).

    PJRT_DEVICE=CPU python bench/vision.py [--xla timm_resnet,hf_vit] [--markdown]

``tests/integration/hf/test_vision.py`` imports the builders and :func:`step` (bench/ is never imported by the library).
"""

from __future__ import annotations

import argparse
import copy
import functools
import os
import sys
from typing import Any, Callable

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import xla_ckpt  # noqa: E402

PRESETS = ("full", "megatron_selective", "dots", "names", "fsdp_xla")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def unet() -> tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]:
    import diffusers

    torch.manual_seed(0)
    model = diffusers.UNet2DConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, norm_num_groups=32, attention_head_dim=8)
    batch = {"sample": torch.randn(2, 4, 16, 16, generator=_gen(1)), "timestep": torch.tensor([3, 7]),
             "encoder_hidden_states": torch.randn(2, 8, 32, generator=_gen(2))}
    return model.train(), batch, lambda m, b: m(**b).sample.pow(2).mean()


def _image_loss(m: nn.Module, b: dict[str, Any]) -> torch.Tensor:
    return nn.functional.cross_entropy(m(b["x"]), b["y"])


def _images(classes: int = 10) -> dict[str, Any]:
    return {"x": torch.randn(2, 3, 32, 32, generator=_gen(1)), "y": torch.tensor([1, classes - 1])}


def timm_vit() -> tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]:
    from timm.models.vision_transformer import VisionTransformer

    torch.manual_seed(0)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=4, num_heads=2, num_classes=10,
                              proj_drop_rate=0.1, attn_drop_rate=0.1)
    return model.train(), _images(), _image_loss


def timm_resnet(cumulative_bn: bool = False) -> tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False, num_classes=10)
    if cumulative_bn:  # BatchNorm's cumulative average: the forward reads the count it just advanced
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.momentum = None
    return model.train(), _images(), _image_loss


def timm_convnext() -> tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]:
    import timm

    torch.manual_seed(0)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10, drop_path_rate=0.1)
    return model.train(), _images(), _image_loss


def hf_vit() -> tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]:
    import transformers

    cfg = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                 num_attention_heads=4, intermediate_size=64, num_labels=10)
    torch.manual_seed(0)
    model = transformers.ViTForImageClassification(cfg)
    batch = {"pixel_values": _images()["x"], "labels": _images()["y"]}
    return model.train(), batch, lambda m, b: m(**b).loss


def hf_clip() -> tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]:
    import transformers

    text = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 128, "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "image_size": 32, "patch_size": 8}
    cfg = transformers.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    torch.manual_seed(0)
    model = transformers.CLIPModel(cfg)
    batch = {"input_ids": torch.randint(0, 128, (2, 12), generator=_gen(3)), "pixel_values": _images()["x"],
             "return_loss": True}
    return model.train(), batch, lambda m, b: m(**b).loss


MODELS: dict[str, Callable[[], tuple[nn.Module, dict[str, Any], Callable[..., torch.Tensor]]]] = {
    "diffusers_unet": unet, "timm_vit": timm_vit, "timm_resnet": timm_resnet,
    "timm_resnet_cumulative_bn": functools.partial(timm_resnet, cumulative_bn=True),
    "timm_convnext": timm_convnext, "hf_vit": hf_vit, "hf_clip": hf_clip,
}


def own_checkpointing(name: str, model: nn.Module) -> None:
    """Turn on the family's own checkpointing, reentrant (see the module docstring)."""
    import torch.utils.checkpoint as tuc

    if name == "diffusers_unet":
        model.enable_gradient_checkpointing(functools.partial(tuc.checkpoint, use_reentrant=True))
    elif name.startswith("timm"):
        from timm.layers import set_reentrant_ckpt

        set_reentrant_ckpt(True)
        model.set_grad_checkpointing(True)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})


Named = list[tuple[str, torch.Tensor]]


def step(model: nn.Module, batch: dict[str, Any], loss_fn: Callable[..., torch.Tensor],
         device: torch.device) -> tuple[torch.Tensor, Named, Named, int]:
    """One training step: loss, named grads, named buffers after it (on CPU), bytes kept for backward."""
    torch.manual_seed(5)
    if device.type == "xla":
        import torch_xla

        torch_xla.manual_seed(5)
    with xla_ckpt.saved_activations() as kept:
        loss = loss_fn(model, batch)
    loss.backward()
    if device.type == "xla":
        import torch_xla

        torch_xla.sync()
    grads = [(n, p.grad.cpu()) for n, p in model.named_parameters() if p.grad is not None]
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, f"no grad for {missing[:3]}"
    buffers = [(n, b.cpu()) for n, b in model.named_buffers()]
    return loss.detach().cpu(), grads, buffers, kept.nbytes


def compare(ref: tuple, got: tuple, buffers: bool = True) -> float:
    """Max abs difference of loss, grads (and buffers); ``assert_close`` on each (raises when not close)."""
    worst = 0.0
    torch.testing.assert_close(got[0], ref[0])
    assert len(ref[1]) == len(got[1]), (len(ref[1]), len(got[1]))
    for (n, a), (m, b) in zip([*ref[1], *(ref[2] if buffers else [])], [*got[1], *(got[2] if buffers else [])], strict=True):
        assert n == m, (n, m)
        torch.testing.assert_close(b, a, msg=lambda s, n=n: f"{n}: {s}")
        if a.is_floating_point():
            worst = max(worst, (a - b).abs().max().item() if a.numel() else 0.0)
    return worst


def on(device: torch.device, model: nn.Module, batch: dict[str, Any]) -> tuple[nn.Module, dict[str, Any]]:
    return model.to(device), {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def row(name: str, device: torch.device, presets: tuple[str, ...] = PRESETS, own: bool = True) -> dict[str, str]:
    """{column: cell} for one model on one device: max grad difference / bytes kept vs no checkpointing."""
    base, batch, loss_fn = MODELS[name]()
    model, b = on(device, copy.deepcopy(base), batch)
    ref = step(model, b, loss_fn, device)
    cells = {"model": name, "device": "XLA:CPU" if device.type == "xla" else "CPU"}
    for preset in presets:
        model, b = on(device, copy.deepcopy(base), batch)
        report = xla_ckpt.apply(model, preset)
        got = step(model, b, loss_fn, device)
        cells[preset] = f"{compare(ref, got):.1e} / x{got[3] / ref[3]:.2f} ({len(report.wrapped)})"
    if own and device.type == "cpu":
        model, b = on(device, copy.deepcopy(base), batch)
        own_checkpointing(name, model)
        got = step(model, b, loss_fn, device)
        same = all(torch.equal(a, b) for (_, a), (_, b) in zip(ref[2], got[2], strict=True))
        cells["own"] = f"{compare(ref, got, buffers=False):.1e} / x{got[3] / ref[3]:.2f}" + (
            "" if same else " (buffers differ)")
        if name.startswith("timm"):
            from timm.layers import set_reentrant_ckpt

            set_reentrant_ckpt(False)
    return cells


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--xla", default="timm_resnet,hf_vit", help="models also run on XLA:CPU ('' for none)")
    args = p.parse_args()
    cols = ["model", "device", *PRESETS, "own"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    xla = [n for n in args.xla.split(",") if n]
    if xla:  # before the first backward of the process (a CPU backward first breaks XLA's autograd queues)
        import torch_xla

        torch_xla.device()
    for name in args.models.split(","):
        devices = [torch.device("cpu")]
        if name in xla:
            import torch_xla

            devices.append(torch_xla.device())
        for device in devices:
            cells = row(name, device)
            print("| " + " | ".join(cells.get(c, "") for c in cols) + " |", flush=True)


if __name__ == "__main__":
    main()
