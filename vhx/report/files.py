"""The report folder's own files: the names a report writes, the list of them it leaves for the next report, the
check of ``--out`` before anything is written, and the staging folders of reports that were killed.

A report is written whole into a staging folder beside ``--out`` and swapped into its place
(:func:`vhx.locking.staging_dir`, :func:`vhx.locking.swap_in_folder`). What the user keeps in the folder is carried
into the new one; what an earlier report wrote and this one does not (a ``compare.csv`` of two models, say) is not.
The earlier report's own list (:data:`REPORT_MANIFEST`) says which files those are, but the list is a file in a
folder anyone can write to: a name in it is dropped only when it is one of :data:`REPORT_FILES` and a plain file,
never a folder or a file of another name.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from vhx.locking import atomic_write_text

logger = logging.getLogger("vhx")

#: Every file a report writes into its folder, by its kind in :func:`vhx.report.report`'s result: the one list
#: the report names its files from, and the only names an earlier report's :data:`REPORT_MANIFEST` may drop.
REPORT_FILES: dict[str, str] = {
    "markdown": "report.md",
    "html": "report.html",
    "csv": "scores.csv",
    "json": "scores.json",
    "compare_csv": "compare.csv",
    "pope_csv": "pope.csv",
    "repope_csv": "repope.csv",
    "hallusionbench_csv": "hallusionbench.csv",
    "mmvp_csv": "mmvp.csv",
    "amber_csv": "amber.csv",
    "dash_b_csv": "dash_b.csv",
    "readings_csv": "readings.csv",
    "unknown_csv": "unknown.csv",
    "judge_csv": "judge.csv",
    "blind_csv": "blind.csv",
    "mme_csv": "mme.csv",
    "bars_png": "accuracy_vs_symmetric.png",
    "scatter_png": "accuracy_scatter.png",
    "yes_vh_png": "yes_ratio_and_new_vh.png",
}

#: The pages of the scored folders (``vhx expand``'s gallery and negation review, by their path there) a report
#: copies into its folder, so that its links hold when the folder is moved or sent: those of the first folder that
#: has them under these names, the next folders' numbered (``gallery-2.html``).
REPORT_PAGES: dict[str, str] = {"gallery.html": "gallery.html", "review/negation_review.html": "negation_review.html"}
_PAGE = re.compile(r"(?:gallery|negation_review)(?:-[1-9]\d*)?\.html")


def page_name(name: str, index: int) -> str:
    """The name in the report folder of the page ``name`` (a value of :data:`REPORT_PAGES`) of the ``index``-th
    scored folder (0 first) that has one."""
    return name if index == 0 else name.replace(".html", f"-{index + 1}.html")


#: The files the last report wrote into its folder (their names, a JSON list), so the next one into the
#: same folder removes those it does not write again.
REPORT_MANIFEST = ".vhx-report-files.json"

# what staging_dir and swap_in_folder name their folders beside the target: .NAME.PID.TOKEN.staging / .old
_LEFTOVER = re.compile(r"(\d+)\.[0-9a-f]{12}\.(?:staging|old)")


def refuse_file_out(out: Path) -> None:
    """Refuse an ``out`` that exists and is not a folder (or lies below a file) before anything is written or moved.

    Raised as the :class:`OSError` a ``mkdir`` there raises, so the command line says it in the words every other
    command uses for a file given as ``--out`` (:func:`vhx.cli.errors.in_words`), in one line, exit status 2.
    A link is left to :func:`vhx.locking.refuse_links`, which names it."""
    if os.path.islink(out):
        return
    probe = out
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if os.path.isdir(probe):
        return
    if probe == out:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(out))
    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(out))


def remove_stale_stages(out: Path) -> list[Path]:
    """Remove the staging folders (and folders set aside) of earlier reports into ``out`` whose process is gone.

    A report killed while it writes leaves ``.NAME.PID.TOKEN.staging`` beside ``out``; a live process's folder
    (another report finishing, on a system where the lock cannot see it) is left alone, as
    :func:`vhx.hub.write_hub_folder` does with its own. Returns the folders removed."""
    from vhx.locking import pid_alive

    prefix = f".{out.name}."
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return []
    removed = []
    for entry in entries:
        match = _LEFTOVER.fullmatch(entry.name[len(prefix):]) if entry.name.startswith(prefix) else None
        if match is None or not entry.is_dir(follow_symlinks=False) or pid_alive(int(match.group(1))):
            continue
        logger.warning("removing %s, left by a report that was interrupted", entry.path)
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed


def report_files(out: Path) -> set[str]:
    """The names the last report into ``out`` wrote, as far as they are names a report writes (:data:`REPORT_FILES`,
    the pages of :data:`REPORT_PAGES`; none when it recorded none)."""
    try:
        names = json.loads((out / REPORT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    # the list is only a hint: a name the report never writes (a user's file, a path elsewhere) is not its to remove
    if not isinstance(names, list):
        return set()
    return {n for n in names if isinstance(n, str) and (n in REPORT_FILES.values() or is_page(n))}


def is_page(name: str) -> bool:
    """Whether ``name`` is one a report gives a page it copies (:func:`page_name`)."""
    return bool(_PAGE.fullmatch(name))


def carry_user_files(out: Path, stage: Path, written: Iterable[str]) -> None:
    """Carry what the user keeps in the report folder ``out`` into ``stage``, its next contents, and record there
    the names this report ``written``.

    Left behind: the files this report writes again, its list, and the plain files of :data:`REPORT_FILES` the
    last report listed (a section this one lacks must not pass for this report's). A folder or a link is carried
    whatever name it has and whatever the list says."""
    written = set(written)
    earlier = report_files(out)
    if out.is_dir():
        for item in out.iterdir():
            if item.name in written or item.name == REPORT_MANIFEST:
                continue
            if item.name in earlier and stat.S_ISREG(item.lstat().st_mode):
                continue
            _keep(item, stage / item.name)
    atomic_write_text(stage / REPORT_MANIFEST, json.dumps(sorted(written)) + "\n")


def _keep(item: Path, into: Path) -> None:
    """A file of the user's in a report folder, carried into the new report's folder (hard-linked where it can be)."""
    if item.is_symlink():
        into.symlink_to(os.readlink(item))
    elif item.is_dir():
        shutil.copytree(item, into, symlinks=True)
    else:
        try:
            os.link(item, into)
        except OSError:
            shutil.copy2(item, into)
