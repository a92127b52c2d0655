"""Probes that say during training whether the model reads what the question names (used for early stopping and the logs)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vhx.mini.config import MiniDataArguments, YES_NO_KINDS
from vhx.mini.data import SceneBank
from vhx.mini.objective import image_tokens, oracle_tokens
from vhx.locking import atomic_path

logger = logging.getLogger("vhx")


class Probe:
    """Held-aside benchmark cases (seed ``probe_seed``, balanced, each with its negated twin) scored during training.

    Scores what the stage trains: from oracle image tokens in the ``language`` stage, from pixels
    after it. Per kind: accuracy, symmetric accuracy, and the P(yes) gap (mean P(yes) on true-"yes"
    cases minus on true-"no" cases; 0 when the answers ignore the image).
    """

    def __init__(self, bank: SceneBank, data: MiniDataArguments) -> None:
        import torch

        from vhx.mini.synthetic import SyntheticConfig, describe_scene, generate_synthetic

        self.bank = bank
        source = generate_synthetic(SyntheticConfig(num_images=data.probe_images, yes_ratio=0.5, seed=data.probe_seed, image_size=data.scene_size))
        self.items: dict[str, list[tuple[str, bool, int]]] = {}
        pixels, words = [], []
        for kind in YES_NO_KINDS:
            rows = []
            for row in source[kind]:
                _, w = bank.patch_words(describe_scene(row))
                pixels.append(bank.processor.image_processor([row["image"].convert("RGB")], return_tensors="pt")["pixel_values"][0])
                words.append(torch.from_numpy(w))
                truth = row["answer"] == "yes"
                rows.append((row["question"], truth, len(pixels) - 1))
                rows.append((bank.maker.negate(row["question"]), not truth, len(pixels) - 1))
            self.items[kind] = rows
        self.pixels, self.words = torch.stack(pixels), torch.stack(words)

    def __call__(self, model: Any, *, oracle: bool, batch_size: int = 64) -> dict[str, dict[str, float]]:
        """Per kind ``{"accuracy", "symmetric_accuracy", "gap"}`` of ``model`` (left-padded prompts, as the scorer pads)."""
        import torch

        from vhx.models.hf import yes_no_token_ids

        bank, pad = self.bank, self.bank.tokenizer.pad_token_id
        # Every spelling of yes / no, as the scorer sums them (logits mode).
        yes, no = yes_no_token_ids(bank.tokenizer)
        was_training = model.training
        model.eval()
        report = {}
        with torch.no_grad():
            for kind, rows in self.items.items():
                p_yes = []
                for start in range(0, len(rows), batch_size):
                    chunk = rows[start : start + batch_size]
                    prompts = [bank.prompt_ids(q) for q, _, _ in chunk]
                    width = max(map(len, prompts))
                    ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                    for r, p in enumerate(prompts):
                        ids[r, width - len(p) :] = torch.tensor(p)
                    at = [i for _, _, i in chunk]
                    device = model.device
                    tokens = oracle_tokens(model, self.words[at].to(device)) if oracle else image_tokens(model, self.pixels[at].to(device))
                    embeds = model.get_input_embeddings()(ids.to(device))
                    embeds = embeds.masked_scatter((ids == model.config.image_token_id).to(device).unsqueeze(-1), tokens.reshape(-1, tokens.shape[-1]).to(embeds.dtype))
                    hidden = model.model.language_model(inputs_embeds=embeds, attention_mask=(ids != pad).long().to(device)).last_hidden_state[:, -1]
                    logprobs = torch.log_softmax(model.lm_head(hidden).float(), -1)
                    p_yes.extend(torch.sigmoid(logprobs[:, yes].logsumexp(-1) - logprobs[:, no].logsumexp(-1)).tolist())
                right = [(p > 0.5) == truth for p, (_, truth, _) in zip(p_yes, rows)]
                on = [p for p, (_, truth, _) in zip(p_yes, rows) if truth]
                off = [p for p, (_, truth, _) in zip(p_yes, rows) if not truth]
                report[kind] = {
                    "accuracy": round(sum(right) / len(right), 4),
                    "symmetric_accuracy": round(sum(right[i] and right[i + 1] for i in range(0, len(right), 2)) / (len(right) // 2), 4),
                    "gap": round(sum(on) / len(on) - sum(off) / len(off), 4),
                }
        model.train(was_training)
        return report


def probe_callback(probe: Probe, model: Any, stage: str, every: int, offset: int, curves: list[dict[str, Any]]) -> Any:
    """A ``TrainerCallback`` that appends the probe's scores to ``curves`` every ``every`` steps and at the stage's end."""
    from transformers import TrainerCallback

    class ProbeCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if not state.is_world_process_zero or (state.global_step % every and state.global_step != state.max_steps):
                return
            report = probe(model, oracle=stage == "language")
            curves.append({"stage": stage, "step": state.global_step, "total_step": offset + state.global_step, "probe": report})
            logger.info("probe, %s stage step %d: %s", stage, state.global_step,
                        ", ".join(f"{k} {v['accuracy']:.3f}/{v['symmetric_accuracy']:.3f}" for k, v in report.items()))

    return ProbeCallback()


def plot_learning_curves(curves: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str = "vhx-mini") -> Path:
    """Probe accuracy (solid) and symmetric accuracy (dashed) per kind against the training step, stages marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.2))
    for i, kind in enumerate(YES_NO_KINDS):
        xs = [c["total_step"] for c in curves]
        colour = f"C{i}"
        ax.plot(xs, [c["probe"][kind]["accuracy"] for c in curves], "-", color=colour, label=f"{kind} accuracy")
        ax.plot(xs, [c["probe"][kind]["symmetric_accuracy"] for c in curves], "--", color=colour, alpha=0.6, label=f"{kind} symmetric")
    for stage in dict.fromkeys(c["stage"] for c in curves):
        points = [c for c in curves if c["stage"] == stage]
        first = points[0]["total_step"] - points[0]["step"]  # where the stage began, not its first probe
        last = max(c["total_step"] for c in points)
        ax.axvspan(first, last, alpha=0.06, color="k" if stage == "vision" else "w")
        ax.text(first, 1.02, stage + (" (oracle tokens)" if stage == "language" else ""), fontsize=8, va="bottom")
    ax.set(xlabel="training step (all stages)", ylabel="held-aside probe score", ylim=(0, 1.08), title=title)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    fig.tight_layout()
    out = Path(path)
    with atomic_path(out) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    return out
