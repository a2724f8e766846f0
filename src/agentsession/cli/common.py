"""What every ``agentsession`` command shares: options, opening the store, printing, errors.

Each command parses its options, makes one SessionManager call and prints the result
(rich tables, or JSON on stdout with ``--json``). Errors are one line on stderr and an
exit code from :data:`EXIT_CODES`; never a traceback.

Settings (``AGENTSESSION_URL``...) are read here and passed down explicitly.
"""

from __future__ import annotations

import functools
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from typer.core import TyperCommand

from ..errors import (
    AgentSessionError,
    Conflict,
    IdempotencyKeyReused,
    ImportSourceError,
    NotFound,
    ValidationError,
    VersionConflict,
)
from ..models import Page
from ..service import SessionManager
from ..service.policy import Limits
from ..settings import Settings
from ..stores.sql.dialect import sqlite_file_state
from . import render

__all__ = [
    "EXIT_CODES",
    "EXIT_USAGE",
    "AdminOpt",
    "AgentOpt",
    "AllUsersOpt",
    "CursorOpt",
    "JsonOpt",
    "LimitOpt",
    "Options",
    "SessionArg",
    "UrlOpt",
    "UsageError",
    "UserOpt",
    "call",
    "call_and_show",
    "cli_errors",
    "confirm",
    "exit_code_for",
    "new_app",
    "open_manager",
    "require_database",
    "resolve_options",
    "show",
    "show_page",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: Error class -> process exit code; the first matching row wins (most specific first).
EXIT_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (ImportSourceError, 2),  # the file named on the command line is wrong: usage
    (ValidationError, 5),
    (NotFound, 3),
    (Conflict, 4),
    (VersionConflict, 4),
    (IdempotencyKeyReused, 4),
    (AgentSessionError, 1),
)
EXIT_USAGE = 2


class UsageError(Exception):
    """The command line is incomplete (e.g. no principal); exit code 2."""


def exit_code_for(exc: BaseException) -> int:
    """The exit code for an error, from :data:`EXIT_CODES` (1 if none matches).

    Args:
        exc: the error a command raised.

    Returns:
        :data:`EXIT_USAGE` for a :class:`UsageError`, else the first matching code.
    """
    if isinstance(exc, UsageError):
        return EXIT_USAGE
    return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), 1)


def cli_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn AgentSessionError and UsageError into ``error: ...`` on stderr plus an exit code.

    Args:
        fn: a command function.

    Returns:
        The same command, raising ``typer.Exit(exit_code_for(exc))`` instead of those errors.
    """

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (AgentSessionError, UsageError) as exc:
            message = exc.message if isinstance(exc, AgentSessionError) else str(exc)
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(exit_code_for(exc)) from None

    return wrapper


def _argument_name(param: Any) -> str:
    """An argument as click names it: its metavar, else its name in capitals
    (``SESSION_ID``), ``...`` after one that takes several values."""
    name = (param.metavar or param.name or "").upper()
    return f"{name}..." if param.nargs != 1 else name


class _Command(TyperCommand):
    """A command whose help names its arguments as click does: ``SESSION_ID`` in the
    usage line (``[NAME]`` when optional) and in the Arguments section, where typer
    prints ``{session_id}`` and ``session_id <str>``."""

    # ctx and formatter are the click objects typer vendors (typer._click), untyped here.
    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        records = [(p, p.get_help_record(ctx)) for p in self.get_params(ctx)]
        args = [
            (_argument_name(p), r[1]) for p, r in records if r and p.param_type_name == "argument"
        ]
        opts = [r for p, r in records if r and p.param_type_name == "option"]
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class _App(typer.Typer):
    """A typer app whose commands are :class:`_Command` unless one says otherwise."""

    def command(self, *args: Any, cls: type[TyperCommand] | None = None, **kw: Any) -> Any:
        return super().command(*args, cls=cls or _Command, **kw)


def new_app(help_text: str, **options: Any) -> typer.Typer:
    """A typer app (the root or a sub-app) with the help every command shares.

    Help is click's plain text: flags show no type (typer's rich help prints
    ``<bool>`` beside them), arguments are named as click names them (``SESSION_ID``,
    :class:`_Command`), lines wrap to the terminal, ``[default: ...]`` is shown;
    the app is listed under its whole ``help_text`` (click would cut it with "...").

    Args:
        help_text: what the app is for, one line.
        options: more ``typer.Typer`` arguments (``name``, ...).

    Returns:
        A new app without commands.
    """
    return _App(
        help=help_text,
        short_help=help_text,
        no_args_is_help=True,
        rich_markup_mode=None,
        add_completion=False,
        **options,
    )


# ---------------------------------------------------------------- common options

#: Where the store is when neither ``--url`` nor ``AGENTSESSION_URL`` says.
DEFAULT_URL_HELP = f"AGENTSESSION_URL, else {Settings.model_fields['url'].default}"

UrlOpt = Annotated[
    str | None, typer.Option("--url", help="Store URL.", show_default=DEFAULT_URL_HELP)
]
UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="Principal the call is made as.")]
AdminOpt = Annotated[bool, typer.Option("--admin", help="Act as admin across users.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
SessionArg = Annotated[str, typer.Argument(help="Session id (ses_...).")]
LimitOpt = Annotated[
    int | None, typer.Option(help="Page size.", show_default=str(Limits().default_page_size))
]
CursorOpt = Annotated[str | None, typer.Option(help="next_cursor of the previous page.")]
#: The filters several reads share (``sessions list``, ``sessions count``, ``search``).
AgentOpt = Annotated[str | None, typer.Option(help="Only this agent's sessions.")]
AllUsersOpt = Annotated[bool, typer.Option("--all-users", help="Every user (admin).")]


@dataclass(frozen=True)
class Options:
    """Resolved global + per-command options of one invocation."""

    url: str
    user: str | None
    admin: bool
    json: bool

    @property
    def principal(self) -> str:
        """The user id every call is made as; admins default to ``admin``.

        Raises:
            UsageError: neither ``--user`` nor ``--admin`` was given.
        """
        if self.user is not None:
            return self.user
        if self.admin:
            return "admin"
        raise UsageError("--user is required (the principal the call is made as), or --admin")


def resolve_options(
    ctx: typer.Context, url: str | None, user: str | None, admin: bool, as_json: bool
) -> Options:
    """Merge a command's own options over the global ones (given before the command).

    Args:
        ctx: the command's context; its root holds the global :class:`Options`.
        url, user, admin, as_json: the command's options (None/False: not given).

    Returns:
        The options the command runs with.
    """
    base = ctx.find_root().obj
    if not isinstance(base, Options):
        base = Options(url=Settings().url, user=None, admin=False, json=False)
    return Options(
        url=url if url is not None else base.url,
        user=user if user is not None else base.user,
        admin=admin or base.admin,
        json=as_json or base.json,
    )


def _sqlite_path(url: str) -> Path | None:
    """The file an SQLite URL names, else None (other stores, in-memory, or a URL that
    is not a plain file path, e.g. ``?uri=true``)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None  # SessionManager.from_url reports the bad URL
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    if "uri" in parsed.query:
        return None
    return Path(parsed.database)


def require_database(url: str, *, create: bool = False) -> None:
    """Check what an SQLite URL names before anything opens it (so nothing is changed
    when it is refused).

    A file that is not an SQLite database (its first 16 bytes are not SQLite's header)
    is always refused. Unless ``create``, a missing or empty file is refused too: a
    command that reads (or changes what exists) would otherwise create an empty
    database at a mistyped path and list nothing, or fail on its missing schema and
    leave the file behind. A missing file is created only by ``db upgrade``, and by
    the commands that fill a store (the imports, ``serve``) when
    ``AGENTSESSION_AUTO_MIGRATE`` is on: those also create the schema.

    Args:
        url: the store URL; other stores pass unchecked.
        create: the command creates the database and its schema if absent.

    Raises:
        UsageError: the file is not an SQLite database, or (unless ``create``) is
            missing or empty; the message names it and what to do.
    """
    path = _sqlite_path(url)
    if path is None:
        return
    state = sqlite_file_state(path)
    if state == "other":
        raise UsageError(
            f"{path} is not an SQLite database (the store URL {url}); check --url or "
            "AGENTSESSION_URL: nothing was changed"
        )
    if state in ("missing", "empty") and not create:
        what = "no SQLite database" if state == "missing" else "an empty file, no database,"
        raise UsageError(
            f"{what} at {path} (the store URL {url}); check --url or "
            f"AGENTSESSION_URL, or create one with: agentsession --url {shlex.quote(url)} "
            "db upgrade"
        )


def open_manager(opts: Options, *, create: bool = False) -> SessionManager:
    """Open a SessionManager on ``opts.url`` with the settings from the environment.

    Args:
        opts: the invocation's options.
        create: the command fills a store (an import): it may create a missing SQLite
            file when ``AGENTSESSION_AUTO_MIGRATE`` is on, which also creates the
            schema. Otherwise a missing or empty file is refused; a file that is not
            an SQLite database always is (:func:`require_database`).

    Raises:
        UsageError: the SQLite file is refused.
        AgentSessionError: the store cannot be opened (bad URL, out-of-date schema...).
    """
    settings = Settings(url=opts.url)
    require_database(opts.url, create=create and settings.auto_migrate)
    return SessionManager.from_url(settings.url, **settings.manager_options())


def confirm(question: str, action: str) -> bool:
    """Ask ``question`` on the terminal; True for yes.

    Without a terminal, an answer piped on stdin is read first (``y`` or ``yes`` is a
    yes, anything else, an empty line too, a no) and the question is printed with it
    on stderr; a stdin at its end (``</dev/null``) is refused before anything is
    printed.

    Args:
        question: the yes/no question.
        action: what ``--yes`` does without asking, e.g. ``delete`` (for the error).

    Returns:
        Whether the answer was yes (a no, or Enter, is False).

    Raises:
        UsageError: no answer can be read (stdin is not a terminal and holds no
            answer): the message says to pass ``--yes``.
    """
    if not sys.stdin.isatty():
        line = sys.stdin.readline()
        if not line:  # end of input: nobody to answer
            raise UsageError(
                f"{action} asks for confirmation and there is no terminal to answer on: "
                f"pass --yes to {action} without asking"
            )
        answer = line.strip()
        typer.echo(f"{question} [y/N]: {answer}", err=True)
        return answer.lower() in ("y", "yes")
    try:
        return typer.confirm(question, err=True)
    except typer.Abort:  # Ctrl-C or Ctrl-D at the prompt: the user's no
        return False


def show(opts: Options, value: Any, table: Any) -> None:
    """Print ``value`` as JSON with ``--json``, else print ``table`` (rich renderable or text)."""
    if opts.json:
        typer.echo(render.to_json(value))
    else:
        Console().print(table)


def show_page(opts: Options, page: Page[Any], table: Any) -> None:
    """:func:`show` a page; as a table, followed by how to get the next one if any."""
    show(opts, page, table)
    if not opts.json and page.next_cursor is not None:
        typer.echo(f"more: --cursor {page.next_cursor}")


def call(opts: Options, method: Callable[..., T], **kwargs: Any) -> T:
    """Open the store and make one SessionManager call as the principal, e.g.
    ``call(opts, SessionManager.get_session, session_id=sid)``.

    Returns:
        What the method returned.

    Raises:
        UsageError: no principal; AgentSessionError: as raised by the call.
    """
    with open_manager(opts) as sm:
        return method(sm, user_id=opts.principal, admin=opts.admin, **kwargs)


def call_and_show(
    opts: Options, method: Callable[..., T], table: Callable[[T], Any], **kwargs: Any
) -> None:
    """:func:`call`, then print the result: JSON with ``--json``, else ``table(result)``."""
    result = call(opts, method, **kwargs)
    show(opts, result, table(result))
