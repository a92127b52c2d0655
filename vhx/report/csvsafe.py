"""CSV cells a spreadsheet will not run: every CSV vhx writes goes through here.

A spreadsheet opening a CSV takes a cell that starts with ``=``, ``+``, ``-`` or ``@`` (or a tab or carriage
return before one) as a formula: a model folder named ``=HYPERLINK("evil.example","click")`` would become a link in
``scores.csv``. As OWASP's guidance on CSV injection says, such a text cell is written with a single quote in front
(``'=HYPERLINK(...)``), which spreadsheets show as text. Only text is escaped: a number (``-0.5`` in a column of
differences) stays a number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from vhx.locking import atomic_path

#: The first characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """``value`` as a CSV cell: text that would start a formula behind a single quote, anything else as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with :func:`csv_cell` applied to its header and to every column that is not numeric or boolean."""
    out = frame.rename(columns=csv_cell)
    for i in range(out.shape[1]):
        column = out.iloc[:, i]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            out.isetitem(i, column.map(csv_cell))
    return out


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as the CSV ``path`` (no index), its text cells escaped (:func:`csv_frame`), written whole or not at all.

    Lines end in CRLF, as RFC 4180 and Python's :mod:`csv` have it: a cell holding a carriage return is then quoted
    (after a bare ``\n`` one, pandas quotes only cells holding ``\n``, and a lone CR would cut the row in two)."""
    with atomic_path(path) as tmp:
        csv_frame(frame).to_csv(tmp, index=False, lineterminator="\r\n")
