"""For the tests of benchmarks/record_knobs.py: torch's settings as a test states them, and the
searches a recording starts, run in this process (FakeRunner behind them, with the fake_cli
fixture) instead of in processes of their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from click.testing import CliRunner

from benchmarks import record_knobs, sweep_search
from benchmarks.knob_catalogue import TorchSettings
from tuner.cli.app import main as tuner_main

# Torch's values as a test states them (the GPU machine's torch is read there, not here).
OPTIONS = {"freezing": False, "combo_kernels": False, "benchmark_combo_kernel": False,
           "conv_1x1_as_mm": False, "layout_optimization": True, "epilogue_fusion": True,
           "shape_padding": True, "coordinate_descent_tuning": False,
           "triton.cudagraph_trees": True, "max_autotune_gemm": False,
           "max_autotune_gemm_backends": "ATEN,TRITON,CPP",
           "triton.enable_persistent_tma_matmul": False}
MODES = {"default": {}, "reduce-overhead": {"triton.cudagraphs": True},
         "max-autotune": {"max_autotune": True, "triton.cudagraphs": True,
                          "coordinate_descent_tuning": True}}
SETTINGS = TorchSettings("2.11.0", OPTIONS, MODES)


def in_process(calls: list[list[str]]) -> Callable[[Sequence[str], float], int]:
    """A search as record_knobs starts one (Python's arguments: ``-m tuner search ...``, or
    ``.../sweep_search.py --queue FILE search ...``), run in this process, quiet; each call's
    arguments are appended to ``calls``."""
    def search(args: Sequence[str], timeout_s: float) -> int:
        calls.append(list(args))
        if list(args[:2]) == ["-m", "tuner"]:
            return CliRunner().invoke(tuner_main, [*args[2:], "-q"]).exit_code
        assert args[0].endswith("sweep_search.py"), args
        return sweep_search.main([*args[1:], "-q"])
    return search


def record(tmp_path: Path, repo: Path, calls: list[list[str]], *args: str,
           batch_sizes: str = "1", model: str = "resnet50") -> tuple[int, str]:
    """One GPU call of record_knobs on an H100 with :data:`SETTINGS` (its work folder under
    ``tmp_path``, the studies it resumes under ``repo``), the searches :func:`in_process`:
    its exit code and its archive."""
    out = tmp_path / "out" / "knobs.tgz"
    code = record_knobs.main(["--model", model, "--batch-sizes", batch_sizes, "--work",
                              str(tmp_path / "work"), "--repo", str(repo), "--out", str(out),
                              *args], search=in_process(calls), settings=SETTINGS, gpu="h100")
    return code, str(out)
