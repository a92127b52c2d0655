"""Where this process runs: device choice and distributed process state, in one place.

Every stage that places tensors (scoring, adversarial views, fine-tuning, vhx-mini) asks this module,
so that one rule decides the device: this process's own GPU under ``accelerate launch`` /
``torchrun``, else the first GPU, else the CPU. It imports nothing from the rest of vhx, so any
layer (models, predict, adversarial, finetune) can use it without an import cycle.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["available_cores", "has_accelerator", "force_cpu", "process_state", "default_device", "launched_world_size", "worker_initializer"]


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def has_accelerator() -> bool:
    """True when torch sees a CUDA or XPU device."""
    import torch

    return torch.cuda.is_available() or (hasattr(torch, "xpu") and torch.xpu.is_available())


def force_cpu() -> bool:
    """True when ``ACCELERATE_USE_CPU`` asks for the CPU, or when there is no accelerator.

    Without an accelerator, processes launched by ``torchrun``/MPI only form one (gloo) group when
    told they run on CPU; otherwise each would run alone. Fine-tuning passes the same value to
    ``SFTConfig(use_cpu=...)``.
    """
    flag = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes")
    return flag or not has_accelerator()


def process_state() -> Any:
    """This process's ``accelerate.PartialState`` (created with ``cpu=True`` when :func:`force_cpu`)."""
    from accelerate import PartialState

    return PartialState(cpu=force_cpu())


def default_device() -> Any:
    """This process's ``torch.device``: its local GPU under accelerate/torchrun, else GPU 0, else CPU."""
    import torch

    try:
        return torch.device(process_state().device)
    except Exception:  # accelerate missing or its state not configurable here: plain torch choice
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def launched_world_size() -> int:
    """The process count ``accelerate launch``/``torchrun`` exported (``WORLD_SIZE``), before any setup."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def _die_with_parent(parent: int) -> None:
    """Ask the kernel to send SIGTERM to this process when its parent dies (Linux), and leave at once
    if the parent is already gone: a worker must never wait forever on a queue nobody feeds."""
    import signal
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def worker_initializer(parent: int) -> None:
    """Initializer of vhx's worker processes: they end with their parent (SIGTERM, SIGKILL or a crash
    of the parent), and leave Ctrl-C to it (the parent shuts the pool down), so no process outlives a job."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a forked copy of the parent's handler must not linger
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    _die_with_parent(parent)
