"""A sweep's rows as a flat table: CSV, Parquet (with pyarrow) or a pandas DataFrame.

Nested figures become dotted columns (``memory.worst_case_peak_bytes.upper``,
``settings.memory``); columns are in the order they first appear, rows in job order.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from streamplan.errors import MissingDependencyError
from streamplan.sweep.rows import SweepRow, flatten, strict

FORMATS = ("csv", "parquet")


def table(rows: Sequence[SweepRow]) -> tuple[list[str], list[dict[str, Any]]]:
    """The column names and the flat rows."""
    flat = [flatten(strict(r.to_dict())) for r in rows]
    columns = list(dict.fromkeys(c for row in flat for c in row))
    return columns, flat


def to_csv(rows: Sequence[SweepRow]) -> str:
    """CSV text with a header line; absent figures are empty cells."""
    columns, flat = table(rows)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, restval="", lineterminator="\n")
    w.writeheader()
    w.writerows(flat)
    return buf.getvalue()


def check_parquet() -> None:
    """Raise ``MissingDependencyError`` unless pyarrow is installed (check before a long sweep)."""
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingDependencyError(
            "writing Parquet needs the optional package 'pyarrow'",
            hint="pip install 'streamplan[parquet]'  (or: pip install pyarrow), or write CSV",
        ) from None


def to_parquet(rows: Sequence[SweepRow]) -> bytes:
    """The rows as a Parquet file's bytes (one column per flat field)."""
    check_parquet()
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns, flat = table(rows)
    data = {c: [row.get(c) for row in flat] for c in columns}
    buf = io.BytesIO()
    pq.write_table(pa.table(data), buf)
    return buf.getvalue()


def to_dataframe(rows: Sequence[SweepRow]) -> Any:
    """The rows as a pandas DataFrame (pandas is optional)."""
    try:
        import pandas as pd
    except ImportError:
        raise MissingDependencyError(
            "a DataFrame needs the optional package 'pandas'", hint="pip install pandas"
        ) from None
    columns, flat = table(rows)
    return pd.DataFrame(flat, columns=columns)


def export(rows: Sequence[SweepRow], fmt: str) -> str | bytes:
    """The rows in ``fmt`` (``csv`` or ``parquet``)."""
    if fmt == "csv":
        return to_csv(rows)
    if fmt == "parquet":
        return to_parquet(rows)
    raise ValueError(f"unknown table format {fmt!r}; use one of {', '.join(FORMATS)}")
