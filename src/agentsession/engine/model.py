"""What decides the agent's next step: the :class:`Model` protocol and two models.

A model sees a :class:`ModelContext` built entirely from the session store (working
memory, recent messages, tool history, this turn's tool results) and returns a
:class:`Decision`: tool calls to make, or a final reply. Because nothing else is
given to it, a session restored in a fresh process gets the same decisions.

* :class:`ScriptedModel` is a deterministic policy for one job: a Python project whose
  start command fails with ``ModuleNotFoundError``. Diagnose, fix ``requirements.txt``
  and install it, verify. Which phase it is in comes from working memory ``facts``.
* :class:`OpenAIChatModel` calls any OpenAI-compatible ``/chat/completions`` endpoint
  with the tools as JSON-schema function tools.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol
from uuid import uuid4

import httpx

from ..models import Run, ToolCall
from .tools import UPDATE_MEMORY, ToolSpec

__all__ = [
    "Decision",
    "Model",
    "ModelContext",
    "ModelError",
    "OpenAIChatModel",
    "ScriptedModel",
    "ToolRequest",
    "TurnResult",
    "default_install_command",
    "missing_module",
]


class ModelError(Exception):
    """The model could not produce a decision (bad configuration, bad HTTP answer)."""


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """One tool call a model asks for; ``id`` is echoed as the tool message's ``tool_call_id``."""

    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: f"call_{uuid4().hex[:24]}")


@dataclass(frozen=True, slots=True)
class TurnResult:
    """A tool call answered since the user's latest message, as the store holds it.

    ``reused_from`` is the ``call_id`` of an earlier identical call whose result the
    engine gave back instead of running the tool again.
    """

    call_id: str
    name: str
    arguments: dict[str, Any]
    status: str
    result: Any = None
    error: str | None = None
    reused_from: str | None = None


@dataclass(frozen=True, slots=True)
class ModelContext:
    """Everything a model may look at, read from the session store.

    Attributes:
        session_id: the session.
        user_text: the user's latest message.
        working_memory: the working-memory document (``goal``, ``completed``...).
        messages: recent history as chat-completions messages, oldest first (the
            newest that fit the engine's context budget, whole tool exchanges).
        tool_history: the newest tool calls that really ran in the session (up to
            100), oldest first.
        turn: tool calls answered since the user's latest message, oldest first.
        tools: the tools the model may call.
        runs: the session's newest runs (up to 100), oldest first.
        run_input: the task of the engine's current run; None before the turn's first run.
        summary: the stored summary of the history older than ``messages``, or None.
    """

    session_id: str
    user_text: str
    working_memory: dict[str, Any]
    messages: list[dict[str, Any]]
    tool_history: list[ToolCall]
    turn: list[TurnResult]
    tools: list[ToolSpec]
    runs: list[Run] = field(default_factory=list)
    run_input: Any = None
    summary: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The model's next step.

    Attributes:
        tool_calls: tools to run now; empty means ``text`` is the final reply of the turn.
        text: the reply, or a remark sent along with tool calls.
        new_run: start a new run (a new task phase) with this input before acting.
        failed: the final reply reports failure; the run ends FAILED with this error.
        usage: token counts of this model call (``input_tokens``, ``output_tokens``,
            ``total_tokens``, and ``cache_read_tokens`` and ``reasoning_tokens`` when
            reported; the names of :mod:`agentsession.usage`), if the model reports them.
        model: the name of the model that answered, if known: the usage ledger's
            model of ``usage``.
    """

    tool_calls: tuple[ToolRequest, ...] = ()
    text: str | None = None
    new_run: str | None = None
    failed: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    model: str | None = None


class Model(Protocol):
    """Decides the next step from a context; must not keep state between calls."""

    name: str

    def decide(self, context: ModelContext) -> Decision:
        """Return the next decision for ``context``.

        Raises:
            ModelError: no decision could be made.
        """
        ...


# ----------------------------------------------------------------- scripted model

_MISSING = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")
#: Import names whose PyPI distribution is named differently.
_PIP_NAMES = {
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "cv2": "opencv-python",
    "sklearn": "scikit-learn",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
}
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")

_TEXT = {
    "en": {
        "run_diagnose": "diagnose the start-up failure",
        "run_fix": "fix requirements.txt",
        "run_verify": "verify the app starts",
        "checking": "Let me run the start command and read the error.",
        "starts": "The app starts fine (exit 0); there is nothing to fix.",
        "other_error": "The start command fails, but not with a missing module: {line}",
        "diagnosed": (
            "Found it: the app imports `{module}`, which is not installed and not listed "
            "in requirements.txt ({error}). Next: check and fix requirements.txt."
        ),
        "resume": (
            "We already found `{module}` missing (run {run_seq}). Next: {next_action}. "
            "Re-checking the start-up error first."
        ),
        "install_failed": "Installing requirements failed: {line}",
        "verify": "requirements.txt is fixed; now verifying that the app starts.",
        "verify_failed": "The app still does not start: {line}",
        "done": (
            "Done. `{module}` is now in requirements.txt and installed in the project "
            "environment; verification passed: the app starts (exit 0)."
        ),
        "already_done": "This task is already complete: the app starts (exit 0).",
    },
    "zh": {
        "run_diagnose": "诊断启动失败",
        "run_fix": "修复 requirements.txt",
        "run_verify": "验证应用能启动",
        "checking": "我先运行启动命令，看看报错。",
        "starts": "应用启动正常（exit 0），不需要修复。",
        "other_error": "启动失败，但不是缺少模块：{line}",
        "diagnosed": (
            "定位到了：应用导入了 `{module}`，但它没有安装，也不在 requirements.txt 里"
            "（{error}）。下一步：检查并修复 requirements.txt。"
        ),
        "resume": (
            "我们之前（run {run_seq}）已经定位到缺少 `{module}`。下一步：{next_action}。"
            "先确认一下启动错误。"
        ),
        "install_failed": "安装依赖失败：{line}",
        "verify": "requirements.txt 已修复，现在验证应用能否启动。",
        "verify_failed": "应用仍然无法启动：{line}",
        "done": (
            "完成。`{module}` 已加入 requirements.txt 并安装到项目环境；"
            "验证通过：应用启动成功（exit 0）。"
        ),
        "already_done": "这个任务已经完成：应用可以正常启动（exit 0）。",
    },
}


def missing_module(result: Any) -> tuple[str, str] | None:
    """Find ``ModuleNotFoundError`` in a ``run_command`` result.

    Returns:
        ``(top-level module name, the error line)``, or None if there is none.
    """
    if not isinstance(result, dict):
        return None
    text = f"{result.get('stderr_tail') or ''}\n{result.get('stdout_tail') or ''}"
    found = None
    for line in text.splitlines():
        match = _MISSING.search(line)
        if match:
            found = (match.group(1).split(".")[0], line.strip())
    return found


def default_install_command(start_command: str, requirements: str = "requirements.txt") -> str:
    """``<python> -m pip install -r requirements.txt`` with the start command's interpreter.

    Assumes the start command begins with a Python interpreter (``python``,
    ``python3.11``, ``.venv/bin/python``...), which is the one the app imports with.

    Raises:
        ModelError: the command does not start with a Python interpreter.
    """
    argv = shlex.split(start_command)
    if not argv or not _PYTHON.match(Path(argv[0]).name):
        raise ModelError(
            f"cannot tell which Python runs {start_command!r}: start the command with "
            "the interpreter (e.g. '.venv/bin/python app.py') or pass install_command"
        )
    return shlex.join([argv[0], "-m", "pip", "install", "-q", "-r", requirements])


def _requirement_names(text: str) -> set[str]:
    names = set()
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[\s<>=!~;\[@]", line, maxsplit=1)[0]
            names.add(re.sub(r"[-_.]+", "-", name).lower())
    return names


def _last_line(result: Any) -> str:
    if not isinstance(result, dict):
        return str(result)
    for key in ("stderr_tail", "stdout_tail"):
        lines = [ln for ln in str(result.get(key) or "").splitlines() if ln.strip()]
        if lines:
            return lines[-1].strip()
    return f"exit code {result.get('exit_code')}"


class ScriptedModel:
    """A deterministic policy: fix a Python project whose start fails on a missing module.

    Phases, told apart only by working memory ``facts`` and this turn's tool results:

    1. no ``facts.missing_module``: run the start command, find ``ModuleNotFoundError``,
       write goal/completed/errors/next_action/facts to working memory, reply;
    2. ``missing_module`` but not ``requirements_fixed``: re-check the error (the engine
       answers from tool history if nothing changed), read and fix ``requirements.txt``,
       install it, record that in memory;
    3. ``requirements_fixed`` but not ``app_starts``: run the start command again, record
       the result, reply with a summary.

    Args:
        start_command: how the project starts, e.g. ``.venv/bin/python app.py --check``.
        install_command: installs the requirements file; default
            :func:`default_install_command` of ``start_command``.
        lang: ``"en"`` or ``"zh"``, the language of replies.
        requirements: the requirements file, relative to the project root.
    """

    name = "scripted"

    def __init__(
        self,
        start_command: str,
        *,
        install_command: str | None = None,
        lang: str = "en",
        requirements: str = "requirements.txt",
    ) -> None:
        if lang not in _TEXT:
            raise ModelError(f"lang must be one of {', '.join(_TEXT)}")
        self.start_command = start_command
        self.install_command = install_command or default_install_command(
            start_command, requirements
        )
        self.requirements = requirements
        self._t = _TEXT[lang]

    def decide(self, context: ModelContext) -> Decision:
        """Return the next step of the current phase (see the class docstring)."""
        facts = dict(context.working_memory.get("facts") or {})
        diagnosed = self._diagnosed_in_turn(context.turn)
        if diagnosed is not None:  # a diagnosis turn ends with the report, before any change
            module, error = diagnosed
            return Decision(text=self._t["diagnosed"].format(module=module, error=error))
        if facts.get("app_starts"):
            just_now = any(
                t.name == UPDATE_MEMORY
                and ((t.arguments.get("patch") or {}).get("facts") or {}).get("app_starts")
                for t in context.turn
            )
            missing = facts.get("missing_module")
            if just_now:
                return Decision(text=self._t["done"].format(module=missing))
            return Decision(text=self._t["already_done"])
        if "missing_module" not in facts:
            return self._diagnose(context)
        if not facts.get("requirements_fixed"):
            return self._fix(context, facts)
        return self._verify(context)

    # -- phases

    def _diagnose(self, ctx: ModelContext) -> Decision:
        start = self._last(ctx.turn, "run_command", {"command": self.start_command})
        if start is None:
            return Decision(
                new_run=self._t["run_diagnose"],
                text=self._t["checking"],
                tool_calls=(self._start(),),
            )
        if start.status == "ok":
            return Decision(text=self._t["starts"])
        found = missing_module(start.result)
        if found is None:
            line = _last_line(start.result)
            return Decision(text=self._t["other_error"].format(line=line), failed=line)
        module, error = found
        patch = {
            "goal": ctx.user_text,
            "completed": [f"located: {module} missing"],
            "errors": [error],
            "next_action": f"check and fix {self.requirements}",
            "facts": {"missing_module": module},
        }
        return Decision(tool_calls=(ToolRequest(UPDATE_MEMORY, {"patch": patch}),))

    def _fix(self, ctx: ModelContext, facts: dict[str, Any]) -> Decision:
        module = str(facts["missing_module"])
        package = _PIP_NAMES.get(module, module)
        start = self._last(ctx.turn, "run_command", {"command": self.start_command})
        if start is None:
            text = self._t["resume"].format(
                module=module,
                run_seq=self._run_seq_of_diagnosis(ctx),
                next_action=ctx.working_memory.get("next_action") or self._t["run_fix"],
            )
            return Decision(new_run=self._t["run_fix"], text=text, tool_calls=(self._start(),))
        if start.status == "ok":
            return Decision(tool_calls=(self._remember(ctx, "requirements_fixed", "app_starts"),))
        read = self._last(ctx.turn, "read_file", {"path": self.requirements})
        if read is None:
            return Decision(tool_calls=(ToolRequest("read_file", {"path": self.requirements}),))
        listed = read.status == "ok" and _requirement_names(
            str((read.result or {}).get("content", ""))
        ) & {re.sub(r"[-_.]+", "-", package).lower()}
        edit = self._last(ctx.turn, "edit_file")
        if not listed and edit is None:
            args = {"path": self.requirements, "append_line": package}
            return Decision(tool_calls=(ToolRequest("edit_file", args),))
        if edit is not None and edit.status != "ok":
            return Decision(text=edit.error or "edit failed", failed=edit.error or "edit failed")
        install = self._last(ctx.turn, "run_command", {"command": self.install_command})
        if install is None:
            args = {"command": self.install_command}
            return Decision(tool_calls=(ToolRequest("run_command", args),))
        if install.status != "ok":
            line = _last_line(install.result)
            return Decision(text=self._t["install_failed"].format(line=line), failed=line)
        completed = list(ctx.working_memory.get("completed") or [])
        patch = {
            "completed": [
                *completed,
                f"fixed: added {package} to {self.requirements}",
                f"installed: {self.requirements} into the project environment",
            ],
            "next_action": "verify the app starts",
            "facts": {"requirements_fixed": True},
        }
        return Decision(tool_calls=(ToolRequest(UPDATE_MEMORY, {"patch": patch}),))

    def _verify(self, ctx: ModelContext) -> Decision:
        since = self._after_last(ctx.turn, UPDATE_MEMORY)
        start = self._last(since, "run_command", {"command": self.start_command})
        if start is None:
            return Decision(
                new_run=self._t["run_verify"], text=self._t["verify"], tool_calls=(self._start(),)
            )
        if start.status != "ok":
            line = _last_line(start.result)
            return Decision(text=self._t["verify_failed"].format(line=line), failed=line)
        return Decision(tool_calls=(self._remember(ctx, "app_starts"),))

    # -- helpers

    @staticmethod
    def _diagnosed_in_turn(turn: Sequence[TurnResult]) -> tuple[str, str] | None:
        for item in turn:
            patch = item.arguments.get("patch") if item.name == UPDATE_MEMORY else None
            if item.status == "ok" and isinstance(patch, dict):
                module = (patch.get("facts") or {}).get("missing_module")
                if module is not None:
                    return str(module), str((patch.get("errors") or [""])[0])
        return None

    def _start(self) -> ToolRequest:
        return ToolRequest("run_command", {"command": self.start_command})

    def _remember(self, ctx: ModelContext, *flags: str) -> ToolRequest:
        completed = list(ctx.working_memory.get("completed") or [])
        patch = {
            "completed": [*completed, "verified: app starts (exit 0)"],
            "next_action": None,
            "facts": dict.fromkeys(flags, True),
        }
        return ToolRequest(UPDATE_MEMORY, {"patch": patch})

    @staticmethod
    def _last(
        turn: Sequence[TurnResult], name: str, arguments: dict[str, Any] | None = None
    ) -> TurnResult | None:
        for item in reversed(turn):
            if item.name == name and (arguments is None or item.arguments == arguments):
                return item
        return None

    @staticmethod
    def _after_last(turn: Sequence[TurnResult], name: str) -> list[TurnResult]:
        for index in range(len(turn) - 1, -1, -1):
            if turn[index].name == name:
                return list(turn[index + 1 :])
        return list(turn)

    def _run_seq_of_diagnosis(self, ctx: ModelContext) -> str:
        seqs = {run.run_id: run.seq for run in ctx.runs}
        for call in ctx.tool_history:
            if call.tool == "run_command" and call.arguments == {"command": self.start_command}:
                return str(seqs.get(call.run_id or "", "?"))
        return "?"


# ------------------------------------------------------------------- openai model

#: A pseudo-tool through which a chat model declares a new task phase (a new run).
BEGIN_PHASE = ToolSpec(
    "begin_phase",
    "Start a new phase of the task (a new run), e.g. 'fix requirements.txt'. Call it "
    "together with the phase's first tool call.",
    {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    changes_project=False,
)

_SYSTEM_PROMPT = """You are a coding agent working in a project directory through tools.
Your state lives in a session store: keep working memory up to date with update_memory
(goal, completed, errors, next_action, facts). Do not repeat a diagnosis you already
made: read working memory and tool history first. Declare each task phase with
begin_phase (diagnose, fix, verify). Reply briefly when the user's request is handled."""


class OpenAIChatModel:
    """A model behind an OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: e.g. ``https://api.openai.com/v1`` (``/chat/completions`` is appended).
        api_key: sent as ``Authorization: Bearer``; None sends no header (local servers).
        model: the model name, e.g. ``gpt-4o-mini``.
        client: an ``httpx.Client`` to use (tests pass one with a MockTransport); by
            default one is created and closed by :meth:`close`.
        timeout_s: request timeout in seconds.
        start_command: told to the model so it knows how the project starts.
    """

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        model: str,
        client: httpx.Client | None = None,
        timeout_s: float = 120.0,
        start_command: str | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._api_key = api_key
        self._owns_client = client is None
        self._client = client or httpx.Client(timeout=timeout_s)
        self.start_command = start_command

    def close(self) -> None:
        """Close the HTTP client if this model created it."""
        if self._owns_client:
            self._client.close()

    def decide(self, context: ModelContext) -> Decision:
        """Ask the endpoint for the next step and parse its tool calls or reply.

        Raises:
            ModelError: HTTP failure, or an answer that is not a chat completion.
        """
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": self._system(context)}]
            + [_chat_message(m) for m in context.messages],
            "tools": [t.as_openai() for t in (*context.tools, BEGIN_PHASE)],
        }
        try:
            response = self._client.post(
                f"{self.base_url}/chat/completions", json=body, headers=headers
            )
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ModelError(f"chat completion failed: {exc}") from exc
        decision = parse_completion(data)
        if decision.model is None and decision.usage:  # the model this request named
            decision = replace(decision, model=self.model)
        return decision

    def _system(self, ctx: ModelContext) -> str:
        history = [
            {
                "tool": c.tool,
                "arguments": c.arguments,
                "status": c.status.value,
                "error": c.error,
                "run_id": c.run_id,
            }
            for c in ctx.tool_history[-30:]
        ]
        parts = [
            _SYSTEM_PROMPT,
            f"Working memory: {json.dumps(ctx.working_memory, ensure_ascii=False)}",
            f"Tool history (oldest first): {json.dumps(history, ensure_ascii=False)}",
            f"Current phase: {ctx.run_input!r}",
        ]
        if ctx.summary is not None:
            parts.append(f"Summary of the earlier conversation: {ctx.summary}")
        if self.start_command:
            parts.append(f"The project starts with: {self.start_command}")
        return "\n\n".join(parts)


def _chat_message(message: dict[str, Any]) -> dict[str, Any]:
    keep = ("role", "content", "name", "tool_calls", "tool_call_id")
    return {k: message[k] for k in keep if message.get(k) is not None or k == "content"}


def parse_completion(data: Any) -> Decision:
    """Turn a chat-completions response body into a :class:`Decision`.

    ``begin_phase`` calls become ``new_run``; ``usage`` is mapped to ``input_tokens``,
    ``output_tokens`` and ``total_tokens``, and its details' ``cached_tokens`` and
    ``reasoning_tokens`` to ``cache_read_tokens`` and ``reasoning_tokens``; the body's
    ``model`` (the model that answered) is the decision's.

    Raises:
        ModelError: the body has no ``choices[0].message`` or a tool call's
            ``arguments`` is not a JSON object.
    """
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError) as exc:
        raise ModelError("chat completion has no choices[0].message") from exc
    calls: list[ToolRequest] = []
    new_run = None
    for raw in message.get("tool_calls") or []:
        function = raw.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            raise ModelError(f"tool call arguments are not JSON: {exc}") from exc
        if not isinstance(arguments, dict):
            raise ModelError("tool call arguments must be a JSON object")
        if function.get("name") == BEGIN_PHASE.name:
            new_run = str(arguments.get("title") or "next phase")
            continue
        calls.append(ToolRequest(str(function.get("name")), arguments, id=str(raw["id"])))
    usage = data.get("usage") or {}
    counts = {
        mine: int(usage[theirs])
        for mine, theirs in (
            ("input_tokens", "prompt_tokens"),
            ("output_tokens", "completion_tokens"),
            ("total_tokens", "total_tokens"),
        )
        if isinstance(usage.get(theirs), int)
    }
    for mine, details, theirs in (
        ("cache_read_tokens", "prompt_tokens_details", "cached_tokens"),
        ("reasoning_tokens", "completion_tokens_details", "reasoning_tokens"),
    ):
        part = usage.get(details)
        value = part.get(theirs) if isinstance(part, dict) else None
        if type(value) is int and value > 0:
            counts[mine] = value
    text = message.get("content")
    if not calls and text is None and new_run is None:
        text = ""
    model = data.get("model")
    return Decision(
        tool_calls=tuple(calls),
        text=text,
        new_run=new_run,
        usage=counts,
        model=model if isinstance(model, str) and model else None,
    )
