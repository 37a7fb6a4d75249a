"""What the commands share: parsing, the options several of them take (declared once), and the
one place where library errors become one-line CLI errors."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tuner.errors import UserError
from tuner.files import NOT_UTF8, not_utf8
from tuner.launch.signals import EXIT_INTERRUPTED
from tuner.domain.layout import STUDIES_DIR

if TYPE_CHECKING:
    from tuner.domain.space_file import SpaceFile

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
CONFIRM_REPEATS = "auto"  # tuner.study.finalists.DEFAULT_REPEATS, without importing pandas for --help


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Library errors become one-line CLI errors with a non-zero exit, in one place."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise click.ClickException(_with_its_source(exc)) from exc
        except BrokenPipeError:
            raise  # the reader went away (| head): nothing to tell it
        except OSError as exc:  # the machine, not the input: a full disk, say (> /dev/full)
            where = f" ({exc.filename})" if exc.filename else ""
            raise click.ClickException(f"{exc.strerror or exc}{where}") from exc
        except Exception as exc:
            failure = storage_failure(exc)
            if failure is None:
                raise
            raise click.ClickException(_with_its_source(failure)) from exc
    return wrapper


def storage_failure(exc: Exception) -> UserError | None:
    """A study storage that failed while in use (a damaged study.db, a full disk), as one line
    (:func:`tuner.study.storage.storage_failure`); None for any other error. Only where
    SQLAlchemy was imported, which any storage imports: a command that opened none (``tuner
    show``) does not import Optuna to find out."""
    import sys

    if "sqlalchemy" not in sys.modules:
        return None
    from tuner.study.storage import storage_failure as failure

    return failure(exc)


_SPACE_FILE = "tuner.space_file"  # ctx.meta: (path, {option: the file key whose values it took})


def _with_its_source(exc: UserError) -> str:
    """An error about a value the user gave another way than its option says so: the checks
    name the option. A storage URL from TUNER_STORAGE, and values from the --space file: the
    error's ``about`` (the options whose values were found wrong) names the file's keys."""
    message = str(exc)
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return message
    url = ctx.params.get("storage")
    if url and ctx.get_parameter_source("storage") == click.core.ParameterSource.ENVIRONMENT:
        from tuner.study.redact import redact

        message = message.replace(f"--storage {redact(url)}", f"TUNER_STORAGE={redact(url)}")
    if _SPACE_FILE not in ctx.meta:  # not set where the file itself is refused (that names it)
        return message
    path, taken = ctx.meta[_SPACE_FILE]
    blamed = [taken[option] for option in exc.about if option in taken]
    return f"{message} (from {', '.join(blamed)} in --space {path})" if blamed else message


class OneLineErrors(click.Group):
    """Click's usage errors (a bad option value, an unknown option) as one ``Error:`` line, like
    every other bad input, instead of the usage text, a hint and then the error."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as exc:
            raise one_line(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            # click's parser raises some errors (an option without its value) with no context:
            # the command being parsed is then the subcommand this group was invoking.
            raise one_line(exc, _invoked(ctx)) from None
        except KeyboardInterrupt:
            # Ctrl-C before the command's own handler is in place (a search checks its inputs
            # and imports torch for seconds first): a stopped run's exit code and one line,
            # not click's "Aborted!" with exit code 1, which reads as a failure.
            click.echo(f"stopped by Ctrl-C ({_invoked(ctx)})", err=True)
            raise SystemExit(EXIT_INTERRUPTED) from None


def _invoked(ctx: click.Context) -> str:
    """The command this group was invoking (``tuner search``), or the group itself."""
    return " ".join(filter(None, (ctx.command_path, ctx.invoked_subcommand)))


def one_line(exc: click.UsageError, where: str = "tuner") -> click.ClickException:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        return exc  # no arguments at all: the help, as click shows it
    where = exc.ctx.command_path if exc.ctx is not None else where
    message = " ".join(exc.format_message().split())
    error = click.ClickException(f"{message} (see {where} --help)")
    # 2, as click exits on usage errors. click types exit_code a ClassVar but reads it from the
    # instance, so setting it on this one exception is what click honours.
    error.exit_code = exc.exit_code  # type: ignore[misc]
    return error


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


def split(values: tuple[str, ...], option: str) -> list[str] | None:
    """Repeated and comma-separated option values as one list, each once (in the order first
    given: ``--dtype float32,float32`` is float32, not a dimension of one value searched twice);
    None if none were given. An empty item (``a,,b``, ``,``, ``""``) is a one-line error naming
    ``option``, not a value dropped: ``--mode ,`` must not quietly mean every mode."""
    items = [item for value in values for item in items_of(value, option)]
    return list(dict.fromkeys(items)) or None


def items_of(text: str, option: str) -> list[str]:
    """``a, b`` -> ["a", "b"]; an empty item is a one-line error naming ``option``."""
    items = [v.strip() for v in text.split(",")]
    if not all(items):
        raise UserError(f"{option} {text!r} has an empty value: give values separated by single "
                        f"commas, e.g. {option} {_EXAMPLES.get(option, 'a,b')}")
    return items


_EXAMPLES = {"--dtype": "float32,bfloat16", "--backend": "eager,inductor",
             "--mode": "default,reduce-overhead", "--dynamic": "false,true",
             "--channels-last": "false,true", "--cudnn-benchmark": "true,false",
             "--inductor-option": "epilogue_fusion=true,false"}


def positive_ints(text: str, what: str, option: str) -> list[int]:
    """``1,8,32`` -> [1, 8, 32]; anything else is a one-line error naming the option."""
    out = []
    for item in text.split(",") if text.strip() else []:
        item = item.strip()
        if not re.fullmatch(r"\d+", item) or int(item) <= 0:
            raise UserError(f"{what} {item!r} is not a positive integer: pass e.g. {option} 1,8,32")
        out.append(int(item))
    return out


def dynamic_values(values: list[str] | None) -> list[bool | None] | None:
    if values is None:
        return None
    table = {"none": None, "auto": None, "true": True, "false": False}
    for v in values:
        if v.lower() not in table:
            raise UserError(f"--dynamic {v!r}: choose from none, true, false")
    return [table[v.lower()] for v in values]


def bool_values(text: str, option: str) -> list[bool]:
    """``false,true`` -> [False, True]; anything else is a one-line error naming the option."""
    table = {"true": True, "false": False}
    if not text.strip():
        raise UserError(f"{option} needs a value: true, false or false,true")
    items = [v.lower() for v in items_of(text, option)]
    for v in items:
        if v not in table:
            raise UserError(f"{option} {v!r}: choose from true, false (e.g. {option} false,true)")
    return list(dict.fromkeys(table[v] for v in items))


def option_values(values: tuple[str, ...]) -> dict[str, list[str]] | None:
    """``("epilogue_fusion=true,false", ...)`` -> {"epilogue_fusion": ["true", "false"]}; the
    names and values are checked against torch by :func:`tuner.domain.space.build_space`.
    Nothing given: None (the device's default options); ``none``: {} (no option searched)."""
    if [v.strip().lower() for v in values] == ["none"]:
        return {}
    out: dict[str, list[str]] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if value.strip().lower() == "none":
            raise UserError("--inductor-option none searches no option: it cannot be given "
                            "beside other --inductor-option values; drop one")
        items = items_of(rest, "--inductor-option") if rest.strip() else []
        if not sep or not name.strip() or not items:
            raise UserError(f"--inductor-option {value!r}: expected NAME=V1,V2, e.g. "
                            "--inductor-option epilogue_fusion=true,false")
        if name.strip() in out:
            raise UserError(f"--inductor-option {name.strip()} given twice: list its values "
                            "once, comma-separated")
        out[name.strip()] = items
    return out or None


EMPTY_STUDY = "a STUDY given is empty (''): give a study folder, or a study name under --studies-dir"


def study_path(study: str, studies_dir: Path) -> Path:
    """A study folder, a Parquet file, or a study name under --studies-dir. Not a study's
    pareto.parquet (:func:`tuner.data.files.refuse_front_only`)."""
    from tuner.data.files import check_path, refuse_front_only

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


def echo_warnings(caught: list[warnings.WarningMessage]) -> None:
    """The library's mismatch warnings as one line each on stderr; others as Python shows them."""
    from tuner.use.environment import MismatchWarning

    for w in caught:
        if issubclass(w.category, MismatchWarning):
            click.echo(f"warning: {w.message}", err=True)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def teller(quiet: bool, prefix: str = "") -> Callable[[str], None]:
    """Progress and messages on stderr, unless ``quiet``."""
    def say(text: str) -> None:
        if not quiet:
            click.echo(prefix + text, err=True)
    return say


# Options several commands take, declared once.
studies_dir_option = click.option(
    "--studies-dir", type=GivenPath(file_okay=False, path_type=Path), default=STUDIES_DIR,
    show_default=True, help="The folder that holds the study folders.")
json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the result as JSON on stdout.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
timeout_option = click.option(
    "--timeout", "timeout_s", type=Duration(), default="30m", show_default=True,
    help="Kill a trial process that has not finished after this long, e.g. 20m, 90s or 1h30m; "
         "a bare number is seconds.")
# The figures the default is chosen from: compile_s_cold of the committed H200 studies and
# landscape (torch 2.11), and the max-autotune timeouts of studies/h200-resnet18 (README).
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
         "importing (README: pre-started trial processes).")


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
    ctx.meta[_SPACE_FILE] = (path, taken)  # for the errors about these values (user_errors)
    return kept
