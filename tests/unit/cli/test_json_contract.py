"""One JSON contract for every --json output (tuner.data.json_contract), walked over the
outputs of every study committed under studies/: integer batch_size fields and no batch size
as a key, integer bytes and counts, tuner_version and schema at the top, study a name."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tests.support.json_contract import assert_contract
from tuner.cli.app import main
from tuner.data import files

COMMITTED = sorted(p.parent for p in (ROOT / "studies").glob("*/trials.parquet"))

pytestmark = pytest.mark.filterwarnings("ignore::tuner.use.environment.MismatchWarning")


def _json(*args: str) -> dict:
    out = CliRunner().invoke(main, list(args))
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)


@pytest.mark.parametrize("study", COMMITTED, ids=[p.name for p in COMMITTED])
def test_every_json_output_of_a_committed_study_keeps_the_contract(study):
    shown = _json("show", str(study), "--json")
    for data in (shown, _json("show", str(study), "--all", "--json"),
                 _json("show", str(study), "--importance", "--json")):
        assert_contract(data)
        assert data["study"] == files.read(study)[1]["study"]
    assert _json("show", str(study), "--format", "json") == shown
    # every pareto row carries its batch size as an integer, bytes and counts as integers
    assert all(isinstance(row["batch_size"], int) for row in shown["pareto"])
    assert [g["batch_size"] for g in shown["vs_plain"]] == sorted(
        {row["batch_size"] for row in shown["pareto"]})
    for bs in sorted({row["batch_size"] for row in shown["pareto"]}):
        rec = _json("recommend", str(study), "--batch-size", str(bs), "--json")
        assert_contract(rec)
        assert rec["batch_size"] == bs and rec["study"] == shown["study"]
        assert rec["vs_plain"]["batch_size"] == bs


def test_compare_of_every_committed_study_keeps_the_contract():
    data = _json("compare", *map(str, COMMITTED), "--json")
    assert_contract(data)
    names = [s["name"] for s in data["studies"]]
    assert names == [files.read(p)[1]["study"] for p in COMMITTED]
    assert {b["study"] for b in data["best"]} <= set(names)
    assert {f["study"] for f in data["fronts"]} <= set(names)
    assert all(b["vs_plain"] is None or b["vs_plain"]["batch_size"] == b["batch_size"]
               for b in data["best"])


def test_the_contract_catches_what_it_forbids():
    # The walker fails on each thing the outputs did before the contract.
    good = {"tuner_version": _json("show", str(COMMITTED[0]), "--json")["tuner_version"],
            "schema": 1, "study": "s", "pareto": [{"batch_size": 1, "peak_memory_bytes": 5}]}
    assert_contract(good)
    for bad in ({**good, "verdicts": {"1": "text"}},  # a batch size as a key
                {**good, "study": "A"} | {"best": [{"study": None}]},  # a study that is no name
                {**good, "pareto": [{"batch_size": "1"}]},
                {**good, "pareto": [{"batch_size": 1, "peak_memory_bytes": 1234.0}]},
                {k: v for k, v in good.items() if k != "schema"}):
        with pytest.raises(AssertionError):
            assert_contract(bad)


def test_show_format_table_or_json_and_json_as_its_alias():
    study = str(COMMITTED[0])
    table = CliRunner().invoke(main, ["show", study, "--format", "table"])
    assert table.exit_code == 0 and table.stdout.startswith("study ")
    assert table.stdout == CliRunner().invoke(main, ["show", study]).stdout
    both = CliRunner().invoke(main, ["show", study, "--json", "--format", "table"])
    assert both.exit_code == 2 and "--json and --format table cannot be combined" in both.output
