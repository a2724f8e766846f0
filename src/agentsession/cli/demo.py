"""The ``demo`` commands of the CLI; the model's environment variables are read here.

``AGENTSESSION_MODEL`` (``scripted`` or ``openai``), ``AGENTSESSION_MODEL_NAME``,
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` choose and configure the demo's model. The
API key is never put on a command line: the second process reads it from its environment.

``agentsession demo --server URL`` runs the demo against a running ``agentsession serve``;
its token comes from ``--api-key`` or ``AGENTSESSION_API_KEY`` (process 2 reads the
variable, which process 1 sets for it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from .common import UsageError, cli_errors

__all__ = ["demo", "demo_continue"]

LangOpt = Annotated[str, typer.Option(help="zh or en: the language of the conversation.")]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", help="scripted or openai.", show_default="AGENTSESSION_MODEL, else scripted"
    ),
]
CmdOpt = Annotated[
    str | None, typer.Option("--cmd", help="Start command; must begin with the interpreter.")
]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Base URL of a running `agentsession serve`: keep the state there, not in SQLite.",
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="AGENTSESSION_API_KEY",
        show_envvar=True,
        help="API key for --server (from `agentsession keys create`).",
    ),
]
KEY_HINT = (
    "--server needs an API key: pass --api-key TOKEN or set AGENTSESSION_API_KEY "
    "(create one where the service runs: agentsession keys create --user demo-user)"
)


def _model_config(kind: str | None) -> Any:
    from ..demo import ModelConfig

    chosen = (kind or os.environ.get("AGENTSESSION_MODEL") or "scripted").lower()
    if chosen not in ("scripted", "openai"):
        raise UsageError(f"--model must be scripted or openai, not {chosen!r}")
    return ModelConfig(
        kind=chosen,
        name=os.environ.get("AGENTSESSION_MODEL_NAME", "gpt-4o-mini"),
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY"),
    )


@cli_errors
def demo(
    workdir: Annotated[Path, typer.Option(help="Where the demo works; recreated.")] = Path(".demo"),
    lang: LangOpt = "zh",
    project: Annotated[
        Path | None, typer.Option(help="Your own project instead of the bundled one.")
    ] = None,
    cmd: CmdOpt = None,
    model: ModelOpt = None,
    server: ServerOpt = None,
    api_key: ApiKeyOpt = None,
) -> None:
    """Restore an agent session in a new process and finish the task there.

    With --server URL both processes keep the session in that agentsession service.
    """
    from ..demo import DemoOptions, run_demo

    if lang not in ("zh", "en"):
        raise UsageError("--lang must be zh or en")
    if project is not None and cmd is None:
        raise UsageError("--project needs --cmd (how the project starts)")
    if server is not None and not api_key:
        raise UsageError(KEY_HINT)
    options = DemoOptions(
        workdir=workdir,
        lang=lang,
        project=project,
        cmd=cmd,
        model=_model_config(model),
        server=server,
        api_key=api_key if server is not None else None,
    )
    raise typer.Exit(run_demo(options, Console()))


@cli_errors
def demo_continue(
    session: Annotated[str, typer.Option(help="Session to restore.")],
    project: Annotated[Path, typer.Option(help="Project directory.")],
    cmd: Annotated[str, typer.Option(help="Start command.")],
    url: Annotated[str | None, typer.Option(help="Store URL.")] = None,
    server: ServerOpt = None,
    api_key: ApiKeyOpt = None,
    user: Annotated[str, typer.Option(help="Principal.")] = "demo-user",
    lang: LangOpt = "zh",
    model: ModelOpt = None,
) -> None:
    """Second process of the demo: restore the session and continue the task."""
    from ..demo import continue_demo

    if (url is None) == (server is None):
        raise UsageError("give exactly one of --url and --server")
    if server is not None and not api_key:
        raise UsageError(KEY_HINT)
    code = continue_demo(
        url=server or url or "",
        session_id=session,
        user_id=user,
        project=project,
        cmd=cmd,
        lang=lang,
        model=_model_config(model),
        console=Console(),
        api_key=api_key if server is not None else None,
    )
    raise typer.Exit(code)
