"""Benchmark: Hub folder storage, one copy per image (vhx) vs one copy per row (``Dataset.to_parquet``).

Builds POPE-like splits in memory: N photo-like COCO-size JPEGs, referenced by path as ``vhx build``
references them, with Q questions per image, each a case and its negated twin (2 x Q rows per
image), the questions of an image spread over the split as in an expanded benchmark (a POPE subset's
rows are grouped by image, but ``original`` concatenates the three subsets). Each split is written
by :func:`vhx.hub.write_hub_folder` twice in this process, with ``share_images=False`` (the per-row
layout, as ``push_to_hub`` and vhx before wrote it: the baseline) and with the default shared
layout, for Q = 1 and Q = 6, and read back. Reported per layout and Q:

* bytes of ``data/`` (and what the Parquet column chunks of ``image.bytes`` hold, with their
  encodings), and the growth from Q = 1 to Q = 6 (goal for the shared layout: at most 1.5x);
* write time;
* load time with ``datasets.load_dataset(parquet files)`` (what ``vhx.hub.load_folder`` does) into a
  fresh cache, the size of that Arrow cache, and a pass over every row's image bytes;
* with :func:`vhx.hub.open_folder` (what ``vhx evaluate`` reads now, no cache): open time and the
  same pass.

Runs alternate between the layouts and repeat (``--repeats``); the table shows the median.

    python benchmarks/bench_storage.py                 # 200 images of 640x480
    python benchmarks/bench_storage.py --images 500 --repeats 3

Exit status 1 if the shared layout grows by more than ``--max-growth`` (default 1.5) from 1 to 6
questions per image, or if a layout reads back other rows than were written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import datasets
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_expand import photo_like  # noqa: E402  (the same photo-like images as the expansion benchmark)

from vhx.hub import folder_data_files, open_folder, write_hub_folder  # noqa: E402
from vhx.schema import FEATURES, make_case  # noqa: E402

LAYOUTS = {"per row (baseline)": False, "shared (vhx)": True}


def make_split(image_files: list[Path], questions: int) -> datasets.Dataset:
    """2 x ``questions`` rows per image (case + negated twin), question by question over the images."""
    rows = []
    for q in range(questions):
        for i, path in enumerate(image_files):
            for negated in (False, True):
                rows.append(make_case(
                    source="pope", subset="random", source_id=f"{i}-{q}", image={"bytes": None, "path": str(path)},
                    image_id=f"coco:{path.stem}", question=f"Is there {'no ' if negated else ''}object {q} in the image?",
                    answer="no" if negated else "yes", negated=negated, provenance={"line": q},
                ))
    return datasets.Dataset.from_list(rows, features=FEATURES)


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def image_chunks(folder: Path) -> tuple[int, set[str]]:
    """Bytes of the ``image.bytes`` column chunks of every shard, and their encodings."""
    total, encodings = 0, set()
    for file in (folder / "data").glob("*.parquet"):
        meta = pq.ParquetFile(file).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                if column.path_in_schema == "image.bytes":
                    total += column.total_compressed_size
                    encodings.update(column.encodings)
    return total, encodings


def read_every_image(ds) -> int:
    """A pass over the rows, reading each row's image bytes (not decoded), as a scorer reads cases."""
    return sum(len(row["image"]["bytes"]) for row in ds.cast_column("image", datasets.Image(decode=False)))


def measure(ds: datasets.Dataset, shared: bool, work: Path) -> dict[str, float]:
    folder = work / "folder"
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    write_hub_folder(datasets.DatasetDict({"random": ds}), folder, share_images=shared)
    out = {"write_s": time.perf_counter() - start, "bytes": dir_bytes(folder / "data")}
    out["image_chunk_bytes"], encodings = image_chunks(folder)
    out["encodings"] = ",".join(sorted(encodings))

    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    loaded = datasets.load_dataset("parquet", data_files=folder_data_files(folder), cache_dir=str(cache), split="random")
    out["load_s"] = time.perf_counter() - start
    out["cache_bytes"] = dir_bytes(cache)
    start = time.perf_counter()
    seen = read_every_image(loaded)
    out["load_pass_s"] = time.perf_counter() - start
    out["ids"] = sorted(loaded["id"])
    del loaded

    start = time.perf_counter()
    opened = open_folder(folder, "random")
    out["open_s"] = time.perf_counter() - start
    start = time.perf_counter()
    out["same_images"] = read_every_image(opened) == seen
    out["open_pass_s"] = time.perf_counter() - start
    shutil.rmtree(cache, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--size", default="640x480")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-growth", type=float, default=1.5, help="largest Q=6 / Q=1 size ratio of the shared layout")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    work = Path(tempfile.mkdtemp(prefix="vhx-bench-storage-"))
    datasets.disable_progress_bars()
    try:
        files = []
        for i in range(args.images):
            path = work / "images" / f"COCO_val2014_{100_000 + i:012d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            photo_like(width, height, seed=i).save(path, quality=90)
            files.append(path)
        jpeg = sum(p.stat().st_size for p in files)
        print(f"{args.images} JPEGs of {width}x{height}, {jpeg / 1e6:.1f} MB in all; {os.cpu_count()} CPUs")
        results: dict[tuple[str, int], list[dict]] = defaultdict(list)
        splits = {q: make_split(files, q) for q in (1, 6)}
        for repeat in range(args.repeats):
            for q, ds in splits.items():
                order = list(LAYOUTS.items()) if repeat % 2 == 0 else list(LAYOUTS.items())[::-1]
                for name, shared in order:
                    results[(name, q)].append(measure(ds, shared, work))
        ok = True
        print(f"\n{'layout':<20} {'Q':>2} {'rows':>6} {'data/ MB':>9} {'images MB':>10} {'encodings':<28} {'write s':>8} "
              f"{'load s':>7} {'cache MB':>9} {'pass s':>7} {'open s':>7} {'pass s':>7}")
        summary = {}
        for (name, q), runs in results.items():
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float)) and not isinstance(runs[0][k], bool)}
            summary[(name, q)] = med
            ok &= all(r["same_images"] and r["ids"] == sorted(splits[q]["id"]) for r in runs)
            print(f"{name:<20} {q:>2} {len(splits[q]):>6} {med['bytes'] / 1e6:9.1f} {med['image_chunk_bytes'] / 1e6:10.1f} "
                  f"{runs[0]['encodings']:<28} {med['write_s']:8.2f} {med['load_s']:7.2f} {med['cache_bytes'] / 1e6:9.1f} "
                  f"{med['load_pass_s']:7.2f} {med['open_s']:7.2f} {med['open_pass_s']:7.2f}")
        print()
        for name in LAYOUTS:
            growth = summary[(name, 6)]["bytes"] / summary[(name, 1)]["bytes"]
            print(f"{name}: data/ grows {growth:.2f}x from 1 to 6 questions per image")
            if LAYOUTS[name] and growth > args.max_growth:
                ok = False
        base, new = summary[("per row (baseline)", 6)], summary[("shared (vhx)", 6)]
        print(f"Q=6, baseline / vhx: data/ {base['bytes'] / new['bytes']:.1f}x, write time {base['write_s'] / new['write_s']:.1f}x, "
              f"load_dataset time {base['load_s'] / new['load_s']:.2f}x (cache {base['cache_bytes'] / new['cache_bytes']:.2f}x), "
              f"open_folder + pass vs load_dataset + pass (vhx layout) "
              f"{(new['load_s'] + new['load_pass_s']) / (new['open_s'] + new['open_pass_s']):.1f}x")
        if not ok:
            print("FAILED: growth above --max-growth, or rows read back differ", file=sys.stderr)
        return 0 if ok else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
