"""``tuner search --compile-scope whole,regional`` and what ``recommend`` makes of a regional
config, on the fake runner (whose regional configs compile in a quarter of the time)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import STUDY, assert_one_line_error, invoke, search_args
from tests.support.text import flat
from tuner.data import files

pytestmark = pytest.mark.usefixtures("fake_cli")


def scoped(tmp_path, *extra: str) -> list[str]:
    """A search over eager and inductor's default at batch size 1, both scopes."""
    return search_args(tmp_path, "--compile-scope", "whole,regional", "--confirm", "0", "-q",
                       *extra, batch_sizes="1")


def test_a_search_measures_each_scope_and_the_rows_say_which(tmp_path):
    result = invoke(*scoped(tmp_path))
    assert result.exit_code == 0, result.output
    assert "\ndefault regional " in result.stdout  # its name, in the table
    df, meta = files.read(tmp_path / STUDY)
    by_label = df.set_index("label")
    assert sorted(by_label.index) == ["eager", "inductor:default", "inductor:default regional"]
    assert by_label.loc["inductor:default regional", "compile_scope"] == "regional"
    assert by_label.loc["inductor:default regional", "region_class"] == "Block"
    assert by_label.loc["inductor:default", "compile_scope"] == "whole"
    assert by_label["compile_scope"].isna()["eager"]
    assert meta["space"]["compile_scopes"] == ["whole", "regional"]
    again = invoke(*scoped(tmp_path))  # the same command resumes: nothing new to measure
    assert again.exit_code == 0, again.output
    assert len(files.read(tmp_path / STUDY)[0]) == 3
    other = invoke(*search_args(tmp_path, "--confirm", "0", batch_sizes="1"))
    assert_one_line_error(other, "(--compile-scope: study has whole,regional, asked none)")


def test_recommend_for_warmup_applies_the_regional_config(tmp_path):
    assert invoke(*scoped(tmp_path)).exit_code == 0
    # eager warms up first; with a latency limit it is out, and regional compiles faster
    asked = ["recommend", str(tmp_path / STUDY), "--objective", "warmup", "--max-latency-ms", "6"]
    table = invoke(*asked)
    assert table.exit_code == 0, table.output
    assert "config       default regional, batch size 1" in table.stdout
    assert ("apply block.compile(backend='inductor', dynamic=False, mode='default') for each "
            "Block of the model (regional: the study compiled 12), the rest eager"
            ) in flat(table.stdout)
    snippet = invoke(*asked, "--format", "python").stdout
    compile(snippet, "<snippet>", "exec")
    assert "type(module).__qualname__ == 'Block'" in snippet
    assert "module.compile(backend='inductor', dynamic=False, mode='default')" in snippet
    assert "torch.compile(model" not in snippet
    data = json.loads(invoke(*asked, "--format", "json").stdout)
    assert data["config"]["compile_scope"] == "regional"


def test_a_space_file_sets_the_scopes(tmp_path):
    space = tmp_path / "space.toml"
    space.write_text('compile_scopes = ["regional"]\n')
    result = invoke(*search_args(tmp_path, "--space", str(space), "--confirm", "0", "-q",
                                 batch_sizes="1"))
    assert result.exit_code == 0, result.output
    df, _ = files.read(tmp_path / STUDY)
    assert set(df["label"]) == {"eager", "inductor:default regional"}


@pytest.mark.parametrize("extra, options, words", [
    (["--compile-scope", "partial"], {}, ["--compile-scope 'partial': choose from whole, regional"]),
    (["--compile-scope", "regional"], {"backend": "eager", "mode": None},
     ["--compile-scope applies to compiled backends only"]),
    (["--compile-scope", "whole,"], {}, ["--compile-scope 'whole,' has an empty value"]),
])
def test_a_scope_that_cannot_run_is_a_one_line_error(tmp_path, extra, options, words):
    assert_one_line_error(invoke(*search_args(tmp_path, *extra, **options)), *words)
