"""The study's files: ``trials.parquet`` (every trial) and ``pareto.parquet`` (the best
trade-offs), written atomically with the tuner's metadata, read back from any schema version.

The fingerprint is on every row and in the file metadata, so studies from different machines
compare from their files alone. Files are written to a temporary name and renamed: a reader
never sees half a file.

The rows as an Arrow table in :mod:`~tuner.data.files.arrow`; the metadata in
:mod:`~tuner.data.files.metadata`; writing in :mod:`~tuner.data.files.atomic`; reading in
:mod:`~tuner.data.files.reader`.
"""

from tuner.data.files.arrow import to_table
from tuner.data.files.atomic import STALE_TEMP_S, export, remove_stale_temps, write
from tuner.data.files.metadata import fingerprints, peaks
from tuner.data.files.reader import check_path, load, read, refuse_front_only

__all__ = ["STALE_TEMP_S", "check_path", "export", "fingerprints", "load", "peaks", "read",
           "refuse_front_only", "remove_stale_temps", "to_table", "write"]
