"""Hub dataset folders: parquet shards under ``data/`` + a README.md card, and publishing them.

The folder is what ``Dataset.push_to_hub`` would create in a repo, written locally first so it can be inspected,
loaded with ``datasets.load_dataset(folder)`` and pushed with :func:`push_folder`. The package by job:
:mod:`vhx.hub.write` writes folders, :mod:`vhx.hub.card` their cards, :mod:`vhx.hub.read` reads them (in place, by
reference) and :mod:`vhx.hub.push` publishes them.
"""

from vhx.hub.card import (
    DEFAULT_TEMPLATE,
    LOCAL_LOAD_NOTE,
    card_for_repo,
    no_image_note,
    source_description,
    split_stats,
)
from vhx.hub.push import PushError, push_folder
from vhx.hub.read import (
    INCOMPLETE_MARKER,
    FolderSplit,
    check_complete,
    default_image_files_dir,
    folder_data_files,
    load_folder,
    load_folder_by_reference,
    open_folder,
    read_card,
    read_folder_sources,
    read_folder_stats,
    reading_parquet,
    store_image_bytes,
    unreadable_parquet,
)
from vhx.hub.write import image_group_order, write_hub_folder

__all__ = [
    "DEFAULT_TEMPLATE", "INCOMPLETE_MARKER", "LOCAL_LOAD_NOTE", "FolderSplit", "PushError", "card_for_repo", "check_complete",
    "default_image_files_dir", "folder_data_files", "image_group_order", "load_folder", "load_folder_by_reference",
    "no_image_note", "open_folder", "push_folder", "read_card", "read_folder_sources", "read_folder_stats",
    "reading_parquet", "source_description", "split_stats", "store_image_bytes", "unreadable_parquet", "write_hub_folder",
]
