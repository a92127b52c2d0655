"""The ``vhx`` command's entry point: the parser assembled from one module per command, and :func:`main`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

# Ctrl-C while the libraries load (a second or two at every start) ends as an interrupt does, without a traceback
try:
    from vhx.cli.run import add_parser as add_run
    from vhx.cli.build import add_parser as add_build
    from vhx.cli.expand import add_parser as add_expand
    from vhx.cli.evaluate import add_parser as add_evaluate
    from vhx.cli.report import add_parser as add_report
    from vhx.cli.relabel import add_parser as add_relabel
    from vhx.cli.attack_plot import add_parser as add_attack_plot
    from vhx.cli.gallery import add_parser as add_gallery
    from vhx.cli.export_lmms_eval import add_parser as add_export_lmms_eval
    from vhx.cli.info import add_parser as add_info
    from vhx.cli.push import add_parser as add_push
    from vhx.cli.replicate import add_parser as add_replicate
    from vhx.cli.errors import EXIT_SIGINT, UNWRITABLE, Terminated, cannot_write, check_writable, disk_full, in_words, on_sigterm
    from vhx.errors import VHXError
except KeyboardInterrupt:
    sys.stderr.write("vhx: interrupted\n")
    raise SystemExit(130) from None

#: The commands' parsers in the order ``vhx --help`` lists them (each module of vhx.cli holds one command).
COMMANDS = (add_run, add_build, add_expand, add_evaluate, add_report, add_relabel, add_attack_plot, add_gallery,
            add_export_lmms_eval, add_info, add_push, add_replicate)

EPILOG = """\
examples:
  vhx run --out vhx-out                                  # whole job on the embedded synthetic benchmark
  vhx build pope --data-dir POPE/ --out pope-hub         # POPE question files + COCO images -> Hub folder
  vhx build mmvp --data-dir MMVP/ --out mmvp-hub --on-error skip
  vhx build custom --data-dir mine/ --out mine-hub --option question_column=prompt
  vhx build synthetic --out synth-hub --yes-ratio 0.5
  vhx build synthetic-instruct --out instruct/ --num-images 200   # offline stand-in for llava_v1_5_mix665k.json
  vhx info pope-hub                                      # splits, rows, pairs, images, yes-ratio
  HF_TOKEN=... vhx push pope-hub your-name/pope-vhx      # publish (token from the environment)
"""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, but a bad value of a flag (``--batch-size 0``) is one line, not the usage first:
    the line names the flag and the value, and the command's usage adds pages of options to read past.
    Unknown or missing options still print the usage, which shows what the command takes."""

    def error(self, message: str) -> Any:
        if message.startswith("argument "):
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``vhx`` command."""
    parser = _Parser(
        prog="vhx",
        description=(
            "vhx: read visual-hallucination benchmarks into Hugging Face datasets, expand them "
            "(negation, image perturbations, adversarial attacks), and score multimodal LLMs "
            "with accuracy and symmetric accuracy."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add_parser in COMMANDS:
        add_parser(sub)
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line; an unknown option is reported by its command's own parser (its usage,
    not the top level's), with the closest option it has."""
    import difflib

    args, extra = parser.parse_known_args(argv)
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if not extra:
        from vhx.cli.attack_options import step_with_adaptive_schedule
        from vhx.cli.run import run_attack

        attacking = run_attack(args) != "none" if args.command == "run" else None  # vhx run attacks by default
        if args.command in ("expand", "run") and (problem := step_with_adaptive_schedule(args, attacking)):
            command = action.choices[args.command]
            command.exit(2, f"{command.prog}: error: {problem}\n")  # a bad flag: one line, as _Parser says them
        return args
    command = action.choices[args.command]
    options = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    words = []
    for item in extra:
        flag = item.split("=", 1)[0]
        close = difflib.get_close_matches(flag.lower(), options, n=1, cutoff=0.7) if flag.startswith("-") else []
        words.append(f"{item} (did you mean {close[0]}?)" if close else item)
    command.error(f"unrecognized arguments: {' '.join(words)}")
    raise AssertionError("unreachable")  # argparse's error exits


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vhx`` console script.

    Exit status: 0 done, 2 a clear error (one line on stderr: bad input or flag, disk full, an output
    that cannot be written, busy folder),
    130 after Ctrl-C and 143 after SIGTERM (temporary files removed, resumable state kept).
    """
    import errno
    import signal
    import threading

    from vhx.plugins import load_plugins
    from vhx.runtime import pin_cpu_kernels

    try:
        pin_cpu_kernels()  # before any torch operation: the same numbers on every x86 machine (vhx.runtime.PINNED_KERNELS)
        load_plugins()  # installed plug-ins join the registries before --help and the choices are built
        parser = build_parser()
        args = _parse(parser, argv)
    except VHXError as exc:
        print(f"vhx: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C while the libraries load (a second or two): an interrupt, not a traceback
        print("vhx: interrupted", file=sys.stderr)
        return EXIT_SIGINT
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (schedulers) and SIGHUP (a closed terminal) unwind like Ctrl-C: workers are stopped
        # and temporary files removed on the way out
        for name in ("SIGTERM", "SIGHUP"):
            if hasattr(signal, name):
                previous[getattr(signal, name)] = signal.signal(getattr(signal, name), on_sigterm)
    try:
        from tqdm.contrib.logging import logging_redirect_tqdm

        # warnings and log lines print above the progress bars, not through them
        logging.captureWarnings(True)
        with logging_redirect_tqdm():
            if getattr(args, "out", None):
                check_writable(args.out)
            return args.func(args)
    except (VHXError, FileExistsError, FileNotFoundError, NotADirectoryError) as exc:
        print(f"vhx {args.command}: error: {in_words(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            line = disk_full(exc, getattr(args, "out", None))
        elif exc.errno in {getattr(errno, name) for name in UNWRITABLE if hasattr(errno, name)}:
            line = cannot_write(exc, getattr(args, "out", None))
        else:
            raise
        print(f"vhx {args.command}: error: {line}", file=sys.stderr)
        return 2
    except Terminated as exc:
        signum = int(exc.args[0]) if exc.args else signal.SIGTERM
        print(f"vhx {args.command}: terminated ({signal.Signals(signum).name}); rerun the same command to resume", file=sys.stderr)
        return 128 + signum  # 143 for SIGTERM, 129 for SIGHUP
    except KeyboardInterrupt:
        print(f"vhx {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return EXIT_SIGINT
    finally:
        logging.captureWarnings(False)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
