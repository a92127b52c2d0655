"""vhx: generate, expand and score visual hallucination (VH) test cases for multimodal LLMs."""

from vhx.errors import DataError, SkipReport, VHXError
from vhx.schema import FEATURES, make_case, validate_case, validate_dataset

__version__ = "0.1.0"

__all__ = ["FEATURES", "DataError", "SkipReport", "VHXError", "make_case", "validate_case", "validate_dataset", "__version__"]
