"""An export cut at a line boundary (issue 25, newcomer report): ``head -N`` of a
whole export is refused like a file cut mid-line, since format version 5 ends every
export with an ``end`` line counting the lines before it. Crafted files of every
other kind are in tests/test_transfer_crafted.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsession import ImportSourceError, RecordWrite, SessionManager
from agentsession.cli.app import build_app
from agentsession.transfer.jsonl import FORMAT_VERSION, export_session, import_session
from test_transfer_crafted import held, refused, store

runner = CliRunner()


def rich_export(url: str) -> list[str]:
    """The lines of an export of a session with every kind of line: working memory
    and its history, messages, tool calls, runs with steps, records and summaries
    (a rewind's hidden messages are not exported, so one is rewound too)."""
    with SessionManager.from_url(url) as manager:
        s = manager.create_session(user_id="alice", agent="a", working_memory={"n": 0})
        scope = {"session_id": s.session_id, "user_id": "alice"}
        for n in range(1, 4):
            manager.append_messages(
                **scope,
                messages=[{"role": "user", "content": f"m{n}"}] * 2,
                working_memory_patch={"n": n},
            )
        manager.rewind_session(**scope, to_seq=5)
        manager.record_tool_call(**scope, tool="t", arguments={"a": 1}, result=1)
        manager.record_tool_call(**scope, tool="u", arguments={}, result=2)
        for output in ("x", "y"):
            run = manager.start_run(**scope, input={"q": output})
            manager.add_run_step(**scope, run_id=run.run_id, kind="tool", name="t")
            manager.finish_run(**scope, run_id=run.run_id, status="SUCCEEDED", output=output)
        manager.put_records(
            **scope,
            records=[RecordWrite(namespace="ns", key=f"k{i}", data=b"\0x") for i in range(2)],
        )
        for end in (2, 4):
            manager.add_summary(**scope, text=f"to {end}", from_seq=1, to_seq=end, model="m")
        lines = [json.dumps(x) + "\n" for x in export_session(manager, **scope)]
    kinds = {json.loads(x)["type"] for x in lines}
    assert kinds == {
        "session",
        "working_memory",
        "memory",
        "message",
        "tool_call",
        "run",
        "record",
        "summary",
        "end",
    }
    return lines


def test_an_export_cut_after_any_line_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """``head -N`` of a rich export for every N short of the whole: exit 2, one line
    naming the file and its last line and saying it ends early, nothing written; the
    whole file imports."""
    url = store(tmp_path)
    lines = rich_export(url)
    assert json.loads(lines[0])["format_version"] == FORMAT_VERSION == 5
    assert json.loads(lines[-1]) == {
        "type": "end",
        "end": {
            "counts": {
                "working_memory": 1,
                "memory": 4,
                "message": 5,
                "tool_call": 2,
                "run": 2,
                "record": 2,
                "summary": 2,
            }
        },
    }
    path = tmp_path / "cut.jsonl"
    for n in range(1, len(lines)):
        path.write_text("".join(lines[:n]), encoding="utf-8")
        args = ["import", "jsonl", str(path), "--user", "bob"]
        refused(url, args, path, f"line {n}", "ends early")
    path.write_text("".join(lines), encoding="utf-8")
    before = len(held(url))
    done = runner.invoke(build_app(), ["import", "jsonl", str(path), "--user", "bob", "--url", url])
    assert done.exit_code == 0, done.output
    assert len(held(url)) == before + 1


def test_an_end_line_that_does_not_match_is_refused(tmp_path: Path) -> None:
    """A line dropped from the middle, a line after the end line, and an end line
    whose counts are not counts: each refused naming its line, nothing written."""
    url = store(tmp_path)
    lines = rich_export(url)
    call = next(i for i, x in enumerate(lines) if json.loads(x)["type"] == "tool_call")
    dropped = lines[:call] + lines[call + 1 :]
    end = json.loads(lines[-1])
    cases = {
        "dropped": ("".join(dropped), len(dropped), "2 tool_call lines, read 1"),
        "after end": ("".join(lines) + lines[1], len(lines) + 1, "after the end line"),
        "bad counts": (
            "".join(lines[:-1]) + json.dumps({**end, "end": {"counts": [1]}}) + "\n",
            len(lines),
            "end.counts",
        ),
    }
    path = tmp_path / "bad.jsonl"
    for text, number, words in cases.values():
        path.write_text(text, encoding="utf-8")
        refused(url, ["import", "jsonl", str(path), "--user", "bob"], path, f"line {number}", words)


def test_an_old_export_without_an_end_line_still_imports(tmp_path: Path) -> None:
    """A file of version 4 (written before end lines) imports as before, and an end
    line in it is a line of an unknown type."""
    url = store(tmp_path)
    lines = [json.loads(x) for x in rich_export(url)]
    old = [{**lines[0], "format_version": 4}, *lines[1:-1]]
    with SessionManager.from_url(url) as manager:
        done = import_session(manager, enumerate(old, start=1), user_id="bob")
        assert done.counts["message"] == 5
        with pytest.raises(ImportSourceError, match=f"line {len(lines)}: the type must be"):
            import_session(manager, enumerate([*old, lines[-1]], start=1), user_id="bob")
