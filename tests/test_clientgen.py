"""The client generator (scripts/generate_client.py): how it reads an answer, and that
mypy sees the generated client methods with their real signatures and results."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from agentsession import clientcore, models

ROOT = Path(__file__).resolve().parent.parent


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_client", ROOT / "scripts" / "generate_client.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GENERATOR = _generator()


def _read(result: str, member: str | None, answer: Any) -> Any:
    """What the generated parser of ``result`` makes of the JSON answer ``answer``."""
    parser = eval(GENERATOR._parse(result, member), {**vars(clientcore), **vars(models)})
    return parser(httpx.Response(200, json=answer))


def test_a_result_in_a_member_of_the_answer() -> None:
    """``{"count": n}`` for an int (count_sessions), ``{"deleted": b}`` for a bool,
    ``{"message": m-or-null}`` for an optional model."""
    assert _read("int", "count", {"count": 3}) == 3
    assert _read("bool", "deleted", {"deleted": False}) is False
    assert _read("Message | None", "message", {"message": None}) is None
    message = {
        "message_id": "msg_1",
        "session_id": "ses_1",
        "seq": 1,
        "role": "user",
        "content": "hi",
        "created_at": "2026-01-01T00:00:00Z",
    }
    read = _read("Message | None", "message", {"message": message})
    assert isinstance(read, models.Message) and read.seq == 1


def test_a_result_it_cannot_read_is_refused() -> None:
    """A scalar needs its member; a union without one has no parser."""
    for result, member in (("int", None), ("Message | None", None), ("tuple[int]", "x")):
        with pytest.raises(ValueError, match="no parser"):
            GENERATOR._parse(result, member)


PROBE = """
from agentsession.client import AsyncSessionClient, SessionClient

client = SessionClient("http://x", "k")
reveal_type(client.fork_session)
reveal_type(client.whoami)
client.fork_session(session_id=1)


async def main() -> None:
    aclient = AsyncSessionClient("http://x", "k")
    reveal_type(await aclient.find_tool_call(session_id="s", tool="t"))
    reveal_type(await aclient.modify_working_memory(session_id="s", fn=dict))
"""


@pytest.mark.slow
def test_mypy_sees_each_client_method_with_its_signature_and_result(tmp_path: Path) -> None:
    """The bindings of agentsession.clientgen keep each flow's keyword arguments and
    result for mypy (strict), on both clients; a wrong argument type is an error."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--config-file", "", str(probe)],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,  # its .mypy_cache there
    )
    notes = [line.split(": ", 2)[-1] for line in run.stdout.splitlines()]
    fork = next((note for note in notes if "def (*, session_id: str" in note), None)
    assert fork is not None, run.stdout
    assert "ttl_seconds: float | None =" in fork and fork.endswith('agentsession.models.Session"')
    assert 'Revealed type is "def () -> dict[str, Any]"' in notes
    assert 'Revealed type is "agentsession.models.ToolCall | None"' in notes
    assert 'Revealed type is "agentsession.models.WorkingMemory"' in notes
    errors = [line for line in run.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 1 and 'Argument "session_id"' in errors[0], run.stdout
