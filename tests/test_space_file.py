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
