"""Symmetric accuracy of yes/no answers to visual-hallucination test cases and their negated twins.

A thin ``evaluate`` wrapper: all the math lives in the metric registry of :mod:`vhx.scoring.metrics`,
the one ``vhx.scoring.score`` reads too, so the numbers match exactly. The values returned (and the
"Returns" part of the docstring) are those of the metrics registered with ``evaluate=True``.
"""

import datasets
import evaluate

from vhx.scoring import evaluate_returns_doc, metric_values

_CITATION = """\
@misc{liu2024vhexpansion,
  title        = {Automatically Generating Visual Hallucination Test Cases for Multimodal Large Language Models},
  author       = {Liu, Zhongye and Liu, Hongbin and Hu, Yuepeng and Shao, Zedian and Gong, Neil Zhenqiang},
  year         = {2024},
  howpublished = {\\url{https://github.com/lycheeefish/VHExpansion}}
}
"""

_DESCRIPTION = """\
Symmetric accuracy is the share of test-case *pairs* that a model answers correctly on both sides:
a yes/no question about an image and its negated question about the same image (whose answer is the
opposite). Under random guessing with P(yes) = p its expectation is p(1 - p) whatever the share q of
"yes" answers in the benchmark, whereas plain accuracy, q p + (1 - q)(1 - p), rewards a yes-biased
guesser on a yes-heavy benchmark. The module also returns accuracy (all cases and source questions
only), the yes-ratio of the parsed predictions and the rate of unparsed ("unknown") predictions.
"""

_KWARGS_DESCRIPTION = (
    """
Args:
    predictions (`list` of `str`): the model's answers, "yes", "no" or "unknown" (a reply that could
        not be read as yes or no; it is never correct).
    references (`list` of `str`): ground-truth answers, "yes" or "no".
    pair_ids (`list` of `str`): shared by a case and its negated twin.
    negated (`list` of `bool`): True for the negated question of a pair.
    allow_unpaired (`bool`, defaults to `False`): leave pairs lacking a twin out of symmetric accuracy
        (they still count for accuracy) instead of raising an error.
Returns:
"""
    + evaluate_returns_doc("    ")
    + """Examples:
    >>> from vhx.scoring import symmetric_accuracy_module_path
    >>> metric = evaluate.load(symmetric_accuracy_module_path())
    >>> metric.compute(
    ...     predictions=["yes", "no", "yes", "yes"],
    ...     references=["yes", "no", "yes", "no"],
    ...     pair_ids=["a", "a", "b", "b"],
    ...     negated=[False, True, False, True],
    ... )["symmetric_accuracy"]
    0.5
"""
)


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SymmetricAccuracy(evaluate.Metric):
    """Symmetric accuracy over (case, negated twin) pairs, plus accuracy, yes-ratio and unknown rate."""

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "predictions": datasets.Value("string"),
                    "references": datasets.Value("string"),
                    "pair_ids": datasets.Value("string"),
                    "negated": datasets.Value("bool"),
                }
            ),
            reference_urls=["https://github.com/lycheeefish/VHExpansion"],
        )

    def _compute(self, predictions, references, pair_ids, negated, allow_unpaired: bool = False) -> dict:
        return metric_values(predictions, references, pair_ids, negated, allow_unpaired=allow_unpaired)
