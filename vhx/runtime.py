"""Where this process runs: device choice and distributed process state, in one place.

Every stage that places tensors (scoring, adversarial views, fine-tuning, vhx-mini) asks this module,
so that one rule decides the device: this process's own GPU under ``accelerate launch`` /
``torchrun``, else the first GPU, else the CPU. It imports nothing from the rest of vhx, so any
layer (models, predict, adversarial, finetune) can use it without an import cycle.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["available_cores", "has_accelerator", "force_cpu", "process_state", "default_device", "launched_world_size", "worker_initializer",
           "pin_cpu_kernels", "PINNED_KERNELS"]

#: The CPU code paths the command line pins on x86-64 machines with AVX2 (unless the variable is set already).
#: PyTorch picks its vectorised kernels by the CPU at run time (AVX-512 on AMD Zen 4 and recent Intel,
#: AVX2 on Zen 2/3): their reductions round differently, which moved `vhx run`'s attacked images and
#: their scores between two 2-core AMD EPYC machines. Pinned to AVX2, every such machine computes the
#: same bits. MKL's conditional numerical reproducibility is pinned to AVX2 for the same reason
#: (MKL takes AVX-512 paths on Intel CPUs, AVX2 on AMD). Thread count does not change the attack's
#: result on vhx-mini (1 and 2 threads: the same images, bit for bit).
PINNED_KERNELS: dict[str, str] = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}


def _has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx2" in line.split()
    except OSError:
        pass
    return False


def pin_cpu_kernels() -> dict[str, str]:
    """Pin the CPU kernels of :data:`PINNED_KERNELS` on an x86-64 CPU with AVX2; returns what was set.

    Call it before torch runs its first operation (the command line does, first thing): the kernels
    are chosen then, once per process. A variable the user set is left as it is (``ATEN_CPU_CAPABILITY=default``
    gives torch its own choice back). Elsewhere (no AVX2, ARM) nothing is set.
    """
    if not _has_avx2():
        return {}
    pinned = {}
    for name, value in PINNED_KERNELS.items():
        if name not in os.environ:
            os.environ[name] = value
            pinned[name] = value
    return pinned


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
