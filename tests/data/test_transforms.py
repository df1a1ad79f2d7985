"""GPU-side transforms against a float64 reference (run here on the CPU, on CUDA if present)."""

from __future__ import annotations

import pytest
import torch

from membound.data import ChannelsLast, Normalize, ToFloat
from membound.data.transforms import normalize_ref
from membound.errors import BadInput

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
# bf16 keeps 8 significant bits: relative error 2^-8 of values up to ~2.6.
TOL = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 2e-2, torch.float64: 1e-12}
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("shape", [(2, 3, 9, 41), (3, 7, 5), (1, 3, 224, 224)])
def test_normalize_matches_reference(device, dtype, shape):
    x = torch.randint(0, 256, shape, dtype=torch.uint8, device=device)
    x.view(-1)[:2] = torch.tensor([0, 255], dtype=torch.uint8)  # the extremes
    got = Normalize(MEAN, STD, dtype)(x)
    ref = normalize_ref(x, MEAN, STD)
    assert got.dtype == dtype and got.shape == x.shape and got.device == x.device
    err = (got.double() - ref).abs().max().item()
    assert err <= TOL[dtype] * ref.abs().max().item() + 1e-12, err


@pytest.mark.parametrize("device", DEVICES)
def test_channels_last_and_nhwc_input(device):
    x = torch.randint(0, 256, (2, 3, 6, 10), dtype=torch.uint8, device=device)
    ref = normalize_ref(x, MEAN, STD)
    cl = Normalize(MEAN, STD, torch.float32, channels_last=True)(x)
    assert cl.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(cl.double(), ref, rtol=1e-5, atol=1e-5)
    nhwc = x.permute(0, 2, 3, 1).contiguous()
    out = Normalize(MEAN, STD, torch.float32, layout="NHWC")(nhwc)
    assert out.shape == x.shape and out.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)


def test_per_channel_statistics_are_not_mixed_up():
    x = torch.full((1, 3, 2, 2), 255, dtype=torch.uint8)
    out = Normalize([0.0, 0.5, 1.0], [1.0, 0.5, 0.25], torch.float64)(x)
    assert out[0, :, 0, 0].tolist() == pytest.approx([1.0, 1.0, 0.0], abs=1e-12)


def test_batches_only_images_are_converted():
    img = torch.randint(0, 256, (2, 3, 4, 4), dtype=torch.uint8)
    labels = torch.tensor([3, 4], dtype=torch.uint8)  # 1-D uint8: not an image
    out = Normalize(MEAN, STD)({"img": img, "lab": labels})
    assert out["img"].dtype == torch.bfloat16 and out["lab"] is labels


def test_to_float_and_channels_last():
    x = torch.randint(0, 256, (2, 3, 4, 5), dtype=torch.uint8)
    torch.testing.assert_close(ToFloat(torch.float32)(x), x.float() / 255)
    out = ChannelsLast()((x.float(), torch.ones(3)))
    assert out[0].is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(out[0], x.float()) and torch.equal(out[1], torch.ones(3))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mean=[0.1, 0.2], std=[1, 1, 1]), "as many"),
        (dict(mean=[0.1], std=[0.0]), "std of 0"),
        (dict(mean=0.1, std=1.0, dtype=torch.int32), "floating"),
        (dict(mean=0.1, std=1.0, layout="HWC"), "layout"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(BadInput, match=match):
        Normalize(**kwargs)


def test_bad_images():
    with pytest.raises(BadInput, match="channel statistics"):
        Normalize(MEAN, STD)(torch.zeros(1, 4, 2, 2, dtype=torch.uint8))
    with pytest.raises(BadInput, match=">= 3 dims"):
        Normalize(MEAN, STD)(torch.zeros(4, 2, dtype=torch.uint8))
