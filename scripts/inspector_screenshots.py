"""Screenshots of the inspector's views for docs/inspector.md and the README.

Seeds an in-memory store with a small, realistic session (a coding agent fixing a
failing test: chat, Anthropic and Responses messages, tool calls and their results, two
runs, a summary, a rewind, memory history), serves the service's app on a free loopback
port, logs in through the form with Debian's chromium (Playwright) and saves one PNG
per view, the first 1280 x 800 px of the page, so the files stay small (Sessions,
Session, Memory, Runs, Records, Context, Forks, and the confirm page of a write)::

    python scripts/inspector_screenshots.py [--out docs/images] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import json
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import uvicorn
from playwright.sync_api import Page, sync_playwright

from agentsession import RecordWrite, SessionManager
from agentsession.http.app import create_app
from agentsession.http.keys import MemoryKeyStore
from agentsession.settings import Settings


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def _history(sm: SessionManager, sid: str, run_id: str) -> None:
    a: dict[str, Any] = {"session_id": sid, "user_id": "alice"}
    sm.append_messages(
        **a,
        messages=[
            {"role": "system", "content": "You are a careful coding agent. Run the tests."},
            {"role": "user", "content": "test_parse_dates fails on main. Can you fix it?"},
            {
                "role": "assistant",
                "content": "Let me run the failing test first.",
                "run_id": run_id,
                "tool_calls": [_call("call_1", "run_tests", {"select": "test_parse_dates"})],
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "run_id": run_id,
                "content": "FAILED tests/test_dates.py::test_parse_dates\n"
                "AssertionError: 2024-02-30 parsed as 2024-03-01",
            },
            {
                "role": "assistant",
                "run_id": run_id,
                "content": [
                    {"type": "text", "text": "The parser rolls invalid days over. Reading it."},
                    {
                        "type": "tool_use",
                        "id": "toolu_7",
                        "name": "read_file",
                        "input": {"path": "src/dates.py", "lines": [40, 60]},
                    },
                ],
            },
            {
                "role": "user",
                "run_id": run_id,
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_7",
                        "content": "def parse(text):\n    y, m, d = map(int, text.split('-'))\n"
                        "    return date(y, m, 1) + timedelta(days=d - 1)",
                    }
                ],
            },
        ],
        working_memory_patch={"plan": ["reproduce", "fix parse()", "run tests"], "step": 2},
    )
    sm.append_messages(
        **a,
        messages=[
            {
                "type": "function_call",
                "call_id": "fc_9",
                "name": "apply_patch",
                "run_id": run_id,
                "arguments": json.dumps({"file": "src/dates.py", "patch": "return date(y, m, d)"}),
            },
            {
                "type": "function_call_output",
                "call_id": "fc_9",
                "run_id": run_id,
                "output": "patched 1 file",
            },
            {
                "role": "assistant",
                "run_id": run_id,
                "content": "Fixed: parse() now refuses 2024-02-30 instead of rolling it over.",
            },
        ],
        working_memory_patch={"step": 3, "fixed": "src/dates.py"},
    )


def seed(sm: SessionManager) -> str:
    """A few sessions of alice; returns the id of the one the screenshots open."""
    for title, agent in (("Nightly dependency bump", "ci-bot"), ("Triage issue 212", "triage")):
        done = sm.create_session(user_id="alice", agent=agent, title=title, ttl_seconds=86400)
        sm.append_message(
            session_id=done.session_id,
            user_id="alice",
            message={"role": "user", "content": f"Start: {title}"},
        )
    sm.close_session(session_id=done.session_id, user_id="alice", reason="done")
    s = sm.create_session(
        user_id="alice",
        agent="coder",
        title="Fix test_parse_dates",
        metadata={"repo": "acme/dates", "branch": "fix-parse"},
        working_memory={"goal": "make test_parse_dates pass", "plan": ["reproduce"]},
        ttl_seconds=7 * 86400,
    )
    a: dict[str, Any] = {"session_id": s.session_id, "user_id": "alice"}
    run = sm.start_run(**a, input="fix test_parse_dates", lease_seconds=120)
    for kind, name, ms in (
        ("model", "plan", 840),
        ("tool", "run_tests", 2310),
        ("tool", "read_file", 12),
    ):
        began = datetime.now(UTC)
        sm.add_run_step(
            **a,
            run_id=run.run_id,
            kind=kind,
            name=name,
            output={"ok": True},
            started_at=began,
            ended_at=began + timedelta(milliseconds=ms),
        )
    _history(sm, s.session_id, run.run_id)
    sm.add_run_step(
        **a,
        run_id=run.run_id,
        kind="tool",
        name="apply_patch",
        status="error",
        error="patch did not apply cleanly; retried",
    )
    sm.finish_run(
        **a,
        run_id=run.run_id,
        status="SUCCEEDED",
        output="tests pass",
        usage={"input_tokens": 5120, "output_tokens": 830, "total_tokens": 5950},
    )
    sm.add_summary(
        **a,
        text="The user reported test_parse_dates failing; the agent reproduced "
        "it and found parse() rolls invalid days over.",
        from_seq=1,
        to_seq=4,
    )
    sm.append_messages(
        **a,
        messages=[
            {"role": "user", "content": "Also rename parse() to parse_date()."},
            {"role": "assistant", "content": "Renaming everywhere…"},
        ],
    )
    count = sm.get_session(**a).message_count
    sm.rewind_session(**a, to_seq=count - 2)
    sm.append_message(**a, message={"role": "user", "content": "Thanks, ship it."})
    sm.put_records(
        **a,
        records=[
            RecordWrite("files", "src/dates.py", b"x" * 1840, {"sha": "9f2c1e7", "lines": 61}),
            RecordWrite("files", "tests/test_dates.py", b"x" * 960, {"sha": "41ab0d3"}),
            RecordWrite("artifacts", "patch.diff", b"x" * 212, {"applied": True}),
        ],
    )
    sm.update_shared_memory(
        scope="user", agent="coder", user_id="alice", data={"style": "small commits, tests first"}
    )
    fork = sm.fork_session(**a, at_seq=4, title="Fix test_parse_dates, other approach")
    sm.fork_session(
        session_id=fork.session_id, user_id="alice", at_seq=2, title="Validate in parse()"
    )
    sm.append_message(
        session_id=fork.session_id,
        user_id="alice",
        message={"role": "user", "content": "Try validating in parse() instead."},
    )
    return s.session_id


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def shoot(page: Page, url: str, out: Path, name: str) -> None:
    page.goto(url)
    path = out / f"inspector-{name}.png"
    page.screenshot(path=str(path))
    print(path, f"{path.stat().st_size // 1024} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/images")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    sm = SessionManager.from_url("memory://")
    keys = MemoryKeyStore()
    token = keys.create(user_id="alice")[1]
    sid = seed(sm)
    app = create_app(sm, Settings(url="memory://"), keys=keys)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}/ui"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=options.chromium)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{base}/")
        page.fill("input[name=api_key]", token)
        page.click("button[type=submit]")
        shoot(page, f"{base}/", out, "sessions")
        shoot(page, f"{base}/sessions/{sid}", out, "session")
        shoot(page, f"{base}/sessions/{sid}/memory?at=6&base=0", out, "memory")
        shoot(page, f"{base}/sessions/{sid}/runs", out, "runs")
        shoot(page, f"{base}/sessions/{sid}/records", out, "records")
        shoot(page, f"{base}/sessions/{sid}/context?budget=200", out, "context")
        shoot(page, f"{base}/sessions/{sid}/forks", out, "forks")
        version = sm.get_session(session_id=sid, user_id="alice").version
        shoot(page, f"{base}/sessions/{sid}/do/rewind?v={version}&seq=6", out, "confirm")
        browser.close()
    server.should_exit = True
    sm.close()


if __name__ == "__main__":
    main()
