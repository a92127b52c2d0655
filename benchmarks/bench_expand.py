"""Benchmark: expanding a POPE-size benchmark (``vhx build pope`` + ``vhx expand --perturb all``).

Generates a POPE release in the released format (``coco_pope_{random,popular,adversarial}.json``,
JSON lines ``{"question_id", "image", "text", "label"}``, 6 questions per image per subset: 3 about
objects in the image, 3 about objects that are not, drawn at random, by popularity or by
co-occurrence) over photo-like 640x480 COCO-named JPEGs, then:

1. runs the expansion stage by stage in this process and reports, per stage, wall time, CPU time
   (all threads and worker processes) and peak resident memory (sampled; this process, and with
   its worker processes), with the perturbation stage split per perturbation into pixel work and
   PNG/JPEG encoding (seconds summed over images and workers);
2. runs ``vhx build pope`` and ``vhx expand --negator rules --perturb all`` as the commands a user
   types, each in its own process, and reports their wall time, CPU time and peak memory (the
   largest process's maximum resident set size, as ``/usr/bin/time -v`` shows it, and the sampled
   peak of the sum over the command and its worker processes) and the size of the written folder;
3. with ``--baseline REF``, runs the same two commands with vhx as of git revision ``REF`` (a
   temporary worktree on ``PYTHONPATH``; the subpackages an editable install maps from the top of
   the checkout, ``builders/`` and ``hub_cards/``, still come from this checkout), on the same
   input, for a before/after comparison.

    python benchmarks/bench_expand.py                                   # full POPE: 9,000 questions, 500 images
    python benchmarks/bench_expand.py --subsets random --images 100     # a quick run
    python benchmarks/bench_expand.py --subsets random --baseline HEAD~3 # before/after on one subset

Every run perturbs from scratch (fresh image and datasets cache folders under ``--work``). Goal for
the full POPE on 2 CPU cores: at most 5 minutes and 2 GB peak memory for ``vhx expand``. Absolute
times describe the machine they ran on; on a shared machine, compare runs made at the same time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

SUBSETS = ("random", "popular", "adversarial")
COCO_OBJECTS = (
    "person bicycle car motorcycle airplane bus train truck boat traffic-light fire-hydrant stop-sign "
    "parking-meter bench bird cat dog horse sheep cow elephant bear zebra giraffe backpack umbrella handbag "
    "tie suitcase frisbee skis snowboard sports-ball kite baseball-bat baseball-glove skateboard surfboard "
    "tennis-racket bottle wine-glass cup fork knife spoon bowl banana apple sandwich orange broccoli carrot "
    "hot-dog pizza donut cake chair couch potted-plant bed dining-table toilet tv laptop mouse remote "
    "keyboard cell-phone microwave oven toaster sink refrigerator book clock vase scissors teddy-bear "
    "hair-drier toothbrush"
).split()


# --------------------------------------------------------------------------------------- input
def photo_like(width: int, height: int, seed: int) -> Image.Image:
    """A random but photo-like RGB image: gradients, flat shapes, soft edges and sensor noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    freq, phase = rng.uniform(1.0, 4.0, 3), rng.uniform(0, 2 * np.pi, 3)
    base = np.stack([127 + 100 * np.sin(freq[c] * (xx / width + (c - 1) * yy / height) + phase[c]) for c in range(3)], -1)
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    for _ in range(int(rng.integers(8, 20))):
        x0, y0 = int(rng.integers(-width // 4, width)), int(rng.integers(-height // 4, height))
        box = [x0, y0, x0 + int(rng.integers(20, width // 2)), y0 + int(rng.integers(20, height // 2))]
        colour = tuple(int(v) for v in rng.integers(0, 256, 3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)(box, fill=colour)
    arr = np.asarray(img.filter(ImageFilter.GaussianBlur(1.2))).astype(np.int16)
    arr += rng.normal(0, 6, arr.shape).astype(np.int16)
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def make_pope_release(root: Path, *, images: int, subsets: tuple[str, ...], size: tuple[int, int], per_image: int = 6) -> Path:
    """A POPE release in the released layout: question files + ``val2014/`` images (reused if present)."""
    image_dir = root / "val2014"
    image_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    names = [f"COCO_val2014_{100_000 + 37 * i:012d}.jpg" for i in range(images)]
    truth = [[int(o) for o in rng.choice(len(COCO_OBJECTS), 3, replace=False)] for _ in range(images)]
    stamp = image_dir / f".size-{size[0]}x{size[1]}"
    if not stamp.is_file():
        for old in image_dir.glob("*.jpg"):
            old.unlink()
        stamp.touch()
    for i, name in enumerate(names):
        if not (image_dir / name).is_file():
            photo_like(*size, seed=i).save(image_dir / name, quality=90)
    popularity = [int(o) for o in np.bincount([o for t in truth for o in t], minlength=len(COCO_OBJECTS)).argsort()[::-1]]
    for old in root.glob("coco_pope_*.json"):
        old.unlink()
    for k, subset in enumerate(subsets):
        srng = np.random.default_rng(100 + SUBSETS.index(subset) if subset in SUBSETS else 100 + k)
        lines, qid = [], 0
        for name, present in zip(names, truth):
            absent = [o for o in range(len(COCO_OBJECTS)) if o not in present]
            if subset == "popular":
                negatives = [o for o in popularity if o not in present]
            elif subset == "adversarial":  # "co-occurring": neighbours in the category list first
                near = [o for o in absent if min(abs(o - p) for p in present) <= 3]
                negatives = near + [o for o in absent if o not in near]
            else:
                negatives = [int(o) for o in srng.permutation(absent)]
            half = per_image // 2
            for obj, label in [*((o, "yes") for o in present[:half]), *((o, "no") for o in negatives[: per_image - half])]:
                qid += 1
                text = f"Is there a {COCO_OBJECTS[obj].replace('-', ' ')} in the image?"
                lines.append(json.dumps({"question_id": qid, "image": name, "text": text, "label": label}))
        (root / f"coco_pope_{subset}.json").write_text("\n".join(lines) + "\n")
    return root


# --------------------------------------------------------------------------------------- measuring
class Sampler:
    """Peak resident memory within each stage, sampled every 10 ms: this process, and this process
    plus its worker processes (the sum of their resident sets, an upper bound: forked workers share
    pages with this process)."""

    def __init__(self) -> None:
        self.peak = self.peak_tree = 0
        try:
            import psutil

            self._process = psutil.Process()
        except ImportError:  # the tree is then this process alone
            self._process = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> tuple[int, int]:
        if self._process is None:
            with open("/proc/self/status") as f:
                own = next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")), 0)
            return own, own
        own = tree = self._process.memory_info().rss
        for child in self._process.children(recursive=True):
            with contextlib.suppress(Exception):  # a worker may exit between listing and reading
                tree += child.memory_info().rss
        return own, tree

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            own, tree = self.sample()
            self.peak, self.peak_tree = max(self.peak, own), max(self.peak_tree, tree)

    def reset(self) -> None:
        self.peak, self.peak_tree = self.sample()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (pool workers once joined)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Stages:
    def __init__(self) -> None:
        self.rows: list[tuple[str, float, float, int, int]] = []
        self.sampler = Sampler()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.sampler.reset()
        wall, cpu = time.perf_counter(), _cpu()
        yield
        own, tree = self.sampler.sample()
        self.rows.append((name, time.perf_counter() - wall, _cpu() - cpu, max(self.sampler.peak, own), max(self.sampler.peak_tree, tree)))


@contextlib.contextmanager
def perturbation_timers(log: Path) -> Iterator[dict[str, dict[str, float]]]:
    """Seconds per perturbation, summed over the images: the whole ``perturb_file`` call and its
    encoding part. Each call appends a line to ``log``, so calls in worker processes count too."""
    from vhx.perturbations import dataset as stage
    from vhx.perturbations import registry

    log.unlink(missing_ok=True)
    totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    local = threading.local()
    real_file, real_png, real_jpeg = stage.perturb_file, registry.png_bytes, registry.jpeg_bytes

    def timed_encoder(real):
        def encode(*args, **kwargs):
            start = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                local.encode = getattr(local, "encode", 0.0) + time.perf_counter() - start

        return encode

    def timed_file(name, *args, **kwargs):
        local.encode = 0.0
        start = time.perf_counter()
        try:
            return real_file(name, *args, **kwargs)
        finally:
            total = time.perf_counter() - start
            with open(log, "a") as f:  # one short append per call: lines do not interleave
                f.write(f"{name} {total - local.encode} {local.encode}\n")

    stage.perturb_file, registry.png_bytes, registry.jpeg_bytes = timed_file, timed_encoder(real_png), timed_encoder(real_jpeg)
    try:
        yield totals
    finally:
        stage.perturb_file, registry.png_bytes, registry.jpeg_bytes = real_file, real_png, real_jpeg
        for line in log.read_text().splitlines() if log.is_file() else []:
            name, pixels, encode = line.split()
            totals[name]["pixels"] += float(pixels)
            totals[name]["encode"] += float(encode)
            totals[name]["images"] += 1


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in (folder / "data").glob("*.parquet"))


def run_stages(release: Path, work: Path, subsets: tuple[str, ...], workers: int | None) -> tuple[Stages, dict]:
    """The expansion stage by stage, in this process (what ``vhx build`` + ``vhx expand`` run)."""
    import datasets

    from vhx.builders import load_source
    from vhx.gallery import write_gallery
    from vhx.hub import load_folder_by_reference, write_hub_folder
    from vhx.negation import RuleNegator, negate_dataset
    from vhx.perturbations import dataset as perturb_stage
    from vhx.perturbations import perturb_splits
    from vhx.pipeline import originals
    from vhx.review import review_export

    stages = Stages()
    for name in ("hub", "expanded", "files", "perturbed"):
        shutil.rmtree(work / name, ignore_errors=True)
    with stages.stage("build: read POPE, write the Hub folder"):
        built, _ = load_source("pope", str(release), subsets=subsets, cache_dir=str(work / "build-cache"))
        write_hub_folder(built, work / "hub", repo_id="vhx/pope", overwrite=True)
    with stages.stage("expand: read the folder (images as files)"):
        source = load_folder_by_reference(work / "hub", work / "files")
    with stages.stage("negation (rules)"):
        pairs = negate_dataset(originals(source), RuleNegator())
    real_images = perturb_stage._perturb_unique_images
    perturb_wall: dict[str, float] = {}

    def timed_images(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real_images(*args, **kwargs)
        finally:
            perturb_wall["images"] = time.perf_counter() - start

    perturb_stage._perturb_unique_images = timed_images
    try:
        with perturbation_timers(work / "perturb-times.log") as per_name, stages.stage("perturbing (all four) + attaching to cases"):
            splits = perturb_splits(pairs, seed=0, image_dir=work / "perturbed", workers=workers)
    finally:
        perturb_stage._perturb_unique_images = real_images
    expanded = datasets.DatasetDict({"original": pairs, **splits})
    with stages.stage("writing the Hub folder"):
        write_hub_folder(expanded, work / "expanded", repo_id="vhx/pope-expanded", overwrite=True)
    with stages.stage("review sample + gallery"):
        review_export(pairs, work / "expanded" / "review", n=100)
        write_gallery(expanded, work / "expanded" / "gallery.html", n=12)
    stages.sampler.close()
    detail = {
        "per_perturbation": {k: dict(v) for k, v in per_name.items()},
        "perturb_images_wall": perturb_wall.get("images", float("nan")),
        "rows": {k: len(v) for k, v in expanded.items()},
        "images": len(set(pairs["image_id"])),
        "bytes": {"source": folder_bytes(work / "hub"), "expanded": folder_bytes(work / "expanded")},
    }
    return stages, detail


GNU_TIME = "/usr/bin/time"


def run_measured(cmd: list[str], env: dict[str, str], log_path: Path) -> dict[str, float]:
    """Run ``cmd``: wall time, CPU time (with its worker processes), peak resident memory of its
    largest process (GNU time's maximum resident set size, where /usr/bin/time is there; a child
    forked from this process would report at least this process's size), and the peak of the sum
    over the command and its worker processes (sampled every 20 ms)."""
    try:
        import psutil
    except ImportError:
        psutil = None
    timing = log_path.with_suffix(".time")
    use_time = os.path.exists(GNU_TIME)
    full = [GNU_TIME, "-f", "%M", "-o", str(timing), *cmd] if use_time else cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    peak_tree = peak_own = 0
    with open(log_path, "w") as log:
        # run from the work folder: the checkout's own vhx/ must not shadow PYTHONPATH (baseline)
        proc = subprocess.Popen(full, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=log_path.parent)
        root = psutil.Process(proc.pid) if psutil else None
        while proc.poll() is None:
            if root is not None:
                with contextlib.suppress(Exception):  # processes come and go between the calls
                    tree = [root, *root.children(recursive=True)]
                    sizes = [p.memory_info().rss for p in tree]
                    peak_tree, peak_own = max(peak_tree, sum(sizes)), max(peak_own, max(sizes))
            time.sleep(0.02)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[3:5])} failed; see {log_path}")
    peak = int(timing.read_text().split()[-1]) * 1024 if use_time else peak_own
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_rss": peak, "peak_rss_with_workers": peak_tree}


def run_commands(release: Path, work: Path, subsets: tuple[str, ...], tag: str, pythonpath: str | None = None) -> dict:
    """``vhx build pope`` and ``vhx expand`` as separate processes: wall time, peak memory, folder size."""
    env = {**os.environ, "HF_DATASETS_CACHE": str(work / f"hf-cache-{tag}"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    shutil.rmtree(env["HF_DATASETS_CACHE"], ignore_errors=True)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    hub, out = work / f"cli-hub-{tag}", work / f"cli-expanded-{tag}"
    commands = {
        "vhx build pope": ["build", "pope", "--data-dir", str(release), "--out", str(hub), "--overwrite", "--subsets", ",".join(subsets)],
        "vhx expand --negator rules --perturb all": ["expand", str(hub), "--out", str(out), "--negator", "rules", "--perturb", "all", "--overwrite"],
    }
    results = {}
    for label, args in commands.items():
        cmd = [sys.executable, "-c", "import sys; from vhx.cli import main; sys.exit(main(sys.argv[1:]))", *args]
        results[label] = run_measured(cmd, env, work / f"{tag}-{args[0]}.log")
    results["bytes"] = {"source": folder_bytes(hub), "expanded": folder_bytes(out)}
    shutil.rmtree(env["HF_DATASETS_CACHE"], ignore_errors=True)
    return results


@contextlib.contextmanager
def worktree(ref: str) -> Iterator[Path]:
    """The repository at ``ref`` in a temporary git worktree."""
    repo = Path(__file__).resolve().parents[1]
    path = Path(tempfile.mkdtemp(prefix="vhx-baseline-"))
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(path), ref], check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(path)], check=False, capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=500, help="images (POPE: 500)")
    parser.add_argument("--subsets", default=",".join(SUBSETS), help="comma-separated POPE subsets (default all three)")
    parser.add_argument("--size", default="640x480", help="image size, WxH (COCO-like: 640x480)")
    parser.add_argument("--workers", type=int, help="perturbation threads in the stage run (default: one per core)")
    parser.add_argument("--work", help="working folder (default: a temporary folder, removed afterwards)")
    parser.add_argument("--baseline", metavar="REF", help="also run the commands with vhx at this git revision")
    parser.add_argument("--skip-stages", action="store_true", help="only the end-to-end command runs")
    parser.add_argument("--json", help="also write the results to this JSON file")
    args = parser.parse_args(argv)
    subsets = tuple(s for s in args.subsets.split(",") if s)
    width, height = (int(v) for v in args.size.lower().split("x"))
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="vhx-bench-expand-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        release = make_pope_release(work / "pope", images=args.images, subsets=subsets, size=(width, height))
        jpeg = [p.stat().st_size for p in (release / "val2014").glob("*.jpg")]
        print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable)")
        print(f"input: POPE release, {len(subsets)} subset(s) x {6 * args.images:,} questions over {args.images} images "
              f"of {width}x{height} (JPEG, mean {np.mean(jpeg) / 1e3:.0f} KB) [{time.perf_counter() - start:.0f} s to generate]")
        results: dict = {"input": {"subsets": subsets, "images": args.images, "size": [width, height]}}
        if not args.skip_stages:
            stages, detail = run_stages(release, work, subsets, args.workers)
            results["stages"] = [{"stage": s, "wall": w, "cpu": c, "peak_rss": m, "peak_rss_with_workers": t} for s, w, c, m, t in stages.rows]
            results["stage_detail"] = detail
            print(f"\nstages in one process ({detail['rows']['original']:,} cases per split, {detail['images']} images):")
            print(f"{'stage':<46} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'+ workers MB':>13}")
            for name, wall, cpu, peak, tree in stages.rows:
                print(f"{name:<46} {wall:8.1f} {cpu:8.1f} {_mb(peak):>12} {_mb(tree):>13}")
            total = sum(w for name, w, *_ in stages.rows if not name.startswith("build"))
            print(f"{'expand total (all but build)':<46} {total:8.1f}")
            print(f"\nperturbing: {detail['perturb_images_wall']:.1f} s wall; seconds per perturbation, summed over images and workers:")
            print(f"{'perturbation':<18} {'images':>7} {'pixels s':>9} {'encoding s':>11}")
            for name, t in detail["per_perturbation"].items():
                print(f"{name:<18} {int(t['images']):7d} {t['pixels']:9.1f} {t['encode']:11.1f}")
            print(f"folders: source {_mb(detail['bytes']['source'])} MB, expanded {_mb(detail['bytes']['expanded'])} MB")
        print("\nend to end, one process per command:")
        runs = {"this checkout": run_commands(release, work, subsets, "current")}
        if args.baseline:
            with worktree(args.baseline) as tree:
                runs[f"baseline {args.baseline}"] = run_commands(release, work, subsets, "baseline", pythonpath=str(tree))
        results["commands"] = runs
        print(f"{'code':<24} {'command':<42} {'wall s':>8} {'CPU s':>8} {'peak RSS MB':>12} {'+ workers MB':>13}")
        for code, res in runs.items():
            for label, r in res.items():
                if label != "bytes":
                    print(f"{code:<24} {label:<42} {r['wall']:8.1f} {r['cpu']:8.1f} {_mb(r['peak_rss']):>12} {_mb(r['peak_rss_with_workers']):>13}")
            print(f"{code:<24} {'folder sizes (data/)':<42} source {_mb(res['bytes']['source'])} MB, expanded {_mb(res['bytes']['expanded'])} MB")
        if args.baseline:
            new, old = runs["this checkout"], runs[f"baseline {args.baseline}"]
            label = "vhx expand --negator rules --perturb all"
            print(f"ratios baseline / this checkout: expand wall {old[label]['wall'] / new[label]['wall']:.1f}x, "
                  f"CPU {old[label]['cpu'] / new[label]['cpu']:.1f}x, peak memory {old[label]['peak_rss'] / new[label]['peak_rss']:.1f}x, "
                  f"expanded folder {old['bytes']['expanded'] / new['bytes']['expanded']:.1f}x")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
