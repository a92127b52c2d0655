"""vhx: generate, expand and score visual hallucination (VH) test cases for multimodal LLMs."""

from typing import Any

from vhx.errors import DataError, SkipReport, VHXError

__version__ = "0.1.0"

__all__ = ["FEATURES", "DataError", "SkipReport", "VHXError", "make_case", "validate_case", "validate_dataset", "__version__"]

#: Names read from vhx.schema on first use: the schema imports `datasets` (about a second), which `import vhx`
#: (every command's start) should not wait for.
_FROM_SCHEMA = ("FEATURES", "make_case", "validate_case", "validate_dataset")


def __getattr__(name: str) -> Any:
    if name in _FROM_SCHEMA:
        from vhx import schema

        return getattr(schema, name)
    raise AttributeError(f"module 'vhx' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM_SCHEMA})
