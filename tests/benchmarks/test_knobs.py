"""benchmarks/knobs.py on a synthetic grid and screen written at test time (FakeRunner's records
with latencies and compile times set per config), so every figure of the page can be worked out
by hand."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import pytest

from benchmarks import knobs
from benchmarks.knob_catalogue import TorchSettings
from tests.support.synthetic import write_study
from tuner.domain.config import TrialConfig
from tuner.domain.records import Status
from tuner.domain.space import SearchSpace

SETTINGS = TorchSettings(
    "2.11.0", {"freezing": False, "epilogue_fusion": True, "combo_kernels": False,
               "benchmark_combo_kernel": False, "coordinate_descent_tuning": False},
    {"default": {}, "reduce-overhead": {"triton.cudagraphs": True},
     "max-autotune": {"max_autotune": True, "coordinate_descent_tuning": True}})
GRID = SearchSpace(("eager", "inductor"), ("default", "reduce-overhead"), (False,), (1,),
                   channels_last=(False, True),
                   options={"freezing": (False, True), "epilogue_fusion": (True, False)})


def grid_figures(config: TrialConfig) -> dict:
    """Reduce-overhead 1 ms, default 2 ms; freezing 5 % faster and 1.5x the compile,
    epilogue_fusion off 1 % slower, channels_last no change."""
    if config.backend == "eager":
        return {"latency_ms_p50": 5.0, "compile_s_cold": None}
    opts = config.option_dict
    ms = (1.0 if config.mode == "reduce-overhead" else 2.0) * (0.95 if opts["freezing"] else 1.0)
    ms *= 1.0 if opts["epilogue_fusion"] else 1.01
    return {"latency_ms_p50": ms, "compile_s_cold": 15.0 if opts["freezing"] else 10.0}


def write(root: Path, folder: str, name: str, space: SearchSpace, figures: dict, *,
          design: dict | None = None, fail: dict | None = None, drop: int = 0,
          configs: list[TrialConfig] | None = None, columns: dict | None = None) -> None:
    """The study ``folder/name`` (every config of ``space`` but the last ``drop``, or
    ``configs``), and the design file beside it: in a grid's or a sweep's folder, or in the
    screen's beside its arms."""
    configs = configs or space.configs()[:len(space.configs()) - drop]
    study = write_study(root / folder, name, trial_configs=configs,
                        meta={"space": space.to_dict()}, fail=fail, columns=columns,
                        changes={c.key: figures[c.key] for c in configs if c.key in figures})
    if design is not None:
        target = study if folder in ("landscapes", "sweeps") else study.parent
        (target / "design.json").write_text(json.dumps(design))


def arm(mode: str, options: dict) -> SearchSpace:
    return SearchSpace(("eager", "inductor"), (mode,), (False,), (1,), options=options)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """A whole grid, and a screen of three arms: combo_kernels (5 % faster), freezing (its
    base measured 2 % apart from combo_kernels' base) and plain max-autotune, whose config
    without coordinate descent ran past the compile budget."""
    tmp_path = tmp_path_factory.mktemp("benchmarks")
    design = {"settings": SETTINGS.to_dict()}
    write(tmp_path, "landscapes", "grid", GRID, {c.key: grid_figures(c) for c in GRID.configs()},
          design=design)
    combo = arm("reduce-overhead", {"combo_kernels": (False, True),
                                    "benchmark_combo_kernel": (False,)})
    freezing = arm("reduce-overhead", {"freezing": (False, True)})
    autotune = arm("max-autotune", {"coordinate_descent_tuning": (True, False)})
    eager = {"latency_ms_p50": 5.0}
    c0, c1, c2 = combo.configs()
    write(tmp_path, "screens/scr", "combo_kernels", combo, {
        c0.key: eager, c1.key: {"latency_ms_p50": 1.02, "compile_s_cold": 10.0},
        c2.key: {"latency_ms_p50": 0.969, "compile_s_cold": 12.0}})
    f0, f1, f2 = freezing.configs()
    write(tmp_path, "screens/scr", "freezing", freezing, {
        f0.key: eager, f1.key: {"latency_ms_p50": 1.0, "compile_s_cold": 10.0},
        f2.key: {"latency_ms_p50": 0.999, "compile_s_cold": 11.0}})
    a0, a1, a2 = autotune.configs()
    write(tmp_path, "screens/scr", "max_autotune_without_cdt", autotune, {
        a0.key: eager, a1.key: {"latency_ms_p50": 0.9, "compile_s_cold": 300.0}},
        fail={a2.key: Status.COMPILE_TIMEOUT},
        design={**design, "studies": {"combo_kernels": "combo_kernels", "freezing": "freezing",
                                      "max_autotune_without_cdt": "max_autotune_without_cdt"}})
    return tmp_path


def page(root: Path, out: Path) -> str:
    assert knobs.main(["--root", str(root), "--out", str(out)]) == 0
    return out.read_text()


@pytest.fixture(scope="module")
def text(root) -> str:
    """The page of ``root``."""
    return page(root, root / "knobs.md")


def test_the_page_ends_with_how_many_candidates_move_p50(root, tmp_path, capsys):
    text = page(root, tmp_path / "knobs.md")
    assert capsys.readouterr().out.strip() == text.rstrip().splitlines()[-1]
    # Measured: channels_last, freezing, epilogue_fusion (grid), combo_kernels and
    # max_autotune_without_cdt (screen). Moved: freezing (grid 0.95), combo_kernels (0.95).
    line = "knobs: 2 of 5 candidates move p50 by at least 2 % on at least one model"
    assert text.rstrip().splitlines()[-1] == line
    assert f"- **Result:** `{line}`" in text
    assert "- **Moved p50 by at least 2 %:** combo_kernels (resnet18 faster); freezing " \
           "(resnet18 faster)" in text


def test_each_knob_has_its_p50_and_compile_ratio_per_model_and_batch_size(text):
    grid = text[text.index("### Grids"):]
    assert "| candidate | resnet18 bs1 H200 |" in grid
    # 8 pairs each: 2 modes x 2 memory formats x the other option both ways.
    assert "| freezing | 0.950, 1.50x (8) |" in grid
    assert "| epilogue_fusion | 1.010, 1.00x (8) |" in grid
    assert "| channels_last | 1.000, 1.00x (8) |" in grid
    screen = text[text.index("### Screens"):text.index("### Grids")]
    assert "| combo_kernels | 0.950, 1.20x |" in screen
    assert "| freezing | 0.999, 1.10x |" in screen
    assert "| max_autotune_without_cdt | compile_timeout |" in screen


def test_a_whole_grid_gives_its_gain_over_the_best_plain_mode(text):
    # Best: reduce-overhead with freezing, 0.95 ms, 15 s; the best plain mode is max-autotune
    # from the screen, 0.9 ms, 300 s: the grid's best is 5.6 % slower, at 0.05x the compile.
    assert "gain over the best plain mode on grid: latency -5.6 %, cold compile 0.05 x" in text
    assert "- inductor:max-autotune with torch's settings: 0.9 ms, cold compile 300.0 s " \
           "(screen scr, median of 1)" in text
    assert "- inductor:reduce-overhead with torch's settings: 1 ms, cold compile 10.0 s " \
           "(grid)" in text


def test_without_a_faster_plain_mode_the_gain_is_the_grids_best_against_reduce_overhead(
        root, tmp_path):
    shutil.copytree(root, tmp_path / "copy")
    shutil.rmtree(tmp_path / "copy/screens/scr/max_autotune_without_cdt")
    text = page(tmp_path / "copy", tmp_path / "knobs.md")
    assert "gain over the best plain mode on grid: latency 5.0 %, cold compile 1.50 x" in text
    assert "- inductor:max-autotune: not measured at this model, GPU and batch size" in text


def test_a_grid_not_yet_whole_gives_no_gain(tmp_path):
    write(tmp_path, "landscapes", "part", GRID, {c.key: grid_figures(c) for c in GRID.configs()},
          design={"settings": SETTINGS.to_dict()}, drop=1)
    text = page(tmp_path, tmp_path / "knobs.md")
    assert "- part: 17 of 18 configs measured so far; its gain is given once the grid is " \
           "whole." in text
    assert "gain over the best plain mode" not in text


def test_the_base_measured_in_several_arms_is_the_noise_floor(text):
    assert "| scr | inductor:reduce-overhead with torch's settings, bs1 | 2 | 1.01 | 2.0 % |" \
        in text
    assert "| scr | eager, bs1 | 3 | 5 | 0.0 % |" in text


def test_a_study_without_torchs_settings_is_read_with_this_torchs(tmp_path):
    write(tmp_path, "landscapes", "old", GRID, {c.key: grid_figures(c) for c in GRID.configs()})
    text = page(tmp_path, tmp_path / "knobs.md")
    assert re.search(r"old has none, so this torch's \(\S+\) are used", text)
    assert "| freezing | 0.950, 1.50x (8) |" in text  # freezing is off in every torch so far


def test_the_recording_plan_names_each_unit_and_its_status(text):
    recording = text[text.index("## Recording"):]
    assert "| 1 | resnet50 sweep, batch sizes 1 and 16 | " \
           "`MODEL=resnet50 BATCH_SIZES=1,16 DESIGN=sweep bash scripts/gpu_landscape.sh` | 1 |" \
        in recording
    assert "| 10 | resnet50 screen, slow arms, batch size 16 | `MODEL=resnet50 BATCH_SIZES=16 " \
           "DESIGN=screen ARMS=slow bash scripts/gpu_landscape.sh` |" in recording
    assert "DESIGN=screen bash" not in recording  # the cheap screens: the sweeps measure them
    assert "`MODEL=tuner.examples:text_transformer BATCH_SIZES=16 DESIGN=grid bash" in recording
    assert "| not started |" in recording
    assert "- **Still to record:** resnet50, vit_b_16, text_transformer" in text


def test_no_study_is_a_one_line_error(tmp_path, capsys):
    assert knobs.main(["--root", str(tmp_path), "--out", str(tmp_path / "k.md")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: no grid, sweep or screen under") and len(err.strip().splitlines()) == 1


def test_a_units_status_counts_what_its_studies_hold(tmp_path):
    # The resnet50 slow screen at batch size 16 (unit 10) with its gemm_search arm whole, made
    # by a torch without persistent TMA matmul; the resnet50 grid at batch size 16 (unit 4)
    # whole in its own space.
    screen = "screens/resnet50-bf16-bs16-h100"
    gemm = SearchSpace(("eager", "inductor"), ("reduce-overhead",), (False,), (16,),
                       options={"max_autotune_gemm": (False, True),
                                "max_autotune_gemm_backends": ("ATEN,TRITON",)})
    write(tmp_path, screen, "gemm_search", gemm, {}, design={
        "settings": SETTINGS.to_dict(), "studies": {"gemm_search": "gemm_search"},
        "left_out": ["skipped persistent_tma_matmul: torch 2.11.0 has no inductor option "
                     "triton.enable_persistent_tma_matmul"]})
    write(tmp_path, "landscapes", "resnet50-bf16-bs16-h100", GRID, {},
          design={"settings": SETTINGS.to_dict()})
    rows = statuses(page(tmp_path, tmp_path / "knobs.md"))
    # Unit 10 plans 5 arms of 3 configs; without persistent_tma_matmul's, 12; gemm_search's 3.
    assert rows[10] == "3 of 12 configs" and rows[4] == "whole" and rows[5] == "not started"


def statuses(text: str) -> dict[int, str]:
    """The status of each unit of the page's "Recording" table, by its number."""
    return {int(m.group(1)): m.group(2) for m in
            re.finditer(r"^\| (\d+) \|.*\| ([^|]+) \|$", text, re.M)}


def sweep_page(tmp_path: Path, base_p50s: list[float] | None = None) -> tuple[str, str]:
    """A sweep's page, and the sweep's name. A torch that benchmarks combo kernels: the sweep's
    combo_kernels config holds benchmark_combo_kernel=False, which only it sets. Base 2 ms,
    10 s (``base_p50s``: its p50 in each of several processes); freezing 1.8 ms, 13 s; combo_kernels
    2.06 ms, 10 s; cudagraph_trees off fails to compile; a config of the union outside the
    plan (freezing and combo_kernels) is left out whatever it measured."""
    settings = TorchSettings("2.12.0", {**SETTINGS.options, "benchmark_combo_kernel": True,
                                        "triton.cudagraph_trees": True}, SETTINGS.modes)
    union = SearchSpace(("eager", "inductor"), ("reduce-overhead",), (False,), (1,), options={
        "freezing": (False, True), "combo_kernels": (False, True),
        "benchmark_combo_kernel": (True, False), "triton.cudagraph_trees": (True, False)})
    eager, base = union.baselines()

    def knobs(**options) -> TrialConfig:
        return dataclasses.replace(base, options=tuple({**base.option_dict, **options}.items()))

    freezing, combo = knobs(freezing=True), knobs(combo_kernels=True, benchmark_combo_kernel=False)
    trees = knobs(**{"triton.cudagraph_trees": False})
    both = knobs(freezing=True, combo_kernels=True)
    name = "resnet50-bf16-bs1-16-h100"  # unit 1 of "Recording"
    write(tmp_path, "sweeps", name, union, {
        eager.key: {"latency_ms_p50": 5.0},
        base.key: {"latency_ms_p50": 2.0, "compile_s_cold": 10.0},
        freezing.key: {"latency_ms_p50": 1.8, "compile_s_cold": 13.0},
        combo.key: {"latency_ms_p50": 2.06, "compile_s_cold": 10.0},
        both.key: {"latency_ms_p50": 1.0, "compile_s_cold": 10.0}},
        configs=[eager, base, freezing, combo, trees, both],
        fail={trees.key: Status.COMPILE_ERROR}, design={
            "design": "sweep", "settings": settings.to_dict(),
            "planned": {name: [c.key for c in (eager, base, freezing, combo, trees)]}},
        columns={base.key: {"latency_ms_p50_repeats": base_p50s}} if base_p50s else None)
    assert len(union.configs()) == 17
    return page(tmp_path, tmp_path / "knobs.md"), name


def sweep_table(text: str) -> list[str]:
    table = text[text.index("### Sweeps: the knob alone on reduce-overhead, one study"):]
    return table[:table.index("\n\n", table.index("|"))].splitlines()[2:]


def test_a_sweep_gives_each_knob_against_the_base_at_its_batch_size(tmp_path):
    # freezing 0.900, 1.30x; combo_kernels 1.030, 1.00x
    text, name = sweep_page(tmp_path)
    assert sweep_table(text) == ["| candidate | resnet18 bs1 H200 |", "|---|---:|",
                                 "| freezing | 0.900, 1.30x |",
                                 "| combo_kernels | 1.030, 1.00x |",
                                 "| cudagraph_trees | compile_error |"]
    assert f"1 sweep(s) ({name})" in text
    line = "knobs: 2 of 3 candidates move p50 by at least 2 % on at least one model"
    assert text.rstrip().splitlines()[-1] == line
    assert "- **Moved p50 by at least 2 %:** combo_kernels (resnet18 slower); freezing " \
           "(resnet18 faster)" in text
    # The five planned configs have their rows (not the union's 17); the base has one process.
    assert statuses(text)[1] == "every config; the bases' noise floor left"
    assert "No sweep has measured its bases in several processes yet." in text


def test_a_knob_within_the_bases_processes_is_noise_and_moves_nothing(tmp_path):
    # The base in three processes, 1.9, 2.0 and 2.2 ms: combo_kernels' 2.06 ms lies among them;
    # freezing's 1.8 ms is faster than every one. Ratios are to their median, 2.0 ms.
    text, name = sweep_page(tmp_path, [2.0, 1.9, 2.2])
    assert sweep_table(text) == ["| candidate | resnet18 bs1 H200 |", "|---|---:|",
                                 "| freezing | 0.900, 1.30x |",
                                 "| combo_kernels | 1.030, 1.00x, noise |",
                                 "| cudagraph_trees | compile_error |"]
    assert text.rstrip().splitlines()[-1] == \
        "knobs: 1 of 3 candidates move p50 by at least 2 % on at least one model"
    assert "- **Moved p50 by at least 2 %:** freezing (resnet18 faster)" in text
    assert f"| {name} | inductor:reduce-overhead, bs1 | 3 | 1.9-2.2 | 15.0 % |" in text
    assert statuses(text)[1] == "whole"
