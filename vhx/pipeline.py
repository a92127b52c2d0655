"""The expansion pipeline: source cases -> pairs (negation) -> one split per image perturbation.

An expanded dataset has one split per *image transform*: ``original`` holds every source case and
its negated twin on the source image; ``gaussian_noise``, ``brightness``, ... hold the same pairs on
the perturbed images. The source's subsets (POPE random/popular/adversarial, VHTest modes, ...) stay
in the ``subset`` column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets

from vhx.errors import DataError
from vhx.schema import ORIGINAL


def originals(dsd: datasets.DatasetDict | datasets.Dataset) -> datasets.Dataset:
    """All source splits in one dataset; refuses rows that are already generated."""
    if isinstance(dsd, datasets.Dataset):
        parts = [dsd]
    else:
        parts = [dsd[s] for s in dsd]
    ds = datasets.concatenate_datasets(parts) if len(parts) > 1 else parts[0]
    transforms = set(ds.unique("transform"))
    if transforms != {ORIGINAL}:
        raise DataError(f"expected source cases on original images, found transforms {sorted(transforms - {ORIGINAL})}", field="transform")
    return ds


def expand(
    dsd: datasets.DatasetDict | datasets.Dataset,
    *,
    negator: Any | None = None,
    perturb: Sequence[str] | None = None,
    perturb_params: dict[str, dict[str, Any]] | None = None,
    seed: int = 0,
    num_proc: int | None = None,
    attacks: Sequence[str] | None = None,
    target_model: Any = None,
    attack: Any = None,
    attack_options: dict[str, Any] | None = None,
    on_error: str = "raise",
    report: Any = None,
    workers: int | None = None,
    max_fallback: float | None = None,
) -> datasets.DatasetDict:
    """Expand source cases: negate into pairs (unless already paired), then perturb per image.

    Args:
        dsd: the source benchmark (any splits) or an ``original`` split that already holds pairs.
        negator: a :class:`vhx.negation.Negator`; ``None`` uses the offline rule negator. Cases that
            already have their negated twin are kept as they are.
        perturb: perturbation names from :data:`vhx.perturbations.PERTURBATIONS` (none by default).
        perturb_params: per-perturbation parameter overrides (``{"brightness": {"c": 0.3}}``).
        seed: seed of the random perturbations (noise is seeded per image, perturbation and seed).
        num_proc: worker processes for the ``datasets.map`` calls.
        workers: processes that perturb and encode the images (default ``num_proc``, else one per
            available core); each source image is decoded once and each perturbed image encoded
            and written once, as a file the split's rows reference (embedded when the Hub folder
            is written, once per image).
        attacks: white-box attack methods (``"ifgsm"``, ``"pgd"``), each a split of every pair on
            the adversarial image against ``target_model``.
        target_model: Hub id, folder or loaded model the attacks target (and, unless
            the attack's ``vh_column`` says which cases trigger VH, the model that scores them).
        attack: the attack as one :class:`vhx.adversarial.AttackSettings` (preset, its overrides, ``out_dir`` for
            resuming, ``dtype``: the attack's precision, float32 by default, float16 for ``preset="authors"`` on CUDA,
            ...), built once (``vhx expand`` builds it from its flags). Its seed is ``seed`` unless it names one.
            A split whose every non-VH attack left its image unchanged raises
            :class:`~vhx.adversarial.attack.AttackError` before anything is returned.
        attack_options: the same settings as one flat mapping (``{"preset": "fast", "eps": 4/255, "out_dir": ...}``),
            read by :meth:`~vhx.adversarial.AttackSettings.from_options`; give ``attack`` or this, not both.
        on_error: ``"raise"`` stops at the first case the negator cannot negate, naming its row;
            ``"skip"`` drops it (no pair, so no later split holds it) and records why in ``report``.
        report: a :class:`vhx.errors.SkipReport` that collects the skipped cases.
        max_fallback: largest share of twins another negator than ``negator`` may have made (an
            LLM negator's rule fallbacks) before :class:`vhx.negation.NegationFallbackError` is
            raised, before any image is perturbed; default
            :data:`vhx.negation.DEFAULT_MAX_FALLBACK` (0.1).
    """
    from vhx.negation import DEFAULT_MAX_FALLBACK, RuleNegator, check_fallbacks, negate_dataset, negator_counts
    from vhx.perturbations import perturb_splits

    ds = originals(dsd)
    negated = ds.unique("negated")
    if True in negated:
        if False not in negated or len(ds) != 2 * len(ds.unique("pair_id")):
            raise DataError("the input mixes paired and unpaired cases; expand the source benchmark instead", field="negated")
        pairs = ds
    else:
        negator = negator or RuleNegator()
        pairs = negate_dataset(ds, negator, num_proc=num_proc, on_error=on_error, report=report)
        if len(pairs) == 0:
            raise DataError("no case could be negated: nothing to expand", field="question")
        # counted from the rows, not the negator's stats: those miss what num_proc workers did
        check_fallbacks(negator_counts(pairs), negator, DEFAULT_MAX_FALLBACK if max_fallback is None else max_fallback)
    out = {ORIGINAL: pairs}
    if perturb:
        out.update(perturb_splits(pairs, list(perturb), seed=seed, params=perturb_params, num_proc=num_proc, workers=workers))
    if attacks:
        from vhx.adversarial import adversarial_splits

        if target_model is None:
            raise DataError("adversarial expansion needs a target model (--target-model)")
        from vhx.adversarial.settings import AttackSettings

        if attack is not None and attack_options:
            raise TypeError("give the attack as attack=AttackSettings(...) or as attack_options, not both")
        settings = attack if attack is not None else AttackSettings.from_options(attack_options)
        out.update(adversarial_splits(pairs, target_model, settings.seeded(seed), methods=tuple(attacks)))
    return datasets.DatasetDict(out)
