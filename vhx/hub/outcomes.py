"""What the attacks of an adversarial split did, read back from its rows: unmoved images and updates taken.

Torch-free: the card (:mod:`vhx.hub`) and the command line's split summary read these from the
parquet text columns. Each case of an adversarial split carries its attack's record in
``provenance["adversarial"]`` (the attack key, branch, ``unmoved``, precision) and in
``transform_params`` (the settings, ``steps_run`` and, since convergence stopping, ``stopped``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow.compute as pc

from vhx.schema import loads

#: Per-image outcomes of an attack, not its settings: left out of the card's settings table.
OUTCOME_KEYS: tuple[str, ...] = ("final_similarity", "initial_similarity", "best_similarity", "steps_run", "stopped")


def attack_outcomes(table: Any) -> dict[str, Any]:
    """Of an adversarial split (an Arrow table): its attacks per branch and what they did; empty for other splits.

    ``attacked`` / ``unmoved``: non-VH attacks (one per image) and those that left their image
    unmoved, with ``attack_dtype`` and ``target_model``; ``updates``: per branch, the attacks, the
    mean updates taken, the budget, how many stopped once converged and the convergence settings
    (when ``transform_params`` is in the table). Folders written before vhx recorded ``unmoved``
    give nothing.
    """
    if "provenance" not in table.column_names or table.num_rows == 0:
        return {}
    mask = pc.match_substring(table["provenance"], '"unmoved":')
    if not pc.any(mask).as_py():
        return {}
    rows = table.filter(mask)
    models = rows["target_model"].to_pylist() if "target_model" in rows.column_names else [None] * rows.num_rows
    params = rows["transform_params"].to_pylist() if "transform_params" in rows.column_names else [None] * rows.num_rows
    moved: dict[str, bool] = {}
    dtypes: set[str] = set()
    targets: set[str] = set()
    attacks: dict[str, dict[str, Any]] = {}
    for text, model, param_text in zip(rows["provenance"].to_pylist(), models, params):
        adversarial = loads(text).get("adversarial") or {}
        key, branch = adversarial.get("attack"), adversarial.get("branch")
        if param_text and key not in attacks:
            attacks[key] = {"branch": branch, **loads(param_text)}
        if branch != "min":
            continue
        moved[key] = moved.get(key, False) or bool(adversarial.get("unmoved"))
        dtypes.add(str(adversarial.get("dtype")))
        if model:
            targets.add(model)
    out: dict[str, Any] = {}
    if moved:
        out.update(attacked=len(moved), unmoved=sum(moved.values()), attack_dtype=", ".join(sorted(dtypes)),
                   target_model=", ".join(sorted(targets)))  # fmt: skip
    updates = _updates(attacks.values())
    if updates:
        out["updates"] = updates
    return out


def _updates(attacks: Any) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for branch in ("min", "max"):
        mine = [a for a in attacks if a.get("branch") == branch and "steps_run" in a]
        if not mine:
            continue
        out[branch] = {
            "attacks": len(mine),
            "mean": sum(a["steps_run"] for a in mine) / len(mine),
            "budget": max(int(a.get("steps", 0)) for a in mine),
            "converged": sum(a.get("stopped") == "converged" for a in mine),
            "window": mine[0].get("converge_window"),
            "tol": mine[0].get("converge_tol"),
            "schedule": mine[0].get("schedule", "constant"),
        }
    return out


def unmoved_warning(split: str, stats: Mapping[str, Any]) -> str | None:
    """The warning for a split whose non-VH attacks left some images as the clean ones (None when none did)."""
    unmoved, attacked = stats.get("unmoved"), stats.get("attacked")
    if not unmoved:
        return None
    dtype = stats.get("attack_dtype") or "unknown precision"
    against = f"against {stats['target_model']}, " if stats.get("target_model") else ""
    return (f"{split}: {unmoved} of {attacked} attacked images unchanged: the non-VH attack left them as the clean image "
            f"(L-inf 0, or a cosine that never left its start; {against}attacked in {dtype}); {unmoved_hint(dtype)}")  # fmt: skip


def updates_note(split: str, stats: Mapping[str, Any]) -> str | None:
    """One sentence on the updates the attacks of ``split`` took, and whether they stopped once converged (None: no attacks)."""
    updates = stats.get("updates")
    if not updates:
        return None
    parts = []
    for branch, label in (("min", "non-VH"), ("max", "VH")):
        u = updates.get(branch)
        if not u:
            continue
        text = f"{label} images {u['mean']:.0f} updates on average (budget {u['budget']}, {u['attacks']} images)"
        if u["window"] is not None:
            text += (f", {u['converged']} stopped once converged (their last {u['window']} updates brought less than "
                     f"{u['tol']:.0%} of their cosine's fall)")  # fmt: skip
        elif branch == "min":
            text += ", no convergence stopping"
        parts.append(text)
    # what the two kinds are, once, so the counts read without the paper at hand
    note = (f"{split}: " + "; ".join(parts) + " (non-VH: cases the target answered right, attacked to change what it "
            "sees; VH: cases it already got wrong, changed while it sees the same)")
    schedules = {u["schedule"] for u in updates.values() if u}
    if "apgd" in schedules:
        note += (". Attacked with the APGD step schedule (`--preset fast`: per-image steps from 2 eps, halved at checkpoints, "
                 "momentum 0.75; Croce and Hein 2020), not the paper's constant 0.5/255 steps: stronger cases than the paper's, "
                 "in fewer updates")  # fmt: skip
    elif "cosine" in schedules:
        note += ". Attacked with the cosine step schedule (the authors' scripts)"
    return note


def unmoved_hint(precision: str) -> str:
    """What to do about attacks that left their images as the clean ones, by the precision they ran in
    (the error of :mod:`vhx.adversarial.splits` and the warning of the folder card both say it)."""
    if precision == "float32":
        return ("not float16's lost gradient: the gradient was too small for the step to move the image (PGD on the raw "
                "gradient, --grad-norm none, moves it by step x gradient): try --grad-norm linf or a larger step")  # fmt: skip
    return f"in {precision} the cosine's gradient at the clean image can be exactly 0: rerun with --attack-dtype float32"
