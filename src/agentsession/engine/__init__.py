"""A small coding agent that keeps all of its state in a :class:`SessionManager`.

Three parts, each replaceable:

* :mod:`.model`: what decides the next step (:class:`ScriptedModel`, a deterministic
  policy; :class:`OpenAIChatModel`, any OpenAI-compatible chat-completions endpoint);
* :mod:`.tools`: what acts on a project directory (run a command, read/edit a file,
  update working memory), confined to that directory;
* :mod:`.loop`: :class:`AgentEngine`, the main loop that records every message, tool
  call and run through the SessionManager, so another process can continue the task.
"""

from .loop import AgentEngine, EngineEvent, Reply
from .model import (
    Decision,
    Model,
    ModelContext,
    ModelError,
    OpenAIChatModel,
    ScriptedModel,
    ToolRequest,
    TurnResult,
)
from .tools import ProjectTools, ToolError, ToolOutcome, ToolSpec

__all__ = [
    "AgentEngine",
    "Decision",
    "EngineEvent",
    "Model",
    "ModelContext",
    "ModelError",
    "OpenAIChatModel",
    "ProjectTools",
    "Reply",
    "ScriptedModel",
    "ToolError",
    "ToolOutcome",
    "ToolRequest",
    "ToolSpec",
    "TurnResult",
]
