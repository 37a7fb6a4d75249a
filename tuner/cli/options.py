"""What the commands share: the types of their option values, the options and arguments several
of them take (declared once, applied as decorators), and where a value came from (the command
line, a variable, a --space file)."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tuner.cli.errors import SPACE_FILE_META
from tuner.domain.layout import STUDIES_DIR
from tuner.errors import UserError
from tuner.files import NOT_UTF8, not_utf8

if TYPE_CHECKING:
    from tuner.domain.space_file import SpaceFile

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
CONFIRM_REPEATS = "auto"  # tuner.study.finalists.DEFAULT_REPEATS, without importing pandas for --help


class Number(click.FloatRange):
    """A float in a range that is also finite: nan passes every comparison of a plain
    FloatRange, and inf means nothing as a limit, a window or a size."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class GivenPath(click.Path):
    """A path that is not empty: ``--plot ""`` would otherwise write ``.png`` in the current
    folder and say it wrote ``.``."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty: give a path", param, ctx)
        if isinstance(value, str) and not_utf8(value):
            self.fail(f"{value!r} {NOT_UTF8}", param, ctx)
        return super().convert(value, param, ctx)


def positive_number() -> Number:
    """A finite number above zero (a limit of zero GiB or seconds admits nothing)."""
    return Number(min=0, min_open=True)


class Duration(click.ParamType):
    """``8h``, ``30m``, ``1h30m``, ``90s`` or plain seconds, as seconds; with ``none_ok``, also
    ``none`` (no limit), as None."""

    name = "DURATION"

    def __init__(self, none_ok: bool = False) -> None:
        self.none_ok = none_ok

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float | None:
        if isinstance(value, (int, float)):
            return float(value)
        if self.none_ok and isinstance(value, str) and value.strip().lower() == "none":
            return None
        try:
            return parse_duration(value)
        except UserError as exc:  # one line, as every other bad input
            name = param.opts[0] if param is not None and param.opts else ""
            text = f"{name} {exc}".strip() + (", or none for no limit" if self.none_ok else "")
            raise click.ClickException(text) from None


def parse_duration(text: str) -> float:
    """``8h``, ``30m``, ``1h30m``, ``90s`` or plain seconds → seconds."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = re.findall(r"(\d+(?:\.\d+)?)([hms])", text)
        units = [u for _, u in parts]
        # Each unit once, largest first: 1h1h (2 h?) and 30s30m are typos, not sums.
        if not parts or "".join(n + u for n, u in parts) != text or \
                units != sorted(set(units), key="hms".index):
            raise UserError(f"cannot read duration {text!r}: use e.g. 8h, 30m, 1h30m or 90s")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
    if not math.isfinite(seconds):  # 400 digits are inf as a float: no resume could ask it again
        shown = text if len(text) <= 24 else f"{text[:12]}...{text[-6:]}"
        raise UserError(f"duration {shown!r} is too long: use e.g. 8h, 30m or 90s")
    if seconds <= 0:
        # A zero budget would silently mean "no budget", a zero timeout kill every trial.
        raise UserError(f"duration {text!r} is not more than zero: use e.g. 8h, 30m or 90s")
    return seconds


def study_path(study: str, studies_dir: Path) -> Path:
    """A study folder, a Parquet file, or a study name under --studies-dir. Not a study's
    pareto.parquet (:func:`tuner.data.files.refuse_front_only`)."""
    from tuner.data.files import check_path, refuse_front_only
    from tuner.study.joined import EMPTY_STUDY

    if not study.strip():  # Path("") is the working folder
        raise UserError(EMPTY_STUDY)
    path = check_path(Path(study))
    if not path.exists() and (studies_dir / study).exists():
        return studies_dir / study
    if not path.exists() and len(path.parts) == 1 and path.suffix != ".parquet":
        # A study name: one run with --storage on another host has no files here until a worker
        # writes them.
        raise UserError(f"no study {study!r} in {studies_dir} (nor a file of that name); for a "
                        f"study kept in a --storage database, `tuner worker --study {study} "
                        f"--storage URL --export-only` writes its files there")
    refuse_front_only(path)
    return path


# Options several commands take, declared once.
studies_dir_option = click.option(
    "--studies-dir", type=GivenPath(file_okay=False, path_type=Path), default=STUDIES_DIR,
    show_default=True, help="The folder that holds the study folders.")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the result as JSON on stdout.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")


def format_option(*choices: str, more: str = "") -> Callable[[Any], Any]:
    """``--format`` (table first, the default) of a reading command; ``--json`` is
    ``--format json`` (:func:`output_format`)."""
    return click.option(
        "--format", "fmt", type=click.Choice(list(choices)), default=choices[0],
        show_default=True, help="table for people, json for scripts (same as --json, which no "
                                f"other format combines with){more}.")


def output_format(fmt: str, as_json: bool) -> str:
    """The format asked for: ``--json`` is ``--format json``; given with another ``--format``
    on the command line, it is refused by name."""
    if not as_json or fmt == "json":
        return fmt
    if click.get_current_context().get_parameter_source("fmt") in (
            click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT):
        raise click.UsageError(f"--json and --format {fmt} cannot be combined: --json is "
                               "--format json; give one of them")
    return "json"
timeout_option = click.option(
    "--timeout", "timeout_s", type=Duration(), default="30m", show_default=True,
    help="Kill a trial process that has not finished after this long, e.g. 20m, 90s or 1h30m; "
         "a bare number is seconds.")
# The figures the default is chosen from: compile_s_cold of the committed H200 studies and
# landscape (torch 2.11), and the max-autotune timeouts of studies/h200-resnet18
# (docs/examples.md).
compile_timeout_option = click.option(
    "--compile-timeout", "compile_timeout_s", type=Duration(none_ok=True), default="5m",
    show_default=True,
    help="Budget for a trial's first (compiling) call, e.g. 10m, apart from --timeout: past "
         "it the trial's process group is killed and its row says compile_timeout. 5m lets the default and "
         "reduce-overhead compiles of the H200 studies in this repository finish (6-34 s) and "
         "stops max-autotune of resnet18, which had no result after 380 s there, at 5 minutes "
         "instead of "
         "--timeout. none: no budget. Stored with the study "
         "(a resume must ask the same); a study made before the option has none.")
prestart_option = click.option(
    "--prestart/--no-prestart", default=None,
    help="Fork the next trial's process from a template that imported torch once, and have "
         "it build the model on the CPU while a trial compiles: no trial imports; still one "
         "process per trial. Default: on. With the device readied ahead (the default; "
         "TUNER_PREWARM=0 turns that off) it cut the tuner's own time per trial from 12.1 s to "
         "0.45 s (resnet50 bf16) and 11.2 s to 0.25 s (a factory model) on the H200, and from "
         "3.0 s to 0.13 s on a 2-core CPU box. --no-prestart: a fresh process per trial, "
         "importing (docs/prestart.md).")


# The scopes of tuner.domain.config.COMPILE_SCOPES (tuner.runtime.regions: regional)
compile_scope_option = click.option(
    "--compile-scope", "compile_scopes", multiple=True, metavar="SCOPE,...",
    help="What torch.compile compiles (compiled backends only): whole, the model as "
         "torch.compile(model); or regional, each block of the model's largest list of "
         "repeated blocks (an nn.ModuleList or nn.Sequential of one class; a factory may name "
         "it, docs/your-model.md), compiled in place while the rest runs eager: torch compiles "
         "the block once and reuses it for each, so the cold compile is shorter. whole,regional "
         "searches both. Default: whole. A model without repeated blocks: its regional trials "
         "fail as compile_error, saying so.")


# Where the study holds that eager failed (tuner.study.broken), a resume skips the batch size.
retry_failed_option = click.option(
    "--retry-failed", is_flag=True,
    help="Measure eager again at the batch sizes where the study holds that it crashed, ran "
         "out of memory or hit a CUDA error (a resume skips them otherwise): after fixing the "
         "model, or freeing the GPU.")
SEED = click.IntRange(0, 2**32 - 1)  # what numpy, under Optuna's sampler, accepts


def together(*decorators: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Several decorators as one, applied as if stacked in this order (the first on top)."""
    def apply(fn: Any) -> Any:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn
    return apply


# The last options of each measuring command, and the first of each reading one.
output_options = together(json_option, quiet_option)
study_argument = together(click.argument("study"), studies_dir_option)


def trials_option(what: str) -> Callable[[Any], Any]:
    return click.option("--trials", "n_trials", type=click.IntRange(min=1), help=what)


def budget_option(what: str) -> Callable[[Any], Any]:
    return click.option("--budget", "budget_s", type=Duration(), help=what)


def seed_option(what: str, default: int | None = None) -> Callable[[Any], Any]:
    shown: dict[str, Any] = {} if default is None else {"default": default, "show_default": True}
    return click.option("--seed", type=SEED, help=what, **shown)


def storage_option(what: str) -> Callable[[Any], Any]:
    return click.option("--storage", envvar="TUNER_STORAGE", metavar="URL", help=what,
                        callback=_lasting_storage)


def _lasting_storage(ctx: click.Context, param: click.Parameter, url: str | None) -> str | None:
    """A storage URL that outlives the command, from --storage or TUNER_STORAGE (an error names
    the one the user gave)."""
    if url is None:
        return None
    from tuner.study.redact import redact

    from_env = ctx.get_parameter_source(str(param.name)) == click.core.ParameterSource.ENVIRONMENT
    problem = _storage_problem(url, "unset TUNER_STORAGE" if from_env else "leave --storage out")
    if problem is None:
        return url
    if from_env:
        raise click.UsageError(f"TUNER_STORAGE={redact(url)!r} {problem}", ctx)
    raise click.BadParameter(f"{redact(url)!r} {problem}" if url.strip() else problem, ctx, param)


def _storage_problem(url: str, or_else: str) -> str | None:
    """What is wrong with ``url`` as a study's storage, ending in what to do (``or_else``: how
    to do without it); None where nothing is. An in-memory SQLite database is gone when the
    command ends, so the study could not be resumed, confirmed or joined."""
    if not url.strip():
        return f"is empty: give a URL, or {or_else}"
    scheme, sep, rest = url.partition("://")
    database = rest.partition("?")[0]
    if sep and scheme.partition("+")[0].lower() == "sqlite" and (
            database in ("", "/", "/:memory:") or "mode=memory" in rest):
        return ("is an in-memory SQLite database, gone when the command ends: give a file, e.g. "
                f"sqlite:///path/study.db, or {or_else}")
    from tuner.study.redact import password_of

    secret = password_of(url)
    if secret is not None and ("@" in secret or "/" in secret):
        # SQLAlchemy would end the password at its first @ and print the rest as the host.
        return ("has a password that holds an unescaped '@' or '/': percent-encode them (@ is "
                "%40, / is %2F)")
    return None


# The limits of tuner.data.select.Constraints: `recommend` filters by them, `search` makes them
# the sampler's constraints.
def max_vram_gb_option(what: str) -> Callable[[Any], Any]:
    return click.option("--max-vram-gb", type=positive_number(), help=what)


def max_compile_s_option(what: str) -> Callable[[Any], Any]:
    return click.option("--max-compile-s", type=positive_number(), help=what)


SAMPLERS = ("tpe", "nsga2", "nsga3", "gp", "random")  # tuner.study.sampler.SAMPLERS, without importing optuna


def user_gave(ctx: click.Context, name: str) -> bool:
    """Whether the user gave the parameter ``name``, on the command line or in its variable."""
    return ctx.get_parameter_source(name) in (click.core.ParameterSource.COMMANDLINE,
                                              click.core.ParameterSource.ENVIRONMENT)


# The file's key -> the parameter of `tuner search` it stands for, where they differ.
_PARAMETER_OF = {"dtypes": "dtype"}


def with_space_file(path: Path) -> SpaceFile:
    """The space file's values, less those of the options given on the command line: they win.
    Its lists stay typed as the file gave them, so a file's item is never split at a comma."""
    from tuner.domain.space_file import OPTIONS, read_space_file

    ctx = click.get_current_context()
    from_file = read_space_file(path)
    given = {key: None for key in OPTIONS if user_gave(ctx, _PARAMETER_OF.get(key, key))}
    kept = dataclasses.replace(from_file, **given)
    taken = {option: key for key, option in OPTIONS.items() if getattr(kept, key) is not None}
    ctx.meta[SPACE_FILE_META] = (path, taken)  # for the errors about these values (user_errors)
    return kept


# What `recommend` and `check` choose by: the batch size, the objective and the limits.
OBJECTIVES = ("latency", "throughput", "memory", "warmup", "traffic")  # tuner.data.select's
recommend_options = together(
    click.option("--batch-size", type=click.IntRange(min=1),
                 help="Batch size to serve; needed when the study measured several "
                      "(except with --objective throughput, which may choose it)."),
    click.option("--objective", type=click.Choice(OBJECTIVES), default="latency",
                 show_default=True,
                 help="What to optimise. traffic: the least time on the study's "
                      "--shape-schedule, recompiles included (dynamic shapes compared on your "
                      "traffic)."),
    max_vram_gb_option("Most memory (GiB) the config may need, compile and warm-up included."),
    max_compile_s_option("Longest first (compiling) call, in seconds; eager compiles nothing."),
    click.option("--max-latency-ms", type=positive_number(),
                 help="Slowest p50 per request allowed (a finalist measured again: its median "
                      "over those processes)."),
    click.option("--max-p99-ms", type=positive_number(),
                 help="Slowest p99 per request allowed: the tail a latency target is usually "
                      "set on (a finalist measured again: its median p99 over those "
                      "processes)."))


def option_of(limit: str) -> str:
    """A limit's option: max_compile_s is --max-compile-s."""
    return "--" + limit.replace("_", "-")
