"""``tuner plot --out``: a folder of PNG files, or one file (.png, .svg, .pdf) holding every
plot of the study, one below the other."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import ROOT
from tests.support.plots import collisions, labels, panels, png_size
from tests.support.synthetic import write_study
from tuner.cli.app import main
from tuner.domain.config import TrialConfig

pytestmark = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None,
                                reason="matplotlib is not installed: tuner plot needs it")


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """Batch sizes 1 and 8, six rows each over two dtypes: a front and importances at each."""
    trial_configs = [TrialConfig("eager", bs, dtype=dtype) if mode is None else
                     TrialConfig("inductor", bs, mode, False, dtype=dtype)
                     for bs in (1, 8) for dtype in ("float32", "bfloat16")
                     for mode in (None, "default", "reduce-overhead")]
    return write_study(tmp_path_factory.mktemp("studies"), "two", trial_configs=trial_configs,
                       changes={c.key: {"latency_ms_p50": (1 + i) * (3 if c.dtype == "float32"
                                                                      else 1)}
                                for i, c in enumerate(trial_configs)})


def plot(*args: str):
    return CliRunner().invoke(main, ["plot", *args])


def test_out_a_png_file_writes_every_plot_in_it_one_below_the_other(study, tmp_path):
    folder = plot(str(study), "--out", str(tmp_path / "plots"))
    assert folder.exit_code == 0, folder.output
    figures = [Path(p) for p in folder.stdout.splitlines()]
    assert [p.name for p in figures] == ["two-pareto-bs1.png", "two-pareto-bs8.png",
                                         "two-importance-bs1.png", "two-importance-bs8.png"]
    out = plot(str(study), "--out", str(tmp_path / "fronts.png"))
    assert out.exit_code == 0, out.output
    assert out.stdout == f"{tmp_path / 'fronts.png'}\n"
    assert (tmp_path / "fronts.png").is_file()
    width, height = png_size(tmp_path / "fronts.png")
    sizes = [png_size(p) for p in figures]
    assert width == max(w for w, _ in sizes)
    assert abs(height - sum(h for _, h in sizes)) <= len(sizes)  # rounding, a pixel a figure
    # Again, over the file it wrote.
    assert plot(str(study), "--out", str(tmp_path / "fronts.png")).exit_code == 0


@pytest.mark.parametrize("name, start", [("fronts.svg", b"<?xml"), ("fronts.pdf", b"%PDF"),
                                         ("FRONTS.PNG", b"\x89PNG")])
def test_out_an_svg_or_pdf_file_writes_that_format(study, tmp_path, name, start):
    out = plot(str(study), "--out", str(tmp_path / name), "--json")
    assert out.exit_code == 0, out.output
    assert (tmp_path / name).read_bytes().startswith(start)
    assert list(tmp_path.iterdir()) == [tmp_path / name]


def test_out_a_file_in_a_folder_that_does_not_exist_is_a_one_line_error(study, tmp_path):
    out = plot(str(study), "--out", str(tmp_path / "no" / "such" / "fronts.png"))
    assert out.exit_code == 1
    assert out.output == (f"Error: cannot write plot {tmp_path / 'no' / 'such' / 'fronts.png'}: "
                          f"its folder {tmp_path / 'no' / 'such'} does not exist\n")
    assert list(tmp_path.iterdir()) == []


def test_out_another_image_format_is_a_one_line_error(study, tmp_path):
    out = plot(str(study), "--out", str(tmp_path / "fronts.jpg"))
    assert out.exit_code == 1
    assert out.output == (f"Error: cannot write plots to {tmp_path / 'fronts.jpg'}: tuner plot "
                          "writes a .png, .svg or .pdf file, or a folder of PNG files\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.filterwarnings("error")  # "constrained_layout not applied", say
@pytest.mark.parametrize("name", ["h200-resnet50-bf16-extended", "h100-vit_b_16-bf16-extended"])
def test_a_committed_study_s_fronts_number_their_points_with_no_label_over_another(name):
    from tuner.data import files
    from tuner.data.select import eligible, pareto
    from tuner.render.plots import front_figure

    trials, _ = files.read(ROOT / "studies" / name)
    front = set(pareto(trials)["trial_number"])
    for bs, rows in eligible(trials).groupby("batch_size"):
        fig = front_figure(name, int(bs), rows, front, 0)
        assert collisions(fig) == []
        key = [t.get_text() for t in fig.legends[0].get_texts()]
        numbered = {line.split("  ", 1)[0] for line in key if line.startswith("#")}
        assert all(set(labels(ax)) == numbered for ax in panels(fig))
        assert all(ax.get_position().height > 0.4 for ax in panels(fig))
