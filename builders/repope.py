"""RePOPE (Neuhaus & Hein, 2025): COCO POPE with its annotation errors corrected.

RePOPE relabelled POPE's COCO questions: 9.3% of the "yes" labels and 1.7% of the "no" labels were
wrong, and ambiguous questions were removed (2,774 / 2,727 / 2,684 questions remain of 3,000 per
subset). Its files keep POPE's format and POPE's question ids. Layout read here (``data_dir``: a
clone of https://github.com/YanNeu/RePOPE, its ``annotations/`` folder, or a folder of the files)::

    annotations/coco_repope_{random,popular,adversarial}.json   # JSON lines, as POPE's
    annotations/coco_pope_{random,popular,adversarial}.json     # POPE's originals (optional)

Each record is ``{"question_id", "image", "text", "label"}``, read exactly as POPE's (see
:mod:`vhx.builders.pope`: accepted label spellings, JSON lines or a JSON array, the error policy).
Images come from COCO val2014: pass ``image_dir=`` as for POPE.

Rows: ``source`` ``repope``, one split per subset, ``source_id`` POPE's question id, and ``image_id``
``coco:{image file stem}``, the same as POPE's, so a POPE run and a RePOPE build name the same
questions and images. Where POPE's own file lies beside RePOPE's (the clone ships both), each row's
provenance records POPE's label (``pope_label``) and whether RePOPE changed it (``relabelled``).

To see how the corrected labels move a model without asking it again, re-score a finished POPE run
(expanded splits included) on these labels: ``vhx relabel RUN --labels REPOPE_DIR --out RUN-repope``
(:func:`vhx.scoring.relabel.relabel_predictions`), then ``vhx report RUN RUN-repope``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vhx.errors import DataError
from vhx.schema import normalize_answer

from .pope import PopeBuilder, find_question_file, read_pope_records


class RePopeBuilder(PopeBuilder):
    """Builder for RePOPE's annotation files (see the module docstring for the layout)."""

    SOURCE = "repope"
    DESCRIPTION = "RePOPE: COCO POPE with corrected labels and ambiguous questions removed, as vhx yes/no VH test cases."
    HOMEPAGE = "https://github.com/YanNeu/RePOPE"
    LICENSE = "mit"
    FILE_STEM = "repope"
    NAME = "RePOPE"
    READS_HUB_COPY = False

    def extra_provenance(self, path: Path, subset: str, record: dict[str, Any]) -> dict[str, Any]:
        """POPE's label of the question and whether RePOPE changed it, where POPE's file lies beside."""
        labels = self._pope_labels(path.parent, subset)
        original = labels.get(str(record["question_id"]))
        if original is None:
            return {}
        label = normalize_answer(record["label"])
        return {"pope_label": original, "relabelled": original != label}

    def _pope_labels(self, folder: Path, subset: str) -> dict[str, str]:
        cache: dict[tuple[Path, str], dict[str, str]] = self.__dict__.setdefault("_pope_label_cache", {})
        key = (folder, subset)
        if key not in cache:
            cache[key] = {}
            pope = find_question_file(folder, self.config.dataset, subset, "pope") if folder.is_dir() else None
            if pope is not None and pope.parent == folder:
                for _, record in read_pope_records(pope):
                    if isinstance(record, dict) and "question_id" in record and "label" in record:
                        try:
                            label = normalize_answer(record["label"])
                        except DataError:
                            continue  # POPE's own file is context here, not input: a bad label just goes unrecorded
                        qid = str(record["question_id"])
                        if cache[key].get(qid, label) != label:
                            raise DataError(f"question_id {qid} is listed twice in POPE's {pope.name} with different labels "
                                            f"({cache[key][qid]!r} and {label!r}): which one RePOPE corrected cannot be told",
                                            file=str(pope), field="label")
                        cache[key][qid] = label
        return cache[key]
