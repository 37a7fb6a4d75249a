"""A study copied to another storage with ``optuna.copy_study``: every trial gets a new id there,
and the tuner numbers trials by it, so the finalists' re-measurements (stored by trial number)
would count for other configs. The tuner says so rather than show them, and ``--redo`` measures
them again on the copy."""

from __future__ import annotations

import optuna
import pandas as pd
import pytest

from tests.support.cli import STUDY, assert_one_line_error, invoke, search_args
from tuner.domain import layout

pytestmark = pytest.mark.usefixtures("fake_cli")


def copy_storage(source: str, target: str) -> None:
    for name in optuna.get_all_study_names(source):
        optuna.copy_study(from_study_name=name, from_storage=source, to_storage=target)


def test_a_copied_studys_repeats_are_refused_and_redo_measures_them_again(tmp_path):
    original, copy = tmp_path / "original", tmp_path / "copy"
    assert invoke(*search_args(original, "--confirm", "1")).exit_code == 0
    (copy / STUDY).mkdir(parents=True)
    copy_storage(f"sqlite:///{original / STUDY / layout.DB_FILE}",
                 f"sqlite:///{copy / STUDY / layout.DB_FILE}")

    refused = invoke("worker", "--study", STUDY, "--studies-dir", str(copy), "--export-only")
    assert_one_line_error(refused, "renumbered", "optuna.copy_study", "--redo")

    redone = invoke("confirm", str(copy / STUDY), "--redo", "--repeats", "1")
    assert redone.exit_code == 0, redone.output
    rows = [pd.read_parquet(root / STUDY / layout.TRIALS_FILE).set_index("config_key")
            for root in (original, copy)]
    assert not rows[0]["trial_number"].equals(rows[1].loc[rows[0].index, "trial_number"])
    medians = [r["latency_ms_p50_median"] for r in rows]
    assert medians[0].notna().any()
    pd.testing.assert_series_equal(medians[0].sort_index(), medians[1].sort_index())
