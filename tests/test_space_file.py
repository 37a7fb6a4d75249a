"""``tuner search --space space.toml``: the file narrows the dimensions as the options do, and an
option given on the command line wins."""

from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner

from tuner.cli.app import main
from tuner.errors import UserError
from tuner.spec.space_file import SpaceFile, read_space_file

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


def test_the_file_reads_as_the_options_spell_it(tmp_path):
    path = tmp_path / "space.toml"
    path.write_text(SPACE)
    assert read_space_file(path) == SpaceFile(
        batch_sizes="1,2", backends=("eager,inductor",), modes=("default",), dynamic=("false",),
        dtypes="float32,bfloat16", channels_last="false,true",
        inductor_options=("epilogue_fusion=true,false",))


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
    ("dtypes = [[1]]\n", "dtypes holds [1]"),
])
def test_a_malformed_file_is_one_line_naming_what_is_wrong(tmp_path, text, words):
    path = tmp_path / "space.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=None) as caught:
        read_space_file(path)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_readme_example_reads(tmp_path):
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "space.toml"
    path.write_text("\n".join(line.strip() for line in block.splitlines()))
    space = read_space_file(path)
    assert space.batch_sizes == "1,16" and space.inductor_options == (
        "coordinate_descent_tuning=false,true", "freezing=false,true")


@pytest.mark.parametrize("text, key, words", [
    ("batch_sizes = [0]\n", "batch_sizes", "batch size '0' is not a positive integer"),
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
