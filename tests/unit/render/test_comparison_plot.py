"""``tuner compare --plot``: one panel per batch size, both studies in each, every config a
number beside its point and a line of the key; no label over another, drawn without a
matplotlib warning."""

from __future__ import annotations

import importlib.util

import pytest

from tests.support import ROOT
from tests.support.plots import collisions, labels, panels, png_size
from tests.support.synthetic import configs, write_study
from tuner.render.comparison_plot import figure, plot
from tuner.use.compare import compare

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                 reason="matplotlib is not installed: tuner compare --plot "
                                        "needs it"),
              pytest.mark.filterwarnings("error")]  # "constrained_layout not applied", say

H100 = ROOT / "studies" / "h100-resnet50-bf16-extended"
H200 = ROOT / "studies" / "h200-resnet50-bf16-extended"


@pytest.fixture(scope="module")
def gpus():
    return compare([H100, H200])


def test_the_h100_h200_plot_has_a_panel_per_batch_size_with_both_studies(gpus):
    fig = figure(gpus)
    assert [ax.get_title() for ax in panels(fig)] == ["batch size 1", "batch size 16"]
    for ax in panels(fig):
        assert len(ax.collections) == 2  # each study's points, in its colour and marker
        assert len(ax.lines) == 2  # and its front
        assert len({tuple(c.get_facecolor()[0]) for c in ax.collections}) == 2
        assert len({c.get_paths()[0].vertices.tobytes() for c in ax.collections}) == 2
        box = ax.get_position()
        assert box.width > 0.35 and box.height > 0.4  # not squeezed into a strip
    studies = [t.get_text() for t in fig.legends[0].get_texts()]
    assert studies == [
        "A  h100-resnet50-bf16-extended: NVIDIA H100 80GB HBM3 (cc 9.0), torch 2.11.0+cu130, "
        "CUDA 13.0",
        "B  h200-resnet50-bf16-extended: NVIDIA H200 (cc 9.0), torch 2.11.0+cu130, CUDA 13.0"]


def test_each_config_has_one_number_in_every_panel_and_a_line_of_the_key(gpus):
    fig = figure(gpus)
    key = [t.get_text() for t in fig.legends[1].get_texts()]
    numbers = [line.split("  ", 1)[0] for line in key]
    assert numbers == [str(n) for n in range(1, len(key) + 1)]
    names = {p.name for by_bs in gpus.fronts.values() for points in by_bs.values()
             for p in points}
    assert "reduce-overhead +channels_last -epilogue_fusion -shape_padding" in names
    assert {line.split("  ", 1)[1] for line in key} == names and len(key) == len(names)
    assert {n for ax in panels(fig) for n in labels(ax)} == set(numbers)
    # A config on both studies' fronts (reduce-overhead's defaults at batch size 1) carries
    # its number in both colours.
    both = [t.get_color() for t in panels(fig)[0].texts if t.get_text() == "1"]
    assert len(both) == 2 and len(set(both)) == 2


def test_no_number_covers_another_or_a_marker_at_the_committed_studies_sizes(gpus):
    assert collisions(figure(gpus)) == []
    vit = compare([ROOT / "studies" / "h100-vit_b_16-bf16-extended",
                   ROOT / "studies" / "h200-vit_b_16-bf16-extended"])
    assert collisions(figure(vit)) == []
    three = compare([ROOT / "studies" / "h200-resnet50-bf16", H100, H200])
    assert collisions(figure(three)) == []


def test_the_png_is_written_at_150_dpi(gpus, tmp_path):
    inches = figure(gpus).get_size_inches()
    pixels = png_size(plot(gpus, tmp_path / "fronts.png"))
    assert all(abs(p - i * 150) < 1 for p, i in zip(pixels, inches))  # matplotlib truncates


def test_more_than_three_batch_sizes_wrap_to_a_second_row(tmp_path):
    sizes = (1, 8, 16, 32)
    c = compare([write_study(tmp_path, "fast", trial_configs=configs(sizes), speed=2.0),
                 write_study(tmp_path, "slow", trial_configs=configs(sizes))])
    fig = figure(c)
    shown = panels(fig)
    assert [ax.get_title() for ax in shown] == [f"batch size {bs}" for bs in sizes]
    tops = [round(ax.get_position().y1, 3) for ax in shown]
    assert tops[0] == tops[1] == tops[2] > tops[3]
    assert collisions(fig) == []
