"""Tools that really act on one project directory, and refuse to leave it.

``run_command`` runs a program (no shell) with the project as working directory,
``read_file`` and ``edit_file`` touch files inside it, and ``update_memory`` is a
merge patch the engine applies to the session's working memory (it never reaches
:meth:`ProjectTools.execute`). Paths are resolved, symlinks included, and anything that
lands outside the project root is refused with :class:`ToolError`.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["UPDATE_MEMORY", "ProjectTools", "ToolError", "ToolOutcome", "ToolSpec"]

#: Name of the tool the engine handles itself (a working-memory merge patch).
UPDATE_MEMORY = "update_memory"


class ToolError(Exception):
    """A tool could not do what it was asked (bad path, bad arguments, text not found)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool, and how the engine may treat repeated calls.

    Attributes:
        name, description: shown to the model.
        parameters: JSON schema of the arguments object (chat-completions function tool).
        reusable: an identical earlier call's result still holds if nothing that changes
            the project ran since, so the engine may answer from tool history instead.
        changes_project: running it may change the project (files, installed packages).
    """

    name: str
    description: str
    parameters: dict[str, Any]
    reusable: bool = False
    changes_project: bool = True

    def as_openai(self) -> dict[str, Any]:
        """Return the chat-completions ``{"type": "function", ...}`` tool object."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What a tool call produced: a JSON ``result`` and, when it failed, an ``error`` text."""

    result: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when the tool did its job (for commands: exit code 0)."""
        return self.error is None


_STR = {"type": "string"}

SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "run_command",
        "Run a program in the project directory (no shell). Returns exit_code and the "
        "tails of stdout and stderr.",
        {
            "type": "object",
            "properties": {"command": _STR, "timeout_s": {"type": "number"}},
            "required": ["command"],
        },
        reusable=True,
        changes_project=True,
    ),
    ToolSpec(
        "read_file",
        "Read a text file of the project.",
        {"type": "object", "properties": {"path": _STR}, "required": ["path"]},
        reusable=True,
        changes_project=False,
    ),
    ToolSpec(
        "edit_file",
        "Edit a project file: replace the exact text `old` by `new` (it must occur once), "
        "or append the line `append_line` (creating the file if needed).",
        {
            "type": "object",
            "properties": {"path": _STR, "old": _STR, "new": _STR, "append_line": _STR},
            "required": ["path"],
        },
    ),
    ToolSpec(
        UPDATE_MEMORY,
        "Merge-patch (RFC 7396) the session's working memory: goal, completed, errors, "
        "next_action, facts. Lists are replaced whole.",
        {"type": "object", "properties": {"patch": {"type": "object"}}, "required": ["patch"]},
        changes_project=False,
    ),
)


@dataclass
class ProjectTools:
    """The tools of one project directory.

    Args:
        root: the project directory; every path and the working directory stay inside it.
        timeout_s: default and maximum run time of ``run_command``, in seconds.
        max_output_chars: how many trailing characters of stdout/stderr are kept.
        max_file_chars: the most characters ``read_file`` returns.
        env: environment of commands (default: this process's environment).
    """

    root: Path
    timeout_s: float = 300.0
    max_output_chars: int = 4000
    max_file_chars: int = 64_000
    env: dict[str, str] | None = None
    specs: tuple[ToolSpec, ...] = field(default=SPECS)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        if not self.root.is_dir():
            raise ToolError(f"project directory {str(self.root)!r} does not exist")

    def spec(self, name: str) -> ToolSpec | None:
        """The spec of tool ``name``, or None if there is no such tool."""
        return next((s for s in self.specs if s.name == name), None)

    def resolve(self, path: Any) -> Path:
        """Return ``path`` (relative to the root, or absolute) as an absolute path inside it.

        Raises:
            ToolError: not a string, or it resolves outside the project directory.
        """
        if not isinstance(path, str) or not path:
            raise ToolError("path must be a non-empty string")
        target = (self.root / path).resolve()
        if not target.is_relative_to(self.root):
            raise ToolError(f"path {path!r} is outside the project directory")
        return target

    def execute(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        """Run tool ``name``; a :class:`ToolError` becomes an outcome with ``error`` set."""
        handlers: dict[str, Callable[..., ToolOutcome]] = {
            "run_command": self.run_command,
            "read_file": self.read_file,
            "edit_file": self.edit_file,
        }
        handler = handlers.get(name)
        if handler is None:
            return ToolOutcome(error=f"unknown tool {name!r}")
        try:
            return handler(**arguments)
        except ToolError as exc:
            return ToolOutcome(error=str(exc))
        except TypeError as exc:  # unexpected or missing arguments from the model
            return ToolOutcome(error=f"bad arguments for {name}: {exc}")

    def run_command(self, command: str, timeout_s: float | None = None) -> ToolOutcome:
        """Run ``command`` (split like a shell would, but no shell) in the project root.

        Returns an outcome whose result is ``{"command", "exit_code", "stdout_tail",
        "stderr_tail", "timed_out"}``; a non-zero exit code or a timeout sets ``error``.
        """
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        try:
            argv = shlex.split(command)
            limit = self.timeout_s if timeout_s is None else min(float(timeout_s), self.timeout_s)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"bad command or timeout: {exc}") from exc
        try:
            proc = subprocess.run(
                argv,
                cwd=self.root,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=limit,
                env=self.env,
                check=False,
            )
        except FileNotFoundError as exc:
            raise ToolError(f"cannot run {argv[0]!r}: {exc.strerror}") from exc
        except subprocess.TimeoutExpired as exc:
            result: dict[str, str | int | bool | None] = {
                "command": command,
                "exit_code": None,
                "stdout_tail": self._tail(_text(exc.stdout)),
                "stderr_tail": self._tail(_text(exc.stderr)),
                "timed_out": True,
            }
            return ToolOutcome(result, f"timed out after {limit:g} s")
        result = {
            "command": command,
            "exit_code": proc.returncode,
            "stdout_tail": self._tail(proc.stdout),
            "stderr_tail": self._tail(proc.stderr),
            "timed_out": False,
        }
        error = None if proc.returncode == 0 else f"exit code {proc.returncode}"
        return ToolOutcome(result, error)

    def read_file(self, path: str) -> ToolOutcome:
        """Return ``{"path", "content", "truncated"}`` of a text file in the project."""
        target = self.resolve(path)
        try:
            text = target.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ToolError(f"cannot read {path!r}: {exc.strerror}") from exc
        truncated = len(text) > self.max_file_chars
        return ToolOutcome(
            {"path": path, "content": text[: self.max_file_chars], "truncated": truncated}
        )

    def edit_file(
        self,
        path: str,
        old: str | None = None,
        new: str | None = None,
        append_line: str | None = None,
    ) -> ToolOutcome:
        """Replace ``old`` by ``new`` (exactly one occurrence) or append ``append_line``.

        The file is written atomically (a temporary file renamed over it).
        Returns ``{"path", "mode", "changed"}``.
        """
        target = self.resolve(path)
        if (append_line is None) == (old is None):
            raise ToolError("pass either old+new or append_line")
        try:
            text = target.read_text(encoding="utf-8") if target.exists() else ""
        except OSError as exc:
            raise ToolError(f"cannot read {path!r}: {exc.strerror}") from exc
        if append_line is not None:
            if "\n" in append_line:
                raise ToolError("append_line must be a single line")
            prefix = "" if text == "" or text.endswith("\n") else "\n"
            updated, mode = f"{text}{prefix}{append_line}\n", "append"
        else:
            if new is None:
                raise ToolError("old needs new")
            count = text.count(old or "")
            if not old or count != 1:
                raise ToolError(f"text to replace occurs {count} times in {path!r}, not once")
            updated, mode = text.replace(old, new, 1), "replace"
        _atomic_write(target, updated)
        return ToolOutcome({"path": path, "mode": mode, "changed": updated != text})

    def _tail(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        dropped = len(text) - self.max_output_chars
        return f"[... {dropped} characters dropped]\n" + text[-self.max_output_chars :]


def _text(value: str | bytes | None) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def _atomic_write(target: Path, text: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
