"""The ``vhx`` command line: one module per command, each with its ``add_parser(sub)`` and its run function.

:mod:`vhx.cli.entry` assembles the parser and holds :func:`main` (the console script ``vhx``, ``python -m vhx.cli``);
the commands: :mod:`~vhx.cli.run`, :mod:`~vhx.cli.build`, :mod:`~vhx.cli.expand`, :mod:`~vhx.cli.evaluate`,
:mod:`~vhx.cli.report`, :mod:`~vhx.cli.relabel`, :mod:`~vhx.cli.attack_plot`, :mod:`~vhx.cli.gallery`,
:mod:`~vhx.cli.export_lmms_eval`, :mod:`~vhx.cli.info`, :mod:`~vhx.cli.push`, :mod:`~vhx.cli.replicate`. What several
share: :mod:`~vhx.cli.common` (option groups, expanding and scoring), :mod:`~vhx.cli.attack_options` (the attack's
flags), :mod:`~vhx.cli.argtypes` (checked argument types) and :mod:`~vhx.cli.errors` (exit statuses, one-line
errors). argparse lives only here.
"""

from vhx.cli.entry import build_parser, main
from vhx.cli.errors import EXIT_SIGINT, EXIT_SIGTERM

__all__ = ["EXIT_SIGINT", "EXIT_SIGTERM", "build_parser", "main"]
