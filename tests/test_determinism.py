"""The same numbers on every x86 machine: the command line pins torch's CPU kernels, and threads do not change an attack.

Each check runs in a fresh interpreter: torch chooses its kernels once per process, at its first operation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from vhx.runtime import PINNED_KERNELS, _has_avx2, pin_cpu_kernels

needs_avx2 = pytest.mark.skipif(not _has_avx2(), reason="pinning applies to x86-64 CPUs with AVX2")


def _python(code: str, **env: str | None) -> str:
    environ = {k: v for k, v in os.environ.items() if k not in PINNED_KERNELS}
    environ.update({k: v for k, v in env.items() if v is not None})
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environ, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@needs_avx2
def test_the_command_line_pins_avx2_kernels_before_torch_chooses() -> None:
    # vhx's entry point, then torch's choice: AVX2 whatever the CPU offers beyond it
    code = """
        import os, sys
        from vhx.cli import main
        try:
            main(["--help"])
        except SystemExit:
            pass
        import torch
        torch.ones(3).sum()
        print(torch.backends.cpu.get_cpu_capability(), os.environ["MKL_CBWR"])
    """
    assert _python(code).splitlines()[-1] == "AVX2 AVX2"


@needs_avx2
def test_a_users_own_choice_is_kept(monkeypatch) -> None:
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    monkeypatch.delenv("MKL_CBWR", raising=False)
    assert pin_cpu_kernels() == {"MKL_CBWR": "AVX2"}
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default"
    code = "from vhx.runtime import pin_cpu_kernels; pin_cpu_kernels(); import torch; torch.ones(2).sum(); print(torch.backends.cpu.get_cpu_capability())"
    assert _python(code, ATEN_CPU_CAPABILITY="default") == "DEFAULT"


@pytest.mark.slow
def test_the_thread_count_does_not_change_an_attack() -> None:
    code = """
        import hashlib, sys
        import torch
        torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else {threads})
        sys.path.insert(0, "tests")
        from view_images import batch, texture
        from vhx.adversarial import AttackConfig, AttackItem, attack_stream, load_view
        from vhx.mini.tiny_models import build_tiny_model
        view = load_view(build_tiny_model("llava"), device="cpu")
        items = [AttackItem(batch(texture(40, 60, 70 + i))[0], f"img{{i}}") for i in range(3)]
        for config in (AttackConfig(steps_nonvh=12, schedule="apgd"), AttackConfig(steps_nonvh=12, converge_window=3)):
            for r in sorted(attack_stream(view, items, "min", config, slots=2), key=lambda r: r.image_id):
                print(r.image_id, r.steps_run, hashlib.sha256(r.image.tobytes()).hexdigest()[:16], repr(r.final_similarity))
    """
    one, two = _python(code.format(threads=1)), _python(code.format(threads=2))
    assert one.count("\n") == 5 and one == two
