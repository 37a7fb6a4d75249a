"""``tuner check``: does a study's recommendation warm-start on this machine, as production would?"""

from __future__ import annotations

import json
import sys

import click

from tuner.cli.errors import user_errors
from tuner.cli.options import (
    CONTEXT,
    json_option,
    recommend_options,
    study_argument,
    study_path,
    timeout_option,
)
from tuner.cli.read import recommend_errors


@click.command(context_settings=CONTEXT,
               short_help="Check that a recommendation warm-starts here, as the study saw it.")
@study_argument
@recommend_options
@timeout_option
@json_option
@user_errors
def check(study, studies_dir, batch_size, objective, max_vram_gb, max_compile_s,
          max_latency_ms, max_p99_ms, timeout_s, as_json) -> None:
    """Check that the recommendation of a study warm-starts on this machine, as production
    code would load it, and gives the study's output.

    In a fresh process with empty inductor and Triton caches: tuner.recommend with these
    options, apply() on the study's model (built as its trials built it, on the study's
    device), one call, then calls timed per request. One line each: where the compile
    artifacts came from (compile artifacts are code: loading them unpickles torch's cached
    graphs, and the first call runs the Python inductor generated), the warm start (what
    loaded, what the first call compiled, against the study's cold and warm compile), why it
    missed, the output against the study's eager reference, and p50 per request against the
    study's. Exit 0 when it warm-starts and the output matches, 1 when not.

    \b
    Examples:
      tuner check studies/resnet50-h200 --batch-size 1
      tuner check studies/resnet50-h200 --batch-size 16 --json | jq .reasons
    """
    from tuner.use.check import check as check_

    with recommend_errors():
        found = check_(study_path(study, studies_dir), timeout_s=timeout_s,
                       batch_size=batch_size, objective=objective, max_vram_gb=max_vram_gb,
                       max_compile_s=max_compile_s, max_latency_ms=max_latency_ms,
                       max_p99_ms=max_p99_ms)
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2, default=str))
    else:
        click.echo("\n".join(found.lines()))
    if not found.passed:
        sys.exit(1)
