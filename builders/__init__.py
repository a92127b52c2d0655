"""Dataset builders (``datasets.GeneratorBasedBuilder``) for the public VH benchmark releases.

Installed as ``vhx.builders``. Use a builder class directly, the datasets way::

    from vhx.builders.pope import PopeBuilder
    builder = PopeBuilder(data_dir="path/to/pope", on_error="skip")
    builder.download_and_prepare()
    dsd = builder.as_dataset()

or the one-call helper :func:`load_source`, which also reports skipped rows. The folder by job: one module per
benchmark, :mod:`~vhx.builders.registry` (source names -> builders), :mod:`~vhx.builders.options` (``--option``
keys), :mod:`~vhx.builders.load` (:func:`load_source`), ``_base`` (the error policy every builder shares) and
``_hub_copy`` (the benchmarks' Hub copies).
"""

from .load import load_source
from .options import BuilderOptionError, builder_options, check_options
from .registry import BUILDERS, BuilderLoadError, get_builder_class, register_builder

__all__ = ["BUILDERS", "BuilderLoadError", "BuilderOptionError", "builder_options", "check_options", "get_builder_class",
           "load_source", "register_builder"]
