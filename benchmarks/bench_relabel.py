"""Re-scoring a POPE run on RePOPE's labels (``vhx relabel``) vs asking the model again, same process.

RePOPE changes labels, not questions or images, so a finished POPE run can be moved onto the new
labels without the model. The baseline is what a tool without that step does: score the same cases
again (``predict_dataset`` with the smallest model vhx has, vhx-mini in ``logits`` mode: one forward
pass per case, prefixes shared; any real MLLM is hundreds of times slower, so the ratio is a floor).
vhx's side is :func:`vhx.scoring.relabel.write_relabelled_run` on that run's predictions.

Data: POPE-format question files in a RePOPE-style clone (``annotations/coco_pope_*.json`` and
``coco_repope_*.json``; RePOPE drops one question in 12 and flips one label in 8) over drawn images,
built with ``vhx build pope`` and expanded with negations (every case and its twin).

Usage: ``python benchmarks/bench_relabel.py [--images 20] [--per-image 6] [--repeats 3] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw

SUBSETS = ("random", "popular", "adversarial")
OBJECTS = ("dog", "cat", "car", "person", "chair", "bottle", "kite", "bench", "cup", "bird")


def write_clone(root: Path, images: int, per_image: int) -> None:
    """A RePOPE-style clone with POPE's and RePOPE's files and the images they name."""
    (root / "annotations").mkdir(parents=True)
    (root / "val2014").mkdir()
    names = [f"COCO_val2014_{i:012d}.jpg" for i in range(images)]
    for i, name in enumerate(names):
        im = Image.new("RGB", (224, 224), (240, 240, 240))
        ImageDraw.Draw(im).ellipse((20 + i % 50, 30, 150, 160 + i % 40), fill=(i * 37 % 256, 90, 160))
        im.save(root / "val2014" / name, quality=90)
    for s, subset in enumerate(SUBSETS):
        pope, repope, qid = [], [], 0
        for i, name in enumerate(names):
            for k in range(per_image):
                qid += 1
                label = "yes" if k % 2 == 0 else "no"
                rec = {"question_id": qid, "image": name, "text": f"Is there a {OBJECTS[(i + k + s) % len(OBJECTS)]} in the image?", "label": label}
                pope.append(rec)
                if qid % 12:
                    repope.append({**rec, "label": ("no" if label == "yes" else "yes") if qid % 8 == 0 else label})
        for stem, recs in (("pope", pope), ("repope", repope)):
            (root / "annotations" / f"coco_{stem}_{subset}.json").write_text("".join(json.dumps(r) + "\n" for r in recs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=20)
    parser.add_argument("--per-image", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    import torch

    from vhx.builders import load_source
    from vhx.models import load_model
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset
    from vhx.scoring.relabel import write_relabelled_run

    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="vhx-bench-relabel-"))
    write_clone(work / "RePOPE", args.images, args.per_image)
    dsd, _ = load_source("pope", str(work / "RePOPE" / "annotations"), image_dir=str(work / "RePOPE" / "val2014"))
    pairs = expand(dsd)
    model = load_model("vhx-mini", mode="logits")
    predict_dataset(pairs, model, work / "warm", progress=False)  # warm-up: weights, kernels, caches
    write_relabelled_run(work / "warm", work / "RePOPE", work / "warm-repope")

    rescore, relabel = [], []
    for r in range(args.repeats):
        start = time.perf_counter()
        predict_dataset(pairs, model, work / f"run{r}", progress=False)
        rescore.append(time.perf_counter() - start)
        start = time.perf_counter()
        _, counts = write_relabelled_run(work / f"run{r}", work / "RePOPE", work / f"run{r}-repope")
        relabel.append(time.perf_counter() - start)
    cases = sum(len(pairs[s]) for s in pairs)
    result = {
        "cpu": platform.processor() or platform.machine(), "cases": cases, "kept": counts.kept,
        "rescore_s": min(rescore), "relabel_s": min(relabel), "ratio": min(rescore) / min(relabel),
    }
    print(f"{cases:,} cases ({counts.kept:,} kept by RePOPE, {counts.changed:,} relabelled): asking vhx-mini again "
          f"{result['rescore_s']:.2f} s, vhx relabel {result['relabel_s']:.3f} s -> {result['ratio']:.0f}x faster "
          "(a floor: a real MLLM takes far longer per case than vhx-mini)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
