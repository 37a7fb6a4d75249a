"""``tuner search --space space.toml``: the file narrows the dimensions as the options do, and an
option given on the command line wins."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tuner.cli.app import main
from tuner.data import files
from tuner.domain.space_file import SpaceFile, read_space_file
from tuner.errors import UserError

SPACE = """
batch_sizes = [1, 2]
backends = ["eager", "inductor"]
modes = ["default"]
dynamic = [false]
dtypes = ["float32", "bfloat16"]
channels_last = [false, true]

[inductor_options]
epilogue_fusion = [true, false]
"""


def test_the_file_reads_typed_as_it_is_written(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(SPACE)
    assert read_space_file(path) == SpaceFile(
        batch_sizes=(1, 2), backends=("eager", "inductor"), modes=("default",), dynamic=(False,),
        dtypes=("float32", "bfloat16"), channels_last=(False, True),
        inductor_options=(("epilogue_fusion", (True, False)),))


def test_a_file_saved_with_a_byte_order_mark_reads_and_utf8_whatever_the_locale(tmp_path):
    # Windows editors write a BOM: it was "not valid TOML: Invalid statement (at line 1,
    # column 1)" for a file that looks fine in any editor.
    path = tmp_path / "space.toml"
    path.write_bytes(b"\xef\xbb\xbf" + "# r\u00e9seau\n".encode() + SPACE.encode())
    assert read_space_file(path).batch_sizes == (1, 2)


def test_a_search_measures_the_files_space_and_the_command_line_wins(tmp_path, fake_cli):
    path = tmp_path / "space.toml"
    path.write_text(SPACE)
    result = CliRunner().invoke(main, [
        "search", "--model", "resnet18", "--device", "cpu", "--space", str(path),
        "--batch-sizes", "4", "--confirm", "0", "--name", "s", "--studies-dir", str(tmp_path),
        "-q"])
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(tmp_path / "s" / "trials.parquet")
    assert set(df["batch_size"]) == {4}  # --batch-sizes given: the file's [1, 2] is not used
    assert set(df["dtype"]) == {"float32", "bfloat16"}
    assert set(df["channels_last"]) == {False, True}
    assert set(df["backend"]) == {"eager", "inductor"} and set(df["mode"].dropna()) == {"default"}
    assert set(df["opt_epilogue_fusion"].dropna()) == {True, False}
    # eager x 2 dtypes x 2 formats, inductor x 2 dtypes x 2 formats x 2 option values
    assert len(df) == 4 + 8


@pytest.mark.parametrize("text, words", [
    ("modez = ['default']\n", "unknown key 'modez'; did you mean 'modes'?"),
    ("[inductor_options]\n", "[inductor_options] must be a table"),
    ("batch_sizes = []\n", "batch_sizes must be a non-empty list"),
    ("dtypes = [[1]]\n", "dtypes holds [1]; give strings"),
    ("[inductor_options.triton]\n", "inductor_options.triton must be a non-empty list"),
    ("batch_sizes = ['8']\n", "batch_sizes holds '8'; give whole numbers"),
    ("batch_sizes = [true]\n", "batch_sizes holds True; give whole numbers"),
    ("channels_last = ['yes']\n", "channels_last holds 'yes'; give true/false"),
    ("dynamic = ['maybe']\n", "dynamic holds 'maybe'; give true, false or \"none\""),
])
def test_a_malformed_file_is_one_line_naming_what_is_wrong(tmp_path, text, words):
    path = tmp_path / "space.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=None) as caught:
        read_space_file(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_docs_example_reads(tmp_path):
    page = (ROOT / "docs" / "search-space.md").read_text()
    block = page.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "space.toml"
    path.write_text("\n".join(line.strip() for line in block.splitlines()))
    space = read_space_file(path)
    assert space.batch_sizes == (1, 16) and space.inductor_options == (
        ("coordinate_descent_tuning", (False, True)), ("freezing", (False, True)))


@pytest.mark.parametrize("text, key, words", [
    ("batch_sizes = [0]\n", "batch_sizes", "batch size 0 is not a positive integer"),
    ("batch_sizes = [1]\ndtypes = ['float64']\n", "dtypes", "unknown dtype 'float64'"),
    ("batch_sizes = [1]\nmodes = ['fast']\n", "modes", "unknown mode 'fast'"),
    ("batch_sizes = [1]\n[inductor_options]\nepilogue_fusion = ['maybe']\n", "inductor_options",
     "'maybe' as bool"),
])
def test_a_bad_value_in_the_file_is_blamed_on_the_file_not_an_option(tmp_path, fake_cli, text,
                                                                     key, words):
    path = tmp_path / "space.toml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["search", "--model", "resnet18", "--device", "cpu",
                                       "--space", str(path), "--studies-dir", str(tmp_path)])
    assert result.exit_code == 1 and words in result.stderr
    assert result.stderr.strip().endswith(f"(from {key} in --space {path})")


def test_a_bad_value_on_the_command_line_is_not_blamed_on_the_file(tmp_path, fake_cli):
    path = tmp_path / "space.toml"
    path.write_text("batch_sizes = [1]\nmodes = ['default']\n")
    result = CliRunner().invoke(main, ["search", "--model", "resnet18", "--device", "cpu",
                                       "--space", str(path), "--mode", "fast",
                                       "--studies-dir", str(tmp_path)])
    assert result.exit_code == 1 and "unknown mode 'fast'" in result.stderr
    assert "--space" not in result.stderr


def search_with(tmp_path, text: str, *args: str, device: str = "cpu"):
    """``tuner search --space`` on a file holding ``text`` (the fake runner measures)."""
    path = tmp_path / "space.toml"
    path.write_text(text)
    return path, CliRunner().invoke(main, [
        "search", "--model", "resnet18", "--device", device, "--space", str(path), "--confirm",
        "0", "--name", "s", "--studies-dir", str(tmp_path), "-q", *args])


def one_line_error(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("name", ["triton.cudagraphs", '"triton.cudagraphs"'])
def test_a_dotted_option_name_is_the_same_option_quoted_or_not(tmp_path, fake_cli, name):
    # Unquoted, TOML reads it as the table triton holding cudagraphs.
    _, result = search_with(tmp_path, "batch_sizes = [1]\nbackends = ['eager', 'inductor']\n"
                            f"modes = ['default']\n[inductor_options]\n{name} = [false, true]\n",
                            device="cuda")
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(tmp_path / "s" / "trials.parquet")
    assert set(df["opt_triton_cudagraphs"].dropna()) == {False, True}


def test_a_dotted_option_given_quoted_and_unquoted_is_refused(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text('[inductor_options]\n"triton.cudagraphs" = [false]\ntriton.cudagraphs = [true]\n')
    with pytest.raises(UserError, match=r"inductor_options.triton.cudagraphs given twice"):
        read_space_file(path)


def test_a_files_value_is_not_split_at_its_comma(tmp_path, fake_cli):
    # One value of the option, as torch reads it: "ATEN,TRITON" is a list of GEMM backends.
    _, result = search_with(tmp_path, "batch_sizes = [1]\nbackends = ['eager', 'inductor']\n"
                            "modes = ['max-autotune-no-cudagraphs']\n[inductor_options]\n"
                            "max_autotune_gemm_backends = ['ATEN,TRITON', 'ATEN']\n")
    assert result.exit_code == 0, result.output
    df = pd.read_parquet(tmp_path / "s" / "trials.parquet")
    assert set(df["opt_max_autotune_gemm_backends"].dropna()) == {"ATEN,TRITON", "ATEN"}


def test_a_files_dtype_holding_a_comma_is_one_unknown_dtype(tmp_path, fake_cli):
    path, result = search_with(tmp_path, "dtypes = ['float32,bfloat16']\n")
    assert one_line_error(result).endswith(
        f"unknown dtype 'float32,bfloat16' in --dtype: choose from float32, tf32, bfloat16, "
        f"float16 (from dtypes in --space {path})")


def test_an_option_given_twice_in_the_file_with_dash_and_underscore_is_refused(tmp_path, fake_cli):
    path, result = search_with(tmp_path, "[inductor_options]\nepilogue_fusion = [true]\n"
                               "epilogue-fusion = [false]\n")
    assert one_line_error(result) == (
        "Error: inductor option epilogue_fusion given twice, as 'epilogue_fusion' and "
        f"'epilogue-fusion': give it once, with all its values (from inductor_options in --space "
        f"{path})")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_files_float_option_that_is_not_finite_is_refused(tmp_path, fake_cli, value):
    # nan != nan: no stored trial would ever match it on a resume.
    path, result = search_with(tmp_path, f"[inductor_options]\ncpu_gpu_bw = [1.0, {value}]\n")
    assert one_line_error(result) == (
        f"Error: --inductor-option cpu_gpu_bw: {value} is not a finite number: give numbers, "
        "e.g. --inductor-option cpu_gpu_bw=0.5,1.0 (from inductor_options in --space "
        f"{path})")


def test_a_files_batch_size_past_the_int32_range_is_refused(tmp_path, fake_cli):
    path, result = search_with(tmp_path, f"batch_sizes = [1, {2**31}]\n")
    assert one_line_error(result).startswith(f"Error: batch size {2**31} is more than "
                                             f"{2**31 - 1}")
    assert not (tmp_path / "s" / "trials.parquet").exists()


@pytest.mark.parametrize("text, args, blamed", [
    # no quoted value in the message to guess the key from
    ("dtypes = ['float32', 'tf32']\n", [], "dtypes"),
    ("backends = ['eager']\nmodes = ['default']\n", [], "modes, backends"),
    ("modes = ['default']\n", ["--backend", "eager"], "modes"),
    # 'eager' is the file's, but the mode is the command line's: the file is not blamed
    ("backends = ['eager', 'inductor']\n", ["--mode", "eager"], None),
])
def test_an_error_is_blamed_on_the_keys_the_failed_check_read(tmp_path, fake_cli, text, args,
                                                               blamed):
    path, result = search_with(tmp_path, text, *args)
    line = one_line_error(result)
    if blamed is None:
        assert "--space" not in line
    else:
        assert line.endswith(f" (from {blamed} in --space {path})")


def test_a_resume_that_asks_another_space_names_the_files_key(tmp_path, fake_cli):
    made = search_with(tmp_path, "batch_sizes = [1]\nmodes = ['default']\n", "--trials", "1")[1]
    assert made.exit_code == 0, made.output
    path, result = search_with(tmp_path, "batch_sizes = [1]\nmodes = ['default', 'lite']\n",
                               "--trials", "2")
    line = one_line_error(result)
    assert "another search space (--mode: study has default, asked default,lite)" in line
    assert line.endswith(f" (from modes in --space {path})")


def test_a_cuda_study_made_with_a_space_file_resumed_without_it_is_told_to_pass_it(tmp_path,
                                                                                   fake_cli):
    made = search_with(tmp_path, "batch_sizes = [1]\n", "--trials", "1", device="cuda")[1]
    assert made.exit_code == 0, made.output
    # As docs/search-space.md says: a space file turns the CUDA extras off, though it did not name them.
    stored = files.read(tmp_path / "s")[1]["space"]
    assert not stored.get("options") and not stored.get("channels_last")
    # The same command without the file: the CUDA defaults add inductor options, channels_last.
    result = CliRunner().invoke(main, [
        "search", "--model", "resnet18", "--device", "cuda", "--batch-sizes", "1", "--confirm",
        "0", "--name", "s", "--studies-dir", str(tmp_path), "-q", "--trials", "2"])
    line = one_line_error(result)
    assert "if the study was made with a --space file, pass the same --space file" in line


def test_a_space_file_that_never_ends_is_refused_after_a_megabyte(tmp_path):
    # /dev/zero read until memory ran out, then a MemoryError traceback.
    with pytest.raises(UserError, match=r"^--space /dev/zero: over 1024 KiB; a space file is a "
                                        r"few lines of TOML$"):
        read_space_file(Path("/dev/zero"))
    fifo = tmp_path / "space"  # as --space <(...) gives it
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_text("batch_sizes = [1, 8]\n"))
    writer.start()
    assert read_space_file(fifo).batch_sizes == (1, 8)
    writer.join()
