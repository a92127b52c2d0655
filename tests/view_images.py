"""Test images for the adversarial views: textured noise and the (B, 3, H, W) batches views take."""

from __future__ import annotations

import numpy as np
import torch


def texture(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth pattern plus noise, clipped: saturated pixels included (8-bit H x W x 3)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([128 + 140 * np.sin(xx / (4 + c) + seed) * np.cos(yy / 6) for c in range(3)], -1)
    return np.clip(base + rng.normal(0, 25, (h, w, 3)), 0, 255).astype(np.uint8)


def batch(*arrays: np.ndarray) -> torch.Tensor:
    """H x W x 3 arrays of one size stacked as a ``(B, 3, H, W)`` tensor of their dtype."""
    return torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous()
