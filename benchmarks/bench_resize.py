"""Benchmark: the attack's differentiable resize as PIL weight matrices vs. torch's antialiased kernel.

Both paths compute PIL's bilinear / bicubic filter (the matrices from the same weights as Pillow's
``precompute_coeffs``; torch's ``interpolate(..., antialias=True)`` uses the same kernels). What an
attack pays for is forward + backward of the resize on every step, so that is what is timed, in one
process, alternating the two paths: ``vhx.adversarial.processing.resize`` as it runs (matrices up to
``_MATRIX_MAX_SIDE`` pixels per axis) against the same call forced onto torch's kernel. Reported:
time(kernel) / time(matrix) per size, plus one I-FGSM step of vhx-mini's view (4 images of 336 px,
the attack `vhx run` makes) both ways. Exactness: the two outputs agree within 1e-4.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from vhx.adversarial import processing


def _timed(fn: Callable[[], None], repeats: int) -> float:
    fn()  # warm-up: the weight matrices are built and cached on the first call
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _resize_step(x: torch.Tensor, size: tuple[int, int], mode: str) -> Callable[[], None]:
    def step() -> None:
        x.grad = None
        processing.resize(x, size, mode).square().sum().backward()

    return step


def _both(step: Callable[[], None], repeats: int) -> tuple[float, float]:
    matrix = _timed(step, repeats)
    limit = processing._MATRIX_MAX_SIDE
    processing._MATRIX_MAX_SIDE = 0
    try:
        kernel = _timed(step, repeats)
    finally:
        processing._MATRIX_MAX_SIDE = limit
    return matrix, kernel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed repetitions per case (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--skip-model", action="store_true", help="leave out the vhx-mini attack step")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    print(f"{'case':<44} {'matrix ms':>10} {'kernel ms':>10} {'ratio':>7}")
    for mode in ("bicubic", "bilinear"):
        for (h, w), size in [((336, 336), (96, 96)), ((480, 640), (336, 336)), ((336, 336), (224, 224)), ((224, 224), (336, 336))]:
            x = torch.rand(4, 3, h, w, generator=gen, requires_grad=True)
            with torch.no_grad():
                same = processing.resize(x, size, mode)
                limit, processing._MATRIX_MAX_SIDE = processing._MATRIX_MAX_SIDE, 0
                other = processing.resize(x, size, mode)
                processing._MATRIX_MAX_SIDE = limit
            assert float((same - other).abs().max()) < 1e-4, "the two paths disagree"
            matrix, kernel = _both(_resize_step(x, size, mode), args.repeats)
            print(f"{f'{mode} 4x{h}x{w} -> {size[0]}x{size[1]} fwd+bwd':<44} {matrix * 1e3:>10.2f} {kernel * 1e3:>10.2f} {kernel / matrix:>7.2f}")
    if not args.skip_model:
        from vhx.adversarial import load_view
        from vhx.mini.zoo import DEFAULT_MODEL

        view = load_view(DEFAULT_MODEL, device="cpu")
        x = torch.rand(4, 3, 336, 336, generator=gen, requires_grad=True)

        def attack_step() -> None:
            (grad,) = torch.autograd.grad(view(x).float().square().sum(), x)

        matrix, kernel = _both(attack_step, args.repeats)
        print(f"{'vhx-mini view, 4x336x336, fwd+bwd (1 step)':<44} {matrix * 1e3:>10.2f} {kernel * 1e3:>10.2f} {kernel / matrix:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
