"""Before vs after: the base model and base + adapter scored on the held-out cases (and MME)."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhx.errors import VHXError
from vhx.finetune.training import HELDOUT_DIR, resolve_base_model

if TYPE_CHECKING:
    from vhx.finetune.config import FinetuneConfig


def evaluate_finetuned(config: FinetuneConfig, *, out_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Score the base model and base + adapter on the held-out cases (and MME); write the reports.

    Predictions go to ``{out}/{base,finetuned}/{vh,mme}`` (resumable, as ``vhx evaluate``); reports
    comparing the two models (symmetric accuracy per split, paired comparison; MME scores) to
    ``{out}/report_vh`` and ``{out}/report_mme``. ``out`` defaults to ``{output_dir}/eval``.
    Returns ``{"vh": report.md, "mme": report.md}``.
    """
    import torch

    from vhx.models import load_model
    from vhx.predict import predict_dataset
    from vhx.report import report
    from vhx.runtime import process_state

    run, ev, model_args = Path(config.training.output_dir), config.evaluation, config.model
    heldout = run / HELDOUT_DIR
    if not (heldout / "README.md").is_file():
        raise VHXError(f"{heldout}: no held-out cases (train with write_heldout: true first)")
    out = Path(out_dir) if out_dir is not None else run / "eval"
    base = resolve_base_model(model_args.model_name_or_path)
    options: dict[str, Any] = {"mode": ev.eval_mode, "dtype": ev.eval_dtype, "batch_size": ev.eval_batch_size,
                               "trust_remote_code": config.training.trust_remote_code}
    if model_args.model_revision not in (None, "", "main"):
        options["revision"] = model_args.model_revision  # the revision training used
    from vhx.hub import load_folder

    vh_data = load_folder(heldout)
    for tag, adapter in (("base", None), ("finetuned", str(run))):
        model = load_model(base, adapter=adapter, **options)
        predict_dataset(vh_data, model, out / tag / "vh", batch_size=ev.eval_batch_size, limit=ev.eval_limit)
        if ev.eval_mme:
            predict_dataset(ev.eval_mme, model, out / tag / "mme", batch_size=ev.eval_batch_size, limit=ev.eval_limit)
        del model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    kinds = ["vh", "mme"] if ev.eval_mme else ["vh"]
    paths = {kind: out / f"report_{kind}" / "report.md" for kind in kinds}
    state = process_state()
    if state.is_main_process:
        for kind in kinds:
            report([out / "base" / kind, out / "finetuned" / kind], out / f"report_{kind}")
    state.wait_for_everyone()
    return paths
