"""Bad input to the commands that read studies (show, recommend, compare, plot: tuner/cli/read.py):
a damaged study file, a study not finished yet or under a name that is not UTF-8, and recommend's
wording. Each gets a one-line ``Error:`` and a non-zero exit. The same for every command at once:
test_bad_input.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.cli import (
    OTHER,
    STUDY,
    assert_one_line_error,
    fingerprint,
    invoke,
    search_args,
    two_studies,
)
from tuner.errors import UserError

pytestmark = pytest.mark.usefixtures("fake_cli")


@pytest.fixture(scope="module")
def root(tmp_path_factory, fake_cli_for_module) -> Path:
    """A studies folder with two finished studies (fake runner), each over batch sizes 1, 8."""
    return two_studies(tmp_path_factory.mktemp("studies"))


# -- 1: a damaged trials.parquet is an error, not an empty table or a study left out -----------

def _damage(path: Path, how: str) -> None:
    """Rewrite ``path`` with its latency_ms_p50 column dropped or holding text, the tuner's
    metadata kept (so only the column is wrong)."""
    table = pq.read_table(path)
    meta = table.schema.metadata
    i = table.schema.get_field_index("latency_ms_p50")
    if how == "missing":
        table = table.remove_column(i)
    else:
        table = table.set_column(i, pa.field("latency_ms_p50", pa.string()),
                                 pa.array(["fast"] * table.num_rows))
    pq.write_table(table.replace_schema_metadata(meta), path)


DAMAGE = {"missing": "has no latency_ms_p50 column",
          "text": "has text in its latency_ms_p50 column, not numbers"}
COMMANDS = {"show": ["show", "{s}"], "compare": ["compare", "{other}", "{s}"],
            "recommend": ["recommend", "{s}", "--batch-size", "1"]}


@pytest.mark.parametrize("how", list(DAMAGE))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_damaged_trials_file_is_a_one_line_error_naming_it(root, tmp_path, command, how):
    studies = tmp_path / "studies"
    shutil.copytree(root, studies)
    trials = studies / STUDY / "trials.parquet"
    _damage(trials, how)
    args = [a.format(s=studies / STUDY, other=studies / OTHER) for a in COMMANDS[command]]
    result = invoke(*args)
    assert "Traceback" not in result.stderr
    assert_one_line_error(result, f"{trials} {DAMAGE[how]}", "not written by tuner, or is damaged",
                          "rerun `tuner search` with the same options to rewrite it from study.db")


def test_rerunning_the_search_rewrites_a_damaged_trials_file(root, tmp_path):
    studies = tmp_path / "studies"
    shutil.copytree(root, studies)
    _damage(studies / STUDY / "trials.parquet", "text")
    assert_one_line_error(invoke("show", str(studies / STUDY)), "has text in its latency_ms_p50")
    rerun = invoke(*search_args(studies, "--confirm", "1"))
    assert rerun.exit_code == 0, rerun.stderr
    assert "0 new trials" in rerun.stderr
    shown = invoke("show", str(studies / STUDY))
    assert shown.exit_code == 0, shown.stderr
    assert "batch size 1: Pareto-optimal configs" in shown.stdout


@pytest.mark.parametrize("how", ["empty", "truncated"])
def test_an_unreadable_trials_file_beside_its_study_db_says_how_to_write_it_again(root, tmp_path,
                                                                                  how):
    # A copy cut short, or a file emptied by a full disk: the error named the file alone.
    studies = tmp_path / "studies"
    shutil.copytree(root, studies)
    trials = studies / STUDY / "trials.parquet"
    whole = trials.read_bytes()
    trials.write_bytes(b"" if how == "empty" else whole[:len(whole) // 2])
    export = f"tuner worker --study {STUDY} --studies-dir {studies} --export-only"
    for command in COMMANDS.values():
        args = [a.format(s=studies / STUDY, other=studies / OTHER) for a in command]
        assert_one_line_error(invoke(*args), f"{trials}: not a readable Parquet file",
                              "rerun `tuner search` with the same options to rewrite it from "
                              f"study.db (or `{export}`)")
    written = invoke(*export.split()[1:])
    assert written.exit_code == 0, written.stderr
    assert pq.read_table(trials).num_rows == pq.ParquetFile(root / STUDY / "trials.parquet"
                                                            ).metadata.num_rows
    assert invoke("show", str(studies / STUDY)).exit_code == 0


def _set_meta(folder: Path, key: str, value: bytes | None) -> None:
    """Set (or, with None, drop) the ``tuner.<key>`` metadata of both of a study's files, the
    columns kept."""
    for name in ("trials.parquet", "pareto.parquet"):
        table = pq.read_table(folder / name)
        meta = dict(table.schema.metadata)
        meta.pop(f"tuner.{key}".encode())
        if value is not None:
            meta[f"tuner.{key}".encode()] = value
        pq.write_table(table.replace_schema_metadata(meta), folder / name)


MISSHAPEN = {"workload": (b"[1, 2]", "workload is a list, not an object"),
             "fingerprints": (b'{"gpu_name": "H200"}', "fingerprints is an object, not a list"),
             "fingerprints-items": (b"[{}, null]", "fingerprints holds null where each should be "
                                            "an object"),
             "study": (b"[1]", "study is a list, not a string"),
             "protocol": (b'"fast"', "protocol is a string, not an object")}


@pytest.mark.parametrize("case", list(MISSHAPEN))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_metadata_of_the_wrong_json_kind_is_a_one_line_error_naming_the_key(root, tmp_path,
                                                                             command, case):
    # Valid JSON of another kind: show, recommend and compare each raised AttributeError,
    # KeyError or TypeError deep in their rendering.
    studies = tmp_path / "studies"
    shutil.copytree(root, studies)
    value, said = MISSHAPEN[case]
    _set_meta(studies / STUDY, case.partition("-")[0], value)
    args = [a.format(s=studies / STUDY, other=studies / OTHER) for a in COMMANDS[command]]
    result = invoke(*args)
    assert "Traceback" not in result.stderr
    assert_one_line_error(result, f"{studies / STUDY / 'trials.parquet'}: damaged tuner metadata "
                          f"(tuner.{said}); rerun `tuner search` with the same options to "
                          "rewrite it from study.db")


def test_a_study_file_without_its_workload_shows_the_model_its_rows_name(root, tmp_path):
    studies = tmp_path / "studies"
    shutil.copytree(root, studies)
    _set_meta(studies / STUDY, "workload", None)
    result = invoke("show", str(studies / STUDY))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"study {STUDY}: resnet18 float32 on cpu, 4 trials"


def _set_column(path: Path, name: str, values: list, type_: pa.DataType) -> None:
    """Rewrite ``path`` with its column ``name`` holding ``values``, the metadata kept."""
    table = pq.read_table(path)
    meta = table.schema.metadata
    i = table.schema.get_field_index(name)
    table = table.set_column(i, pa.field(name, type_), pa.array(values, type_))
    pq.write_table(table.replace_schema_metadata(meta), path)


ROWS = {"config-not-json": ("config_json", "{bad", pa.string(), None,
                            "'s config_json is not a config (JSONDecodeError)"),
        "config-a-list": ("config_json", "[1]", pa.string(), None,
                          "'s config_json is not a config (TypeError)"),
        "no-trial-numbers": ("trial_number", None, pa.int64(), None,
                             "4 of 4 rows have no trial_number"),
        "fractional-batch-size": ("batch_size", 1.5, pa.float64(), None,
                                  "batch_size 1.5 is not a whole number"),
        "no-model": ("model", None, pa.string(), "workload",
                     "no tuner.workload metadata, and rows without a model")}


@pytest.mark.parametrize("case", list(ROWS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_damaged_rows_are_a_one_line_error_naming_the_file(root, tmp_path, command, case):
    # Each was a traceback: JSONDecodeError, TypeError in TrialConfig.from_dict, "cannot convert
    # float NaN to integer", Workload() missing its model.
    studies = tmp_path / "studies"
    shutil.copytree(root, studies)
    column, value, type_, dropped, said = ROWS[case]
    for name in ("trials.parquet", "pareto.parquet"):
        rows = pq.read_metadata(studies / STUDY / name).num_rows
        _set_column(studies / STUDY / name, column, [value] * rows, type_)
    if dropped:
        _set_meta(studies / STUDY, dropped, None)
    args = [a.format(s=studies / STUDY, other=studies / OTHER) for a in COMMANDS[command]]
    result = invoke(*args)
    assert "Traceback" not in result.stderr
    assert_one_line_error(result, f"{studies / STUDY / 'trials.parquet'}: damaged (", said,
                          "rerun `tuner search` with the same options to rewrite it from study.db")


# -- 2: recommend names the CLI's options on the command line, Python's keywords in Python ------

def test_recommend_without_a_batch_size_names_the_option_on_the_command_line(root):
    before = fingerprint(root)
    result = invoke("recommend", str(root / STUDY))
    assert_one_line_error(result, "measured batch sizes 1, 8", "(--batch-size N)",
                          "--objective throughput")
    assert "batch_size=" not in result.stderr
    assert fingerprint(root) == before
    from tuner.use.recommend import recommend

    with pytest.raises(UserError, match=r"\(batch_size=N\), or use objective=\"throughput\""):
        recommend(root / STUDY)


def test_recommend_format_python_with_json_is_a_usage_error(root):
    result = invoke("recommend", str(root / STUDY), "--batch-size", "1", "--format", "python",
                    "--json")
    assert_one_line_error(result, "--json and --format python cannot be combined")
    assert result.exit_code == 2
    # --json alone, or with --format json, is JSON as before.
    for extra in ([], ["--format", "json"]):
        result = invoke("recommend", str(root / STUDY), "--batch-size", "1", "--json", *extra)
        assert result.exit_code == 0 and result.stdout.startswith("{"), result.stderr


# -- a study folder whose first trial has not finished: said so, not "no such file" -------------

@pytest.mark.parametrize("command", ["show", "recommend"])
def test_a_study_with_no_finished_trial_yet_says_so(tmp_path, command):
    folder = tmp_path / STUDY
    folder.mkdir()
    (folder / "study.db").write_bytes(b"")  # made as the search starts
    for given in ([str(folder)], [STUDY, "--studies-dir", str(tmp_path)]):
        result = invoke(command, *given)
        assert_one_line_error(result, f"study {folder} has no finished trial to read yet",
                              "a search writes its trials.parquet once its first trial finishes")
        assert "no such file" not in result.stderr


NOT_UTF8 = "holds bytes that are not UTF-8, and a study's files need a UTF-8 path: rename the folder"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_study_under_a_name_that_is_not_utf8_is_told_to_rename_it(root, tmp_path, command):
    # Arrow cannot open such a name: "not a readable Parquet file ... rerun tuner search" of a
    # good file.
    folder = tmp_path / os.fsdecode(b"caf\xe9")  # Latin-1, not UTF-8
    shutil.copytree(root, folder)
    args = [a.format(s=folder / STUDY, other=root / OTHER) for a in COMMANDS[command]]
    assert_one_line_error(invoke(*args), f"{str(folder / STUDY)!r} {NOT_UTF8}")


def test_a_search_under_a_folder_that_is_not_utf8_is_refused_before_any_trial(tmp_path):
    # It ran its trials, then a UnicodeEncodeError traceback left study.db and no Parquet.
    studies = tmp_path / os.fsdecode(b"caf\xe9")
    result = invoke(*search_args(studies))
    assert_one_line_error(result, f"Invalid value for '--studies-dir': {str(studies)!r} {NOT_UTF8}")
    assert not studies.exists()
