"""LLaVA-1.5 visual instruction data (e.g. ``llava_v1_5_mix665k.json``), mixed into VH fine-tuning.

These are chat records, not VH test cases, so the builder yields :data:`INSTRUCT_FEATURES` rather than
:data:`vhx.schema.FEATURES`. Layout read here (``data_dir``)::

    llava_v1_5_mix665k.json   # JSON list of {"id", "image" (optional), "conversations": [...]}
    coco/train2017/...        # images, relative to image_dir (default: data_dir)
    gqa/images/...

Each record's ``conversations`` alternate ``human`` / ``gpt`` turns, starting with ``human``; the
first human turn of a record with an image carries the ``<image>`` token. One split, ``train``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from vhx.errors import DataError, logger

from ._base import VHBuilder, VHBuilderConfig, image_value, read_text

IMAGE_TOKEN = "<image>"
ROLES: tuple[str, str] = ("human", "gpt")

INSTRUCT_FEATURES = datasets.Features(
    {
        "id": datasets.Value("string"),
        "image": datasets.Image(),
        "has_image": datasets.Value("bool"),
        "conversations": datasets.List({"from": datasets.Value("string"), "value": datasets.Value("string")}),
        "source_file": datasets.Value("string"),
    }
)

_LLAVA_CITATION = """@inproceedings{liu2024improved,
  title={Improved Baselines with Visual Instruction Tuning},
  author={Liu, Haotian and Li, Chunyuan and Li, Yuheng and Lee, Yong Jae},
  booktitle={CVPR},
  year={2024}
}"""


@dataclass
class LlavaInstructConfig(VHBuilderConfig):
    """LLaVA instruction-data options.

    Attributes:
        json_file: the JSON list (absolute, or relative to ``data_dir``); default: the single
            ``*.json`` in ``data_dir``.
        image_dir: folder the records' ``image`` paths are relative to; default ``data_dir``.
        max_examples: stop after this many examples (at least 1, counted after filtering); ``None`` keeps all.
        require_images: drop text-only records (not an error, so not in the skip report).
    """

    json_file: str | None = None
    image_dir: str | None = None
    max_examples: int | None = None
    require_images: bool = False


def check_conversations(conversations: Any, **where: Any) -> list[dict[str, str]]:
    """Return the turns as ``[{"from", "value"}]``, or raise :class:`DataError` naming the bad turn.

    A conversation is a non-empty list of turns alternating ``human`` / ``gpt``, starting with
    ``human`` and ending with ``gpt`` (a prompt with no reply teaches nothing).
    """
    if not isinstance(conversations, list) or not conversations:
        raise DataError("must be a non-empty list of turns", **where, field="conversations")
    turns = []
    for i, turn in enumerate(conversations):
        field = f"conversations[{i}]"
        if not isinstance(turn, dict):
            raise DataError("turn is not a JSON object", **where, field=field)
        expected = ROLES[i % 2]
        if turn.get("from") != expected:
            raise DataError(f"expected a {expected!r} turn, got {turn.get('from')!r}", **where, field=f"{field}.from")
        if not isinstance(turn.get("value"), str):
            raise DataError(f"must be a string, got {turn.get('value')!r}", **where, field=f"{field}.value")
        turns.append({"from": turn["from"], "value": turn["value"]})
    if turns[-1]["from"] != "gpt":
        raise DataError("last turn must be a 'gpt' reply", **where, field=f"conversations[{len(turns) - 1}].from")
    return turns


class LlavaInstructBuilder(VHBuilder):
    """Builder for LLaVA-1.5 instruction JSON (see the module docstring for the layout)."""

    BUILDER_CONFIG_CLASS = LlavaInstructConfig
    SOURCE = "llava_instruct"
    DESCRIPTION = "LLaVA-1.5 visual instruction-tuning conversations (e.g. llava_v1_5_mix665k.json)."
    HOMEPAGE = "https://github.com/haotian-liu/LLaVA"
    LICENSE = "cc-by-4.0"
    FEATURES = INSTRUCT_FEATURES

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=self.DESCRIPTION,
            features=INSTRUCT_FEATURES,
            homepage=self.HOMEPAGE,
            license=self.LICENSE,
            citation=_LLAVA_CITATION,
        )

    def _split_generators(self, dl_manager: Any) -> list[datasets.SplitGenerator]:
        path = self.input_file(self.config.json_file, "json_file", (".json",))
        image_dir = self.image_dir(self.data_path() if self.config.data_dir else path.parent)
        limit = self.config.max_examples
        # At least one: datasets cannot store an empty split.
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise DataError(f"max_examples must be a positive int or None, got {limit!r}")
        return [datasets.SplitGenerator(name=datasets.Split.TRAIN, gen_kwargs={"path": path, "image_dir": image_dir})]

    def _generate_examples(self, path: Path, image_dir: Path) -> Iterator[tuple[int, dict[str, Any]]]:
        try:
            records = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise DataError(f"malformed JSON ({exc.msg})", file=str(path), line=exc.lineno) from None
        if not isinstance(records, list):
            raise DataError(f"expected a JSON list of records, got {type(records).__name__}", file=str(path))
        limit = self.config.max_examples
        yielded = text_only_dropped = 0
        token_mismatch: list[int] = []
        for index, record in enumerate(records):
            if limit is not None and yielded >= limit:
                break
            where = {"file": str(path), "row": index}
            try:
                example = self._example(record, image_dir, path.name, where)
            except DataError as exc:
                self.fail(exc)
                continue
            if example is None:
                text_only_dropped += 1
                continue
            has_token = any(IMAGE_TOKEN in t["value"] for t in example["conversations"] if t["from"] == "human")
            if has_token != example["has_image"]:
                token_mismatch.append(index)
            yielded += 1
            yield index, example
        if token_mismatch:
            # One summary instead of a line per record: a mismatch is a template issue, usually repeated.
            logger.warning(
                "%s: %d record(s) where the %s token and the image field disagree (a token without an image, "
                "or an image without a token), e.g. row(s) %s",
                path,
                len(token_mismatch),
                IMAGE_TOKEN,
                token_mismatch[:5],
            )
        if text_only_dropped:
            logger.info("%s: dropped %d text-only record(s) (require_images=True)", path, text_only_dropped)
        if not yielded:
            # datasets cannot store an empty split; say why here rather than fail later on "no data".
            raise DataError(
                f"no usable records ({len(self.skip_report)} skipped as bad, {text_only_dropped} text-only dropped)",
                file=str(path),
            )

    def _example(self, record: Any, image_dir: Path, source_file: str, where: dict[str, Any]) -> dict[str, Any] | None:
        """One validated example, or None for a text-only record when images are required."""
        if not isinstance(record, dict):
            raise DataError("record is not a JSON object", **where)
        if record.get("id") is None:
            raise DataError("missing", **where, field="id")
        conversations = check_conversations(record.get("conversations"), **where)
        image = record.get("image")
        if image is not None and (not isinstance(image, str) or not image.strip()):
            raise DataError(f"must be a relative image path, got {image!r}", **where, field="image")
        if image is None:
            if self.config.require_images:
                return None
            value = None
        else:
            image_path = image_dir / image
            problem = self.image_problem(image_path)
            if problem is not None:
                raise DataError(f"{problem.reason}: {image_path}", **where, field="image")
            value = image_value(image_path)
        return {
            "id": str(record["id"]),
            "image": value,
            "has_image": value is not None,
            "conversations": conversations,
            "source_file": source_file,
        }
