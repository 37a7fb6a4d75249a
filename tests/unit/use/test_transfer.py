"""Transfer in `tuner compare`: is one study's fastest config within noise of the best on the
other study's GPU, what would it cost there, and which knob values do the two bests share."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tests.support.synthetic import write_study
from tuner.cli.app import main
from tuner.render.comparison import render
from tuner.use.compare import compare

PAIR = [ROOT / "studies" / "h100-resnet50-bf16-extended",
        ROOT / "studies" / "h200-resnet50-bf16-extended"]


def transfer(comparison, bs, source, target):
    return next(t for t in comparison.transfers
                if (t.batch_size, t.source, t.target) == (bs, source, target))


def test_the_committed_h100_and_h200_studies():
    c = compare(PAIR)
    # Batch size 1: the same config is the fastest on both GPUs.
    same = transfer(c, 1, "A", "B")
    assert (same.outcome, same.verdict, same.knobs_differ) == ("on_front", "same config", {})
    # Batch size 16: the H200's best costs 1.07x on the H100, within noise of the H100's best;
    # the H100's best was never measured on the H200.
    there = transfer(c, 16, "B", "A")
    assert there.slowdown_vs_target_best == pytest.approx(1.0737, abs=1e-4)
    assert there.verdict == "within noise"
    assert there.knobs_differ == {"channels_last": {"B": False, "A": True},
                                  "epilogue_fusion": {"B": True, "A": False},
                                  "shape_padding": {"B": True, "A": False}}
    assert there.knobs_shared == {"backend": "inductor", "mode": "reduce-overhead",
                                  "dynamic": False, "dtype": "bfloat16", "cudnn_benchmark": True,
                                  "coordinate_descent_tuning": False, "freezing": False}
    missing = transfer(c, 16, "A", "B")
    assert (missing.outcome, missing.verdict, missing.slowdown_vs_target_best) == (
        "not_measured", None, None)
    lines = render(c, width=400).splitlines()  # a sentence a line
    assert "  A's and B's fastest are the same config: backend=inductor, mode=reduce-overhead, " \
        "dynamic=False, dtype=bfloat16, channels_last=False, cudnn_benchmark=True, " \
        "coordinate_descent_tuning=False, epilogue_fusion=True, freezing=False, " \
        "shape_padding=True" in lines
    assert "  A's and B's fastest share backend=inductor, mode=reduce-overhead, dynamic=False, " \
        "dtype=bfloat16, cudnn_benchmark=True, coordinate_descent_tuning=False, freezing=False; " \
        "differ in channels_last (A True, B False), epilogue_fusion (A False, B True), " \
        "shape_padding (A False, B True)" in lines
    on_a = next(line for line in lines if line.startswith("  B's ") and " on A: NOT" in line)
    assert "1.269 ms, 1.07x slower than A's best" in on_a
    assert on_a.endswith("(1.182 ms); within noise of it")
    assert any(line.startswith("  A's ") and " on B: not measured there; B's best is " in line
               for line in lines)


def test_the_committed_pair_as_json():
    out = CliRunner().invoke(main, ["compare", *map(str, PAIR), "--json"])
    assert out.exit_code == 0, out.output
    moved = {(t["batch_size"], t["source"], t["target"]): t
             for t in json.loads(out.stdout)["transfers"]}
    assert moved[(16, "B", "A")]["verdict"] == "within noise"
    assert moved[(16, "B", "A")]["knobs_differ"]["channels_last"] == {"B": False, "A": True}
    assert moved[(16, "A", "B")]["verdict"] is None
    assert moved[(1, "A", "B")]["verdict"] == "same config"
    assert moved[(1, "A", "B")]["knobs_shared"]["mode"] == "reduce-overhead"


# B's fastest at batch size 1 is reduce-overhead, over 3.00 and 3.08 ms; A's fastest,
# max-autotune, was measured on B in these processes.
@pytest.mark.parametrize("processes, verdict, words", [
    ([3.9, 4.0], "slower", "; slower beyond noise"),
    ([3.02, 3.1], "within noise", "; within noise of it"),
    ([3.1, 3.2], "undecided", "; undecided by noise (it ran in 2 processes there, the best "
                              "in 2, "),
])
def test_the_noise_verdict_and_the_knobs_on_synthetic_studies(tmp_path, processes, verdict,
                                                              words):
    fast = write_study(tmp_path, "h200", gpu="NVIDIA H200", speed=2.0)
    other = write_study(
        tmp_path, "l4", gpu="NVIDIA L4",
        changes={"inductor|reduce-overhead|dynamic=False|bs=1": {"latency_ms_p50": 3.0},
                 "inductor|max-autotune|dynamic=False|bs=1": {"latency_ms_p50": processes[0]}},
        columns={"inductor|reduce-overhead|dynamic=False|bs=1": {
            "latency_ms_p50_repeats": [3.0, 3.08]},
                 "inductor|max-autotune|dynamic=False|bs=1": {
            "latency_ms_p50_repeats": processes}})
    c = compare([fast, other])
    t = transfer(c, 1, "A", "B")
    assert t.label == "inductor:max-autotune" and t.target_best_label == "inductor:reduce-overhead"
    assert t.verdict == verdict
    # what using it there costs: the medians of its processes and of the best's there
    assert t.slowdown_vs_target_best == pytest.approx(sum(processes) / 2 / 3.04)
    assert t.knobs_differ == {"mode": {"A": "max-autotune", "B": "reduce-overhead"}}
    assert t.knobs_shared == {"backend": "inductor", "dynamic": False, "dtype": "float32",
                              "channels_last": False, "cudnn_benchmark": True}
    assert (t.name, t.target_best_name) == ("max-autotune", "reduce-overhead")
    text = render(c, width=400)  # a sentence a line
    line = next(x for x in text.splitlines() if x.startswith("  A's max-autotune on B"))
    assert words in line
    assert "  A's and B's fastest share backend=inductor, dynamic=False, dtype=float32, " \
        "channels_last=False, cudnn_benchmark=True; differ in mode (A max-autotune, " \
        "B reduce-overhead)" in text.splitlines()


@pytest.mark.parametrize("heading, pair", [
    ("For the\nresnet50 pair, the lines under each batch size's table:\n\n```\n", PAIR),
    ("the lines\nunder each batch size's table:\n\n```\n",
     [ROOT / "studies" / "h100-resnet50-bf16-extended-from-h200", PAIR[1]])])
def test_the_docs_excerpt_of_the_pair_is_the_real_output(heading, pair, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    page = (ROOT / "docs" / "examples.md").read_text()
    excerpt = page[page.index(heading):].split("```\n")[1].splitlines()
    out = CliRunner().invoke(main, ["compare", *map(str, pair)])
    assert out.exit_code == 0, out.output
    rest = iter(out.output.splitlines())  # the excerpt's lines, in the output's order
    assert len(excerpt) > 3 and all(line in rest for line in excerpt), excerpt
