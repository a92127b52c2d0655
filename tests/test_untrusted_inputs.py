"""Question files and images from someone else (issue 16): every hostile input is made here.

Each test names the defect it pins: image paths leaving the data folder, images that only a full
decode finds broken or that are far too large, bytes that are not UTF-8, empty question files,
undocumented label spellings, and decoding failures after the build naming the case.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import datasets
import numpy as np
import pytest
from PIL import Image

from vhx.builders import load_source
from vhx.cli import main
from vhx.errors import DataError
from vhx.images import DEFAULT_MAX_IMAGE_PIXELS, image_problem, is_inside

POPE_FILE = "coco_pope_random.json"


def _pope_line(qid: int, image: str, label: object = "yes") -> str:
    return json.dumps({"question_id": qid, "image": image, "text": f"Is there a dog {qid} in the image?", "label": label})


def _custom_line(qid: int, image: str, answer: object = "yes") -> str:
    return json.dumps({"id": qid, "image": image, "question": f"Is there a dog {qid} in the image?", "answer": answer})


def _release(root: Path, source: str, images: list[str], *, extra: dict[str, Image.Image] | None = None) -> Path:
    """A data folder with a good image a.png and a question file naming ``images`` in order (ids 1, 2, ...)."""
    root.mkdir(parents=True)
    Image.new("RGB", (8, 8), "blue").save(root / "a.png")
    for name, image in (extra or {}).items():
        image.save(root / name)
    line = _pope_line if source == "pope" else _custom_line
    name = POPE_FILE if source == "pope" else "cases.jsonl"
    (root / name).write_text("\n".join(line(i, img) for i, img in enumerate(images, start=1)) + "\n")
    return root


def _skip_report_lines(report) -> list[str]:
    return [str(e) for e in report.skipped]


# -- 1. image paths leaving the data folder ---------------------------------------------------------


@pytest.fixture()
def outside_secret(tmp_path: Path) -> Path:
    secret = tmp_path / "outside" / "secret.png"
    secret.parent.mkdir()
    Image.new("RGB", (8, 8), "red").save(secret)
    return secret


@pytest.mark.parametrize("source", ["pope", "custom"])
@pytest.mark.parametrize("form", ["relative", "absolute"])
def test_image_path_outside_the_data_folder_is_refused(tmp_path, outside_secret, source, form):
    # data/<source>/ is two levels below tmp_path, so ../../outside/secret.png is the secret
    hostile = "../../outside/secret.png" if form == "relative" else str(outside_secret)
    root = _release(tmp_path / "data" / source, source, ["a.png", hostile])
    name = POPE_FILE if source == "pope" else "cases.jsonl"

    with pytest.raises(DataError) as err:
        load_source(source, str(root))
    assert err.value.file == str(root / name) and err.value.line == 2 and err.value.field == "image"
    assert "outside the data folder" in err.value.reason and "--allow-outside-paths" in err.value.reason

    dsd, report = load_source(source, str(root), on_error="skip")
    rows = [r for split in dsd.values() for r in split.select_columns(["source_id", "provenance"])]
    assert [r["source_id"] for r in rows] == ["1"]
    assert len(report) == 1 and f"{name}:2: field 'image'" in _skip_report_lines(report)[0]

    # the user's explicit opt-in: the file is read, and its pixels are the secret's
    dsd, report = load_source(source, str(root), allow_outside_paths=True)
    split = next(iter(dsd.values()))
    assert len(report) == 0 and split["source_id"] == ["1", "2"]
    assert split[1]["image"].getpixel((0, 0)) == (255, 0, 0)


def test_cli_build_refuses_outside_paths_unless_allowed(tmp_path, outside_secret, capsys):
    root = _release(tmp_path / "data" / "custom", "custom", ["a.png", "../../outside/secret.png"])
    assert main(["build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "hub")]) == 2
    err = capsys.readouterr().err
    assert "cases.jsonl:2: field 'image'" in err and "Traceback" not in err
    assert not (tmp_path / "hub").exists()
    assert main(["build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "hub"), "--allow-outside-paths"]) == 0
    assert datasets.load_dataset(str(tmp_path / "hub"))["custom"]["source_id"] == ["1", "2"]


def test_is_inside_follows_every_symlink(tmp_path):
    (tmp_path / "coco").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "val2014").symlink_to(tmp_path / "coco")
    (tmp_path / "secret.txt").write_text("private")
    (tmp_path / "data" / "img.jpg").symlink_to(tmp_path / "secret.txt")
    roots = [tmp_path / "data"]
    # a folder or a file symlinked into the data folder leads outside it: refused
    assert not is_inside(tmp_path / "data" / "val2014" / "x.jpg", roots)
    assert not is_inside(tmp_path / "data" / "img.jpg", roots)
    # ... unless its real folder is a root itself (image_dir), given as the link or as the target
    assert is_inside(tmp_path / "data" / "val2014" / "x.jpg", [*roots, tmp_path / "data" / "val2014"])
    assert is_inside(tmp_path / "data" / "val2014" / "x.jpg", [*roots, tmp_path / "coco"])
    assert is_inside(tmp_path / "data" / "sub" / ".." / "x.jpg", roots)
    assert not is_inside(tmp_path / "data" / "val2014" / ".." / ".." / "x.jpg", roots)
    assert not is_inside(tmp_path / "datax" / "x.jpg", roots)  # a name prefix is not a parent


def test_a_symlinked_image_file_is_never_published(tmp_path):
    """An image file in --data-dir that links to a private file outside it is a bad row, not data."""
    root = tmp_path / "data"
    root.mkdir()
    Image.new("RGB", (8, 8), "red").save(tmp_path / "private.png")
    (root / "a.png").symlink_to(tmp_path / "private.png")
    Image.new("RGB", (8, 8), "blue").save(root / "b.png")
    (root / "questions.jsonl").write_text(
        '{"image": "a.png", "question": "Is it red?", "answer": "yes"}\n{"image": "b.png", "question": "Is it blue?", "answer": "yes"}\n',
        encoding="utf-8",
    )
    with pytest.raises(DataError, match="outside the data folder"):
        load_source("custom", str(root), cache_dir=str(tmp_path / "c1"))
    dsd, report = load_source("custom", str(root), cache_dir=str(tmp_path / "c2"), on_error="skip")
    assert dsd["custom"]["source_id"] == ["2"] and len(report) == 1
    # an image folder symlinked into the data folder is followed: outside it, it must be named as image_dir
    pope, elsewhere = tmp_path / "pope", tmp_path / "elsewhere"
    pope.mkdir()
    elsewhere.mkdir()
    Image.new("RGB", (8, 8), "red").save(elsewhere / "COCO_val2014_000000000001.jpg")
    (pope / "val2014").symlink_to(elsewhere)
    (pope / "coco_pope_random.json").write_text(
        '{"question_id": 1, "image": "COCO_val2014_000000000001.jpg", "text": "Is there a cat in the image?", "label": "no"}\n',
        encoding="utf-8",
    )
    with pytest.raises(DataError, match="image_dir="):
        load_source("pope", str(pope), cache_dir=str(tmp_path / "c3"))
    dsd, _ = load_source("pope", str(pope), cache_dir=str(tmp_path / "c4"), image_dir=str(pope / "val2014"))
    assert dsd["random"].num_rows == 1


# -- 2. image checks: a full decode and vhx's pixel limit -------------------------------------------


def _truncated_jpeg(path: Path) -> Path:
    buf = io.BytesIO()
    # noise does not compress: the cut falls inside the scan data, as with a broken download
    # fresh noise on every call (PIL's effect_noise repeats across processes): no perturbed file of an
    # earlier run can match it, so the stage really has to decode it
    noise = np.random.default_rng().integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(buf, "JPEG", quality=90)
    data = buf.getvalue()
    path.write_bytes(data[: int(len(data) * 0.9)])
    with Image.open(path) as im:
        im.verify()  # the shallow check the builders used to rely on lets it through
    return path


def test_truncated_jpeg_is_refused_at_build(tmp_path):
    root = _release(tmp_path / "pope", "pope", ["a.png", "cut.jpg"])
    _truncated_jpeg(root / "cut.jpg")
    with pytest.raises(DataError, match=r"coco_pope_random.json:2: field 'image': unreadable image \(OSError: image file is truncated"):
        load_source("pope", str(root))
    dsd, report = load_source("pope", str(root), on_error="skip")
    assert dsd["random"]["source_id"] == ["1"] and len(report) == 1


def _solid_png(path: Path, size: tuple[int, int]) -> Path:
    Image.new("1", size, 1).save(path)  # one bit per pixel, one colour: a few KB however large
    return path


def test_huge_image_is_refused_by_vhx_pixel_limit_and_the_option_raises_it(tmp_path):
    assert DEFAULT_MAX_IMAGE_PIXELS == 40_000_000
    root = _release(tmp_path / "pope", "pope", ["a.png", "huge.png"])
    huge = _solid_png(root / "huge.png", (12000, 12000))
    assert huge.stat().st_size < 100_000
    with pytest.raises(DataError, match=r":2: field 'image': image is 12000x12000 \(144.0 megapixels\), above the limit of 40 megapixels"):
        load_source("pope", str(root))
    dsd, report = load_source("pope", str(root), on_error="skip")
    assert dsd["random"]["source_id"] == ["1"] and len(report) == 1

    # the option moves the limit both ways (a smaller image keeps the test fast)
    mid = _solid_png(tmp_path / "mid.png", (3000, 2000))
    assert image_problem(mid) is None
    assert "above the limit of 5 megapixels" in image_problem(mid, max_pixels=5_000_000)
    assert image_problem(mid, max_pixels=0) is None


def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims width x height (what Pillow's bomb guard reads), with no pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b""))
    return path


def test_decompression_bomb_goes_through_the_error_policy(tmp_path):
    root = _release(tmp_path / "pope", "pope", ["a.png", "bomb.png"])
    _png_header_only(root / "bomb.png", 20000, 20000)
    # even with vhx's own limit off, Pillow's guard refuses it: a data error, not a traceback
    with pytest.raises(DataError, match=r":2: field 'image': unreadable image \(DecompressionBombError"):
        load_source("pope", str(root), max_image_pixels=0)
    dsd, report = load_source("pope", str(root), on_error="skip", max_image_pixels=0)
    assert dsd["random"]["source_id"] == ["1"] and len(report) == 1


def _built_with_a_truncated_image(tmp_path: Path) -> Path:
    """A Hub folder whose second image is a truncated JPEG (built with verify_images=False), as a tool
    other than vhx could write it: vhx's own writer refuses such a folder (test below)."""
    from vhx.hub import write as hub

    root = _release(tmp_path / "pope", "pope", ["a.png", "cut.jpg"])
    _truncated_jpeg(root / "cut.jpg")
    dsd, _ = load_source("pope", str(root), verify_images=False)
    with pytest.raises(DataError, match=r"image of case pope/random/2 \(split random\) does not decode whole"):
        hub.write_hub_folder(dsd, tmp_path / "refused", repo_id="vhx/cut")
    assert not (tmp_path / "refused").exists()
    check = hub._check_images
    hub._check_images = lambda *args, **kwargs: None  # the other tool does not check
    try:
        hub.write_hub_folder(dsd, tmp_path / "hub", repo_id="vhx/cut")
    finally:
        hub._check_images = check
    return tmp_path / "hub"


def test_decoding_failure_after_the_build_names_the_case(tmp_path):
    from vhx.hub import load_folder_by_reference
    from vhx.pipeline import expand
    from vhx.predict import predict_dataset

    hub = _built_with_a_truncated_image(tmp_path)
    with pytest.raises(DataError, match=r"image of case pope/random/2 \(image_id coco:cut\) cannot be decoded \(OSError: image file is truncated"):
        expand(load_folder_by_reference(hub), perturb=["brightness"], workers=1)

    class AnswerYes:
        name = "yes"

        def predict(self, images, questions):
            from vhx.models import Prediction

            return [Prediction(raw="Yes", pred="yes", p_yes=1.0) for _ in images]

    with pytest.raises(DataError, match=r"image of case pope/random/2 \(split 'random', row 1\).* cannot be decoded \(OSError: image file is truncated"):
        predict_dataset(str(hub), AnswerYes(), tmp_path / "run", progress=False)


# -- 3. the error policy also covers encodings and empty files --------------------------------------


def test_non_utf8_byte_in_a_pope_json_lines_file(tmp_path):
    root = _release(tmp_path / "pope", "pope", ["a.png", "a.png", "a.png"])
    lines = (root / POPE_FILE).read_bytes().splitlines()
    lines[1] = lines[1].replace(b"dog 2", b"d\xffg 2")
    (root / POPE_FILE).write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DataError, match=r"coco_pope_random.json:2: not UTF-8 text \(byte 0xff at column \d+\)"):
        load_source("pope", str(root))
    dsd, report = load_source("pope", str(root), on_error="skip")
    assert dsd["random"]["source_id"] == ["1", "3"]
    assert len(report) == 1 and report.skipped[0].line == 2


def test_non_utf8_byte_in_a_custom_json_array(tmp_path):
    root = tmp_path / "custom"
    root.mkdir()
    Image.new("RGB", (8, 8)).save(root / "a.png")
    records = [json.loads(_custom_line(i, "a.png")) for i in (1, 2, 3)]
    data = json.dumps(records, indent=1, ensure_ascii=False).encode().replace(b"dog 3", b"d\xe9g 3")  # latin-1 'é'
    (root / "cases.json").write_bytes(data)
    with pytest.raises(DataError, match=r"cases.json:3: record 3 of the JSON array is not UTF-8 text \(byte 0xe9\)"):
        load_source("custom", str(root))
    dsd, report = load_source("custom", str(root), on_error="skip")
    assert dsd["custom"]["source_id"] == ["1", "2"] and len(report) == 1


def test_empty_pope_question_file_is_no_usable_cases(tmp_path):
    root = tmp_path / "pope"
    root.mkdir()
    (root / POPE_FILE).write_text("")
    for policy in ("raise", "skip"):
        with pytest.raises(DataError, match=r"coco_pope_random.json: no usable cases in subset 'random'"):
            load_source("pope", str(root), on_error=policy)


def test_cli_reports_bad_bytes_without_traceback(tmp_path, capsys):
    root = _release(tmp_path / "pope", "pope", ["a.png"])
    (root / POPE_FILE).write_bytes(b'{"question_id": 1, "image": "a.png", "text": "Is there a \xff?", "label": "no"}\n')
    assert main(["build", "pope", "--data-dir", str(root), "--out", str(tmp_path / "hub"), "--on-error", "skip"]) == 2
    err = capsys.readouterr().err
    assert "no usable cases" in err and "Traceback" not in err


# -- 6. label spellings, documented ------------------------------------------------------------------


@pytest.mark.parametrize(
    "label,expected",
    [("yes", "yes"), ("Yes.", "yes"), ("Y", "yes"), ("TRUE", "yes"), ("1", "yes"), (1, "yes"), (True, "yes"),
     ("no", "no"), ("N", "no"), ("false", "no"), ("0", "no"), (0, "no"), (False, "no")],
)
def test_documented_label_spellings_are_accepted(tmp_path, label, expected):
    root = tmp_path / "pope"
    root.mkdir()
    Image.new("RGB", (8, 8)).save(root / "a.png")
    (root / POPE_FILE).write_text(_pope_line(1, "a.png", label) + "\n")
    assert load_source("pope", str(root))[0]["random"]["answer"] == [expected]


@pytest.mark.parametrize("label", ["2", "maybe", "", None, "yes!", "oui"])
def test_other_label_spellings_are_refused(tmp_path, label):
    root = tmp_path / "pope"
    root.mkdir()
    Image.new("RGB", (8, 8)).save(root / "a.png")
    (root / POPE_FILE).write_text(_pope_line(1, "a.png", label) + "\n")
    with pytest.raises(DataError, match=r"coco_pope_random.json:1: field 'label': bad label"):
        load_source("pope", str(root))


def test_label_spellings_are_documented():
    import vhx.builders.custom as custom
    import vhx.builders.pope as pope

    # the reference for input files (the README links it)
    doc = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text(encoding="utf-8")
    for text in (pope.__doc__, custom.__doc__, doc):
        assert "`1`" in text and "`0`" in text and "`true`" in text.lower()


# -- 6. temporary folders ---------------------------------------------------------------------------


def test_vhx_build_leaves_no_temporary_folder(tmp_path):
    import os
    import subprocess
    import sys

    root = _release(tmp_path / "custom", "custom", ["a.png"])
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run(
        [sys.executable, "-m", "vhx.cli", "build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "hub")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "hub" / "README.md").is_file()
    assert [p.name for p in temp.iterdir() if p.name.startswith("vhx-")] == []


def test_skip_summary_is_printed_once(tmp_path):
    import os
    import subprocess
    import sys

    root = _release(tmp_path / "custom", "custom", ["a.png", "gone.png", "gone2.png"])
    done = subprocess.run(
        [sys.executable, "-m", "vhx.cli", "build", "custom", "--data-dir", str(root), "--out", str(tmp_path / "hub"), "--on-error", "skip"],
        cwd=tmp_path, env=dict(os.environ), capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("skipped 2 row(s)") == 1
    summary = [line for line in done.stderr.splitlines() if "image not found" in line]
    assert len(summary) == 2 and all(line.count("image not found") == 1 for line in summary)


# -- 4. an LLM endpoint that never answers -----------------------------------------------------------


@pytest.fixture()
def silent_endpoint():
    """An OpenAI-compatible base URL whose server accepts connections and never answers."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


def _fast_llm_config(base_url: str, tmp_path: Path):
    from vhx.llm import LLMConfig

    return LLMConfig(model="gpt-4o", base_url=base_url, cache_dir=tmp_path / "llm-cache", timeout=0.3,
                     max_retries=0, backoff_base=0.01, backoff_max=0.01, concurrency=8)


def _synthetic_hub(tmp_path: Path) -> Path:
    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    dsd = generate_synthetic(SyntheticConfig(num_images=2, seed=1, image_size=64))
    write_hub_folder(dsd, tmp_path / "hub", repo_id="vhx/synthetic")
    return tmp_path / "hub"


def test_llm_total_failure_fails_the_expansion(tmp_path, silent_endpoint, monkeypatch):
    from vhx.hub import load_folder
    from vhx.llm import LLMNegator
    from vhx.negation import NegationFallbackError
    from vhx.pipeline import expand

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unused")
    cases = load_folder(_synthetic_hub(tmp_path))
    n = sum(len(s) for s in cases.values())
    from vhx.llm import LLMError

    # by default an endpoint that never answers stops the run after 5 connection failures in a row
    with pytest.raises(LLMError, match="5 connection failures in a row"):
        expand(cases, negator=LLMNegator(_fast_llm_config(silent_endpoint, tmp_path)))
    # with that stop lifted, every question falls back, and the share of fallbacks fails the expansion
    import dataclasses

    negator = LLMNegator(dataclasses.replace(_fast_llm_config(silent_endpoint, tmp_path), max_connection_failures=10**6))
    with pytest.raises(NegationFallbackError, match=rf"{n} of {n} negations \(100%\) fell back instead of coming from llm:gpt-4o"):
        expand(cases, negator=negator)
    # the user may accept it knowingly; the rows then say who negated what
    out = expand(cases, negator=negator, max_fallback=1.0)
    twins = [json.loads(p)["negator"] for p, neg in zip(out["original"]["provenance"], out["original"]["negated"]) if neg]
    assert twins == ["rules(fallback)"] * n


def test_cli_expand_llm_total_failure_exits_non_zero_and_card_counts_negators(tmp_path, silent_endpoint, monkeypatch, capsys):
    import dataclasses

    import vhx.cli.common as cli  # where the expand's negator takes its LLM settings

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unused")
    real = cli.llm_config
    # no retries and short timeouts keep the test fast; the endpoint is what fails
    hub = _synthetic_hub(tmp_path)
    llm = ["--negator", "llm", "--base-url", silent_endpoint, "--cache-dir", str(tmp_path / "c"), "--perturb", "none", "--review", "0", "--gallery", "0"]
    monkeypatch.setattr(cli, "llm_config", lambda args: dataclasses.replace(real(args), max_retries=0, timeout=0.3, backoff_base=0.01))
    assert main(["expand", str(hub), "--out", str(tmp_path / "exp"), *llm]) == 2
    assert "connection failures in a row" in capsys.readouterr().err  # the default: stop early, one line
    monkeypatch.setattr(cli, "llm_config", lambda args: dataclasses.replace(real(args), max_retries=0, timeout=0.3, backoff_base=0.01,
                                                                             max_connection_failures=10**6))
    assert main(["expand", str(hub), "--out", str(tmp_path / "exp"), *llm]) == 2
    err = capsys.readouterr().err
    assert "fell back instead of coming from llm:gpt-4o" in err and "--max-llm-fallback" in err
    assert not (tmp_path / "exp" / "README.md").exists()

    assert main(["expand", str(hub), "--out", str(tmp_path / "exp"), "--max-llm-fallback", "1", *llm]) == 0
    card = (tmp_path / "exp" / "README.md").read_text(encoding="utf-8")
    n = sum(len(s) for s in __import__("vhx.hub", fromlist=["load_folder"]).load_folder(hub).values())
    assert f"negation (rules(fallback) {n})" in card and "negation (llm:gpt-4o" not in card


# -- 6. vhx push without network, or refused -----------------------------------------------------------


@pytest.fixture()
def refusing_hub():
    """A local 'Hub' that answers every request with HTTP 403 and echoes the Authorization header."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _refuse(self):
            body = json.dumps({"error": f"forbidden for {self.headers.get('Authorization')}"}).encode()
            self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_HEAD = _refuse

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.mark.parametrize("where", ["unreachable", "refusing"])
def test_push_failure_is_one_line_without_the_token(tmp_path, monkeypatch, capsys, refusing_hub, where):
    import functools
    import socket

    import huggingface_hub

    from vhx.hub import write_hub_folder
    from vhx.mini.synthetic import SyntheticConfig, generate_synthetic

    secret = "hf_SECRETsecretSECRET98765"
    monkeypatch.setenv("HF_TOKEN", secret)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    if where == "unreachable":
        with socket.socket() as s:  # a port nobody listens on
            s.bind(("127.0.0.1", 0))
            endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
    else:
        endpoint = refusing_hub
    monkeypatch.setattr("vhx.hub.push.HfApi", functools.partial(huggingface_hub.HfApi, endpoint=endpoint))
    folder = write_hub_folder(generate_synthetic(SyntheticConfig(num_images=1, seed=0)), tmp_path / "hub")
    assert main(["push", str(folder), "me/demo"]) == 2
    out = capsys.readouterr()
    err = out.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("vhx push: error: push to me/demo failed: ")
    assert ("the Hub answered HTTP 403" in err) if where == "refusing" else ("cannot reach the Hub" in err)
    assert secret not in out.out + out.err and "Traceback" not in err


def test_checks_hold_when_another_library_allows_truncated_images(tmp_path, monkeypatch):
    """lmms-eval sets PIL's LOAD_TRUNCATED_IMAGES at import; vhx's build check and later decodes stay strict."""
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    test_truncated_jpeg_is_refused_at_build(tmp_path / "build")
    test_decoding_failure_after_the_build_names_the_case(tmp_path / "later")
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # the process's own setting is left as it was
