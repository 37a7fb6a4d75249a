"""What a trial process's first eager call costs on a GPU, and why.

    python benchmarks/first_call.py [--model resnet50] [--dtype bfloat16] [--batch-size 1] \
        [--out benchmarks/results/first_call.md]

A pre-started trial of resnet50 on the H200 still spent 1.1-1.75 s in its eager reference
(benchmarks/results/trial_overhead-h200.md, its earlier runs), the reference itself kept from an earlier trial: that is
the process's first call of the model on the device. Each variant here is one fresh process
that builds the model on the CPU, moves it to the GPU (CUDA started: ``to_device``), then
times, synchronised: an optional call of one small conv and one matmul (``libraries``: loads
cuDNN and cuBLAS, nothing of this model's shapes), the model's first call, and its second.

- ``benchmark``: torch.backends.cudnn.benchmark on, as a workload has it by default: the first
  call tries cuDNN's algorithms for each of the model's conv shapes;
- ``no-benchmark``: off: cuDNN's heuristics choose;
- ``benchmark, libraries first``: on, with the small calls first.

If ``first`` is mostly ``benchmark`` against ``no-benchmark``, the cost is cuDNN trying
algorithms for this model's shapes, which any process running it pays once; if the small calls
take most of it, it is loading the libraries.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path

VARIANTS = {"benchmark": (True, False), "no-benchmark": (False, False),
            "benchmark, libraries first": (True, True)}

CHILD = r"""
import json, sys, time
import torch, torchvision
model_name, dtype, batch, benchmark, libraries = sys.argv[1:6]
dtype = getattr(torch, dtype)
torch.backends.cudnn.benchmark = benchmark == "1"
model = torchvision.models.get_model(model_name).eval()
x = torch.randn(int(batch), 3, 224, 224)

def timed(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t

out = {}
def move():
    global model, x
    model = model.to("cuda", dtype)
    x = x.to("cuda", dtype)
t = time.perf_counter()
move()
torch.cuda.synchronize()
out["to_device"] = time.perf_counter() - t
with torch.no_grad():
    if libraries == "1":
        conv = torch.nn.Conv2d(3, 8, 3).to("cuda", dtype)
        a = torch.randn(64, 64, device="cuda", dtype=dtype)
        out["libraries"] = timed(lambda: (conv(torch.randn(1, 3, 16, 16, device="cuda", dtype=dtype)), a @ a))
    out["first"] = timed(lambda: model(x))
    out["second"] = timed(lambda: model(x))
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    rows = []
    for repeat in range(args.repeats):
        for name, (benchmark, libraries) in VARIANTS.items():
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, args.model, args.dtype, str(args.batch_size),
                 str(int(benchmark)), str(int(libraries))],
                capture_output=True, text=True, check=True)
            row = {"variant": name, "repeat": repeat, **json.loads(proc.stdout.splitlines()[-1])}
            rows.append(row)
            print(row, file=sys.stderr)
    columns = ["to_device", "libraries", "first", "second"]
    lines = [f"# first eager call, {datetime.date.today()}, "
             f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}", "",
             f"`python benchmarks/first_call.py --model {args.model} --dtype {args.dtype} "
             f"--batch-size {args.batch_size}`: one fresh process per row; seconds.", "",
             "| variant | repeat | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for row in rows:
        cells = [f"{row[c]:.3f}" if c in row else "" for c in columns]
        lines.append(f"| {row['variant']} | {row['repeat']} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
