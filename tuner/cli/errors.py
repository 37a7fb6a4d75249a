"""The one place where library errors become one-line CLI errors: the commands' own
(:func:`user_errors`) and click's usage errors (:class:`OneLineErrors`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from tuner.errors import UserError
from tuner.launch.signals import EXIT_INTERRUPTED


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


SPACE_FILE_META = "tuner.space_file"  # ctx.meta: (path, {option: the file key whose values it took})


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
    if SPACE_FILE_META not in ctx.meta:  # not set where the file itself is refused (that names it)
        return message
    path, taken = ctx.meta[SPACE_FILE_META]
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
