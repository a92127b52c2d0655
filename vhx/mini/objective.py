"""vhx-mini's training objective: the answer loss, the dense per-patch losses and the oracle-token distillation."""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from typing import Any

from vhx.mini.config import MiniModelArguments

logger = logging.getLogger("vhx")


def oracle_tokens(model: Any, words: Any) -> Any:
    """``(B, tokens, hidden)`` oracle image tokens: per patch, the sum of the LM's embeddings of its words."""
    present = (words >= 0).unsqueeze(-1)
    return (model.get_input_embeddings()(words.clamp(min=0)) * present).sum(-2)


def image_tokens(model: Any, pixel_values: Any) -> Any:
    """``(B, tokens, hidden)`` image tokens of ``pixel_values``: tower + projector, as LLaVA's forward computes them."""
    from vhx.adversarial.views import image_features

    return image_features(model, {"pixel_values": pixel_values.to(model.dtype)})


def _balanced_yes_no(logits: Any, at: Any, target: Any, yes: int, no: int) -> Any:
    """Cross-entropy of the Yes/No logits at positions ``at`` against ``target``, positives and negatives weighted equally.

    Matching patches are a few percent of all image tokens; unweighted, "no everywhere" is a
    comfortable minimum the lookup never leaves.
    """
    import torch.nn.functional as F

    ce = F.cross_entropy(logits[..., [no, yes]][at], target, reduction="none")
    pos, neg = target == 1, target == 0
    if pos.any() and neg.any():
        return (ce[pos].mean() + ce[neg].mean()) / 2
    return ce.mean()


def stage_loss(model: Any, batch: Mapping[str, Any], stage: str, args: MiniModelArguments, yes: int, no: int) -> tuple[Any, dict[str, float]]:
    """The loss of one batch in ``stage`` and its parts (see the module docs).

    ``language``: answers from oracle image tokens. ``vision``: squared distance of the tower's image
    tokens to the oracle tokens (per token, summed over the hidden size). ``joint``: answers from real
    image tokens, plus ``oracle_loss_weight`` times the vision loss.
    """
    import torch
    import torch.nn.functional as F

    oracle = oracle_tokens(model, batch["words"])
    parts: dict[str, float] = {}
    if stage != "language":
        seen = image_tokens(model, batch["pixel_values"]).float()
        distance = F.mse_loss(seen, oracle.detach().float()) * seen.shape[-1]
        parts["oracle"] = distance.item()
        if stage == "vision":
            return distance, parts
    ids = batch["input_ids"]
    embeds = model.get_input_embeddings()(ids)
    at = ids == model.config.image_token_id
    tokens = oracle if stage == "language" else seen.to(embeds.dtype)
    embeds = embeds.masked_scatter(at.unsqueeze(-1), tokens.reshape(-1, tokens.shape[-1]))
    lm = model.model.language_model
    out = lm(inputs_embeds=embeds, output_hidden_states=bool(args.match_layer))
    logits = model.lm_head(out.last_hidden_state).float()
    labels = batch["labels"]
    answer = F.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(), ignore_index=-100)
    matches = batch["matches"].to(ids.device)
    # The running OR over the image tokens in reading order: the last one holds the answer to the claim.
    seen_so_far = torch.cummax(matches, dim=1).values
    patch = _balanced_yes_no(logits, at, seen_so_far.flatten(), yes, no)
    if args.match_layer:
        mid = model.lm_head(lm.norm(out.hidden_states[args.match_layer])).float()
        patch = patch + _balanced_yes_no(mid, at, matches.flatten(), yes, no)
    loss = answer + args.patch_loss_weight * patch
    parts.update(answer=answer.item(), patch=patch.item())
    if stage == "joint" and args.oracle_loss_weight:
        loss = loss + args.oracle_loss_weight * distance
    return loss, parts


@functools.lru_cache(maxsize=1)
def objective_class() -> type:
    import torch

    class _StageObjective(torch.nn.Module):
        """The LLaVA model plus one stage's loss; what the Trainer (and under DDP, its wrapper) calls."""

        def __init__(self, model: Any, stage: str, args: MiniModelArguments, yes: int, no: int) -> None:
            super().__init__()
            self.model, self.stage, self.args, self.yes, self.no = model, stage, args, yes, no
            self.parts: dict[str, float] = {}

        def forward(self, **batch: Any) -> dict[str, Any]:
            loss, self.parts = stage_loss(self.model, batch, self.stage, self.args, self.yes, self.no)
            return {"loss": loss}

    return _StageObjective
