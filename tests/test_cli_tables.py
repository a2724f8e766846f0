"""Every table command at 80 and at 200 columns: no line past the width, and the ids
the next command takes are printed whole (and work there)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli.app import build_app
from agentsession.cli.fit import Column, FitTable
from agentsession.cli.render import short
from agentsession.ids import ID_PATTERN

runner = CliRunner()
LONG = "fix the start-up failure of the flask app after the requests upgrade"


@pytest.fixture
def db(tmp_path: Path) -> dict[str, str]:
    """A session with long text everywhere: title, external key, messages, a run with a
    failed step and a long error, a tool call, a rewind."""
    url = f"sqlite:///{tmp_path / 'tables.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        scope = {"user_id": "alice-with-a-longer-user-id"}
        s = sm.create_session(**scope, agent="coding-agent", title=LONG, external_key=LONG)
        sid = s.session_id
        turn = [{"role": "user", "content": LONG * 3}, {"role": "assistant", "content": LONG}]
        sm.append_messages(session_id=sid, **scope, messages=turn)
        run = sm.start_run(session_id=sid, **scope, input=LONG)
        step = {"kind": "tool", "name": LONG, "status": "error", "error": LONG}
        sm.add_run_step(session_id=sid, **scope, run_id=run.run_id, **step)
        call = {"tool": "run_command", "arguments": {"command": LONG}, "result": "ok"}
        sm.record_tool_call(session_id=sid, **scope, run_id=run.run_id, **call)
        sm.finish_run(session_id=sid, **scope, run_id=run.run_id, status="FAILED", error=LONG)
        sm.rewind_session(session_id=sid, **scope, to_seq=1)
    return {"url": url, "sid": sid, "run_id": run.run_id, "user": scope["user_id"]}


def _tables(db: dict[str, str]) -> dict[str, list[str]]:
    sid = db["sid"]
    return {
        "list": ["sessions", "list"],
        "show": ["sessions", "show", sid],
        "messages": ["sessions", "messages", sid],
        "memory": ["sessions", "memory", sid],
        "tools": ["sessions", "tools", sid],
        "runs": ["sessions", "runs", sid],
        "steps": ["sessions", "steps", sid, db["run_id"]],
        "audit": ["sessions", "audit", sid],
        "rewinds": ["sessions", "rewinds", sid],
        "rewound": ["sessions", "rewound", sid, "1"],
        "close": ["close", sid],
        "restore": ["restore", sid],
    }


def _run(db: dict[str, str], args: list[str], width: int) -> str:
    common = ["--url", db["url"], "--user", db["user"]]
    result = runner.invoke(build_app(), [*args, *common], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("width", [80, 200])
def test_every_table_fits_the_width(db: dict[str, str], width: int) -> None:
    """No line of any table command is wider than the terminal (the ``more:
    --cursor`` line is the one exception: a cursor is copied whole)."""
    for name, args in _tables(db).items():
        out = _run(db, [*args, "--limit", "1"] if name == "audit" else args, width)
        lines = [line for line in out.splitlines() if not line.startswith("more: --cursor ")]
        assert max(len(line) for line in lines) <= width, (name, out)


@pytest.mark.parametrize("width", [80, 200])
def test_the_ids_the_next_command_takes_are_whole(db: dict[str, str], width: int) -> None:
    """``sessions list`` prints each session id whole, ``sessions runs`` each run id,
    ``sessions rewinds`` each number; copied from the output, they work."""
    listed = _run(db, ["sessions", "list"], width)
    [sid] = re.findall(r"\bses_[a-z0-9]{26}\b", listed)
    assert sid == db["sid"]
    runs = _run(db, ["sessions", "runs", sid], width)
    [run_id] = re.findall(r"\brun_[a-z0-9]{26}\b", runs)
    assert run_id == db["run_id"]
    steps = _run(db, ["sessions", "steps", sid, run_id, "--json"], width)
    assert '"kind": "tool"' in steps
    rewinds = _run(db, ["sessions", "rewinds", sid], width)
    assert re.search(r"│\s+1 │\s+1 │", rewinds), rewinds
    tools = _run(db, ["sessions", "tools", sid], width)
    if width >= 200:
        assert run_id in tools
    else:  # the run id is left out before the duration
        assert "not shown at this width: run " in tools and "┃ ms ┃" in tools


def test_narrow_tables_name_the_columns_they_leave_out(db: dict[str, str]) -> None:
    """At 80 columns the listing leaves out its least needed columns and says which;
    at 200 it shows them all."""
    narrow = " ".join(_run(db, ["sessions", "list"], 80).split())
    assert "not shown at this width: user," in narrow and "external key" in narrow
    assert "(--json has every field)" in narrow
    wide = _run(db, ["sessions", "list"], 200)
    assert "not shown" not in wide and "external key" in wide and "coding-agent" in wide


def test_a_fit_table_drops_by_rank_and_never_cuts_a_whole_column() -> None:
    """The highest drop rank goes first; a column that does not wrap keeps its width;
    a wrapping one gets what is left."""
    columns = [Column("id"), Column("a", drop=1), Column("b", drop=2), Column("text", wrap=5)]
    table = FitTable("t", columns, [["x" * 30, "a" * 10, "b" * 10, "word " * 20]], "no rows")
    assert table.fitting(200) == [0, 1, 2, 3]
    assert table.fitting(60) == [0, 1, 3]  # 30 + 10 + 5 + 13 of borders = 58
    assert table.fitting(40) == [0, 3]
    assert table.fitting(10) == [0, 3]  # rank 0 is never left out
    # a wrapping column is never narrower than a word holding an id: 30 + 30 + 7 > 60
    with_id = [["x" * 30, "a" * 10, "b" * 10, f"see run_{'a' * 26}, then more"]]
    assert FitTable("t", columns, with_id, "no rows").fitting(60) == [0, 3]


@pytest.mark.parametrize("width", [80, 100, 120, 200])
def test_no_id_is_split_across_lines(db: dict[str, str], width: int) -> None:
    """Every id a table prints is whole on one line, in the text columns too (the run
    and call ids in the audit details): an id that starts in the output ends there."""
    for name, args in _tables(db).items():
        ids = set(ID_PATTERN.findall(_run(db, [*args, "--json"], 200)))
        out = _run(db, args, width)
        for found in ids:
            assert out.count(found[:10]) == out.count(found), (name, width, found, out)


def test_audit_keeps_the_version_change_and_leaves_out_details_first(db: dict[str, str]) -> None:
    """At 80 columns "from which version to which" stays, the details go before the
    actor; at 200 every column is there, the details as ``key: value`` pairs."""
    narrow = _run(db, ["sessions", "audit", db["sid"]], 80)
    assert "┃ version ┃" in narrow and "- → 1" in narrow
    assert "not shown at this width: actor, details" in " ".join(narrow.split())
    short_actor = _run(db, ["sessions", "audit", db["sid"], "--user", "x", "--admin"], 80)
    assert "┃ version ┃" in short_actor and "details" in short_actor
    wide = _run(db, ["sessions", "audit", db["sid"]], 200)
    assert f"run_id: {db['run_id']}" in wide and "not shown" not in wide


def test_tools_leave_out_the_run_id_before_the_duration(db: dict[str, str]) -> None:
    narrow = _run(db, ["sessions", "tools", db["sid"]], 80)
    assert "┃ ms ┃" in narrow and db["run_id"] not in narrow
    assert "not shown at this width: run (--json has every field)" in " ".join(narrow.split())


def test_empty_listings_say_so_in_one_line(db: dict[str, str]) -> None:
    """A session without tool calls or runs: one line, not a table of headers."""
    with SessionManager.from_url(db["url"]) as sm:
        sid = sm.create_session(user_id=db["user"]).session_id
    expected = {
        ("sessions", "tools"): "no tool calls\n",
        ("sessions", "runs"): "no runs\n",
        ("sessions", "messages"): "no messages\n",
        ("sessions", "rewinds"): "no rewinds\n",
    }
    for args, line in expected.items():
        assert _run(db, [*args, sid], 80) == line
    assert _run(db, ["sessions", "list", "--agent", "nobody"], 80) == "no sessions\n"


def test_short_never_cuts_inside_an_id() -> None:
    """Cut before an id that would be cut, so no partial id is printed."""
    run_id = "run_" + "a" * 26
    assert short(f"finished {run_id} ok", 20) == "finished …"
    assert short(f"finished {run_id} ok", 60) == f"finished {run_id} ok"
    assert short(f"finished {run_id} and more text here", 40) == f"finished {run_id}…"
    assert short(f"finished {run_id} and more text here", 35) == "finished …"


def test_search_at_80_columns_gives_the_snippet_the_room(tmp_path: Path) -> None:
    """``search`` at 80 columns: the session id and the match whole, the score and the
    role left out (and named), the snippet at least 26 characters a line, so the
    matched identifier is whole on one line; at 200 every column is shown."""
    url = f"sqlite:///{tmp_path / 'search.db'}"
    text = "please fix the failing startup: the server reads requirements.txt and exits"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        sid = sm.create_session(user_id="alice").session_id
        sm.append_messages(
            session_id=sid, user_id="alice", messages=[{"role": "user", "content": text}]
        )
        for i in range(12):  # a two-digit tool call seq: a wider match column
            sm.record_tool_call(
                session_id=sid,
                user_id="alice",
                tool="read",
                arguments={"p": f"requirements.txt {i}"},
            )
    db = {"url": url, "user": "alice"}
    narrow = _run(db, ["search", "requirements.txt"], 80)
    lines = narrow.splitlines()
    assert max(len(line) for line in lines) <= 80, narrow
    assert "not shown at this width: role, score" in " ".join(narrow.split())
    rows = [line for line in lines if line.startswith("│")]
    snippets = [line.split("│")[3] for line in rows]
    assert min(len(cell) for cell in snippets) >= 26 + 2, narrow  # one space each side
    assert sum(sid in line for line in rows) == 13, narrow
    assert "tool_call 12" in narrow and sum("requirements.txt" in s for s in snippets) == 13
    wide = _run(db, ["search", "requirements.txt"], 200)
    assert "┃ role ┃" in wide and "score" in wide and "not shown" not in wide
