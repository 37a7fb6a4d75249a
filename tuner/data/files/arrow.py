"""A study's rows as an Arrow table in the schema's types (:mod:`tuner.data.schema`), and back:
the inductor options' columns typed by their values, gaps kept as nulls."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa

from tuner.data.schema import COLUMNS, OPTION_METADATA, SCHEMA, is_option_column


def to_table(df: pd.DataFrame) -> pa.Table:
    """The schema's columns, then the inductor options' columns the frame holds (typed as
    their values are; see :mod:`tuner.data.schema`)."""
    options = sorted(c for c in df.columns if is_option_column(c))
    df = df[COLUMNS + options].copy()
    schema = SCHEMA
    for name in options:
        schema = schema.append(pa.field(name, _option_type(df[name]), metadata=OPTION_METADATA))
    for field in schema:
        # Arrow reads NaN as null in text and in a column of lists, but a column no row filled
        # comes back as NaN floats, which Arrow cannot make lists of: None there. The options'
        # columns are typed by their values, so theirs are cleaned too. (Cleaning every text
        # column as well took more than half of a write's time, as benchmarks/study_growth.py
        # measures it.)
        if field.name in options or (pa.types.is_list(field.type)
                                      and df[field.name].dtype != object):
            column = df[field.name].astype(object)
            df[field.name] = column.where(column.map(_filled), None)
            if field.name in options and pa.types.is_string(field.type):
                df[field.name] = df[field.name].map(lambda v: v if v is None else str(v))
        # Whole numbers with gaps are floats in pandas: stored as pandas' nullable Int64, so
        # that pd.read_parquet gives them back as integers (it reads pandas' dtype from the
        # file) rather than as 3.0.
        elif pa.types.is_integer(field.type) and df[field.name].dtype.kind in "fO":
            df[field.name] = df[field.name].astype("Int64")
    return pa.Table.from_pandas(df, schema=schema, preserve_index=False)


def integers(column: pd.Series) -> pd.Series:
    """``column`` as pandas' nullable Int64, where every value it holds is a whole number."""
    try:
        return column.astype("Int64")
    except (TypeError, ValueError):  # a fraction or text: left as the file has it
        return column


def _option_type(column: pd.Series) -> pa.DataType:
    """An option column's Arrow type, from its values (bool, int, float or str); text where
    they mix kinds or none is filled."""
    values = [v for v in column.astype(object) if _filled(v)]
    try:
        inferred = pa.array(values).type if values else pa.string()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):  # an int beyond 64 bits
        return pa.string()
    return inferred if (pa.types.is_boolean(inferred) or pa.types.is_integer(inferred)
                        or pa.types.is_floating(inferred)) else pa.string()


def _filled(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)
