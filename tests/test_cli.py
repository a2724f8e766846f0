"""The agentsession CLI through typer's CliRunner on a temporary SQLite store."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentsession import SessionManager
from agentsession.cli import server as server_cli
from agentsession.cli.app import build_app
from agentsession.cli.common import EXIT_CODES, exit_code_for
from agentsession.errors import (
    IllegalTransition,
    SessionNotFound,
    StoreError,
    ValidationError,
    VersionConflict,
)

runner = CliRunner()


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A migrated SQLite store holding one session of alice with a message and memory."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        s = sm.create_session(user_id="alice", agent="coding", title="first")
        sm.append_message(
            session_id=s.session_id, user_id="alice", message={"role": "user", "content": "hi"}
        )
        sm.update_working_memory(
            session_id=s.session_id, user_id="alice", data={"goal": "say hi", "facts": {"a": 1}}
        )
        run = sm.start_run(session_id=s.session_id, user_id="alice", input="greet")
        sm.record_tool_call(
            session_id=s.session_id,
            user_id="alice",
            tool="read_file",
            arguments={"path": "x"},
            result="ok",
            run_id=run.run_id,
        )
        sm.finish_run(
            session_id=s.session_id, user_id="alice", run_id=run.run_id, status="SUCCEEDED"
        )
    return url


def _sid(url: str) -> str:
    with SessionManager.from_url(url) as sm:
        return sm.list_sessions(user_id="alice").items[0].session_id


def invoke(*args: str) -> object:
    """Run the CLI in-process and return click's Result."""
    return runner.invoke(build_app(), list(args))


def test_list_json_is_valid_and_scoped_to_the_user(url: str) -> None:
    """--json prints parseable JSON; another user sees no sessions."""
    result = invoke("sessions", "list", "--url", url, "--user", "alice", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [s["user_id"] for s in data["items"]] == ["alice"] and data["next_cursor"] is None
    other = invoke("sessions", "list", "--url", url, "--user", "bob", "--json")
    assert json.loads(other.stdout)["items"] == []


def test_list_by_parent_shows_the_forks(url: str) -> None:
    """--parent lists the forks made from that session only."""
    sid = _sid(url)
    with SessionManager.from_url(url) as sm:
        fork = sm.fork_session(session_id=sid, user_id="alice", at_seq=1)
    result = invoke("sessions", "list", "--url", url, "--user", "alice", "--parent", sid, "--json")
    assert result.exit_code == 0, result.output
    assert [s["session_id"] for s in json.loads(result.stdout)["items"]] == [fork.session_id]
    assert json.loads(result.stdout)["items"][0]["parent_session_id"] == sid


def test_listings_page_with_limit_and_cursor(url: str) -> None:
    """messages/tools/runs/audit take --limit and --cursor; a table says how to go on."""
    sid = _sid(url)
    with SessionManager.from_url(url) as sm:
        sm.append_messages(
            session_id=sid,
            user_id="alice",
            messages=[{"role": "user", "content": f"m{i}"} for i in range(2, 6)],
        )
    first = invoke(
        "sessions", "messages", sid, "--url", url, "--user", "alice", "--limit", "2", "--json"
    )
    page = json.loads(first.stdout)
    assert [m["seq"] for m in page["items"]] == [4, 5] and page["has_more"] is True
    older = invoke(
        "sessions",
        "messages",
        sid,
        "--url",
        url,
        "--user",
        "alice",
        "--limit",
        "2",
        "--cursor",
        page["next_cursor"],
        "--json",
    )
    assert [m["seq"] for m in json.loads(older.stdout)["items"]] == [2, 3]
    table = invoke("sessions", "audit", sid, "--url", url, "--user", "alice", "--limit", "1")
    assert table.exit_code == 0 and "more: --cursor " in table.stdout
    for command in ("tools", "runs"):
        done = invoke("sessions", command, sid, "--url", url, "--user", "alice", "--json")
        assert json.loads(done.stdout)["has_more"] is False
    bad = invoke("sessions", "runs", sid, "--url", url, "--user", "alice", "--cursor", "x")
    assert bad.exit_code == exit_code_for(ValidationError("x"))


def test_global_options_work_before_the_subcommand(url: str) -> None:
    """--url/--user/--json given to the root apply to the command."""
    result = invoke("--url", url, "--user", "alice", "--json", "sessions", "show", _sid(url))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["title"] == "first"


def test_human_tables(url: str) -> None:
    """Without --json the commands print tables with the stored values."""
    sid = _sid(url)
    listed = invoke("sessions", "list", "--url", url, "--user", "alice")
    assert sid in listed.stdout and "ACTIVE" in listed.stdout
    memory = invoke("sessions", "memory", sid, "--url", url, "--user", "alice")
    assert "say hi" in memory.stdout
    runs = invoke("sessions", "runs", sid, "--url", url, "--user", "alice")
    assert "greet" in runs.stdout and "SUCCEEDED" in runs.stdout
    tools = invoke("sessions", "tools", sid, "--url", url, "--user", "alice")
    assert "read_file" in tools.stdout
    messages = invoke("sessions", "messages", sid, "--url", url, "--user", "alice")
    assert "hi" in messages.stdout
    audit = invoke("sessions", "audit", sid, "--url", url, "--user", "alice")
    assert "session.created" in audit.stdout


def test_steps_pages_a_runs_steps(url: str) -> None:
    """``sessions steps`` shows a page of a run's steps and how to get the next one;
    ``sessions runs`` shows each run's step count."""
    sid = _sid(url)
    with SessionManager.from_url(url) as sm:
        run = sm.start_run(session_id=sid, user_id="alice", input="count")
        for kind in ("plan", "edit", "test"):
            sm.add_run_step(session_id=sid, user_id="alice", run_id=run.run_id, kind=kind)
    common = ("--url", url, "--user", "alice")
    first = invoke("sessions", "steps", sid, run.run_id, "--limit", "2", *common)
    assert first.exit_code == 0, first.output
    assert "plan" in first.stdout and "edit" in first.stdout and "test" not in first.stdout
    last_line = first.stdout.rstrip().splitlines()[-1]
    assert last_line.startswith("more: --cursor ")
    cursor = last_line.removeprefix("more: --cursor ")
    rest = invoke("sessions", "steps", sid, run.run_id, "--cursor", cursor, "--json", *common)
    assert rest.exit_code == 0, rest.output
    page = json.loads(rest.stdout)
    assert [s["kind"] for s in page["items"]] == ["test"] and page["next_cursor"] is None
    after = invoke("sessions", "steps", sid, run.run_id, "--after", "1", "--json", *common)
    assert json.loads(after.stdout) == page
    runs = json.loads(invoke("sessions", "runs", sid, "--json", *common).stdout)["items"]
    assert [(r["input"], r["step_count"], r["steps"]) for r in runs] == [
        ("greet", 0, []),
        ("count", 3, []),
    ]


def test_not_found_is_one_line_and_exit_3(url: str) -> None:
    """Another user's session is reported as not found: one stderr line, exit code 3."""
    sid = _sid(url)
    result = invoke("sessions", "show", sid, "--url", url, "--user", "bob")
    assert result.exit_code == 3
    assert result.stderr == f"error: session '{sid}' not found\n"
    assert result.stdout == "" and "Traceback" not in result.output


def test_validation_error_exit_5_and_missing_user_exit_2(url: str) -> None:
    """A malformed id exits 5; a command without a principal exits 2."""
    bad = invoke("sessions", "show", "nope", "--url", url, "--user", "alice")
    assert bad.exit_code == 5 and bad.stderr.startswith("error: session_id")
    no_user = invoke("sessions", "list", "--url", url)
    assert no_user.exit_code == 2 and "--user is required" in no_user.stderr


def test_lifecycle_close_restore_expire_delete(url: str) -> None:
    """close -> restore -> expire; closing an EXPIRED session conflicts (4); delete removes."""
    sid = _sid(url)
    common = ("--url", url, "--user", "alice", "--json")
    assert json.loads(invoke("close", sid, *common).stdout)["status"] == "CLOSED"
    restored = json.loads(invoke("restore", sid, *common).stdout)
    assert restored["session"]["status"] == "ACTIVE"
    assert restored["working_memory"]["data"]["goal"] == "say hi"
    assert json.loads(invoke("expire", sid, *common).stdout)["status"] == "EXPIRED"
    conflict = invoke("close", sid, *common)
    assert conflict.exit_code == 4 and conflict.stderr.startswith("error: cannot close")
    assert invoke("delete", sid, "--yes", *common).exit_code == 0
    assert invoke("sessions", "show", sid, *common).exit_code == 3


def test_restore_names_interrupted_runs_and_calls(url: str) -> None:
    """A run left RUNNING with an open tool call: restore prints both."""
    sid = _sid(url)
    with SessionManager.from_url(url) as sm:
        run = sm.start_run(session_id=sid, user_id="alice")
        sm.append_message(
            session_id=sid,
            user_id="alice",
            message={"type": "function_call", "call_id": "call_7", "name": "sh", "arguments": "{}"},
        )
    result = invoke("restore", sid, "--url", url, "--user", "alice")
    assert result.exit_code == 0, result.output
    assert f"interrupted runs: {run.run_id}" in result.stdout
    assert "tool calls answered as interrupted: call_7" in result.stdout


def test_admin_lists_every_user(url: str) -> None:
    """--admin --all-users lists sessions of all users without naming one."""
    result = invoke("sessions", "list", "--url", url, "--admin", "--all-users", "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["items"]) == 1


def test_sweep_and_db_commands(tmp_path: Path) -> None:
    """db upgrade creates the schema; db current reports it; sweep runs on it."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgraded = invoke("db", "upgrade", "--url", url, "--json")
    assert upgraded.exit_code == 0, upgraded.output
    current = json.loads(invoke("db", "current", "--url", url, "--json").stdout)
    assert current["up_to_date"] is True and current["current"] == current["head"]
    swept = json.loads(invoke("sweep", "--url", url, "--json").stdout)
    assert swept == {
        "interrupted_run_ids": [],
        "expired_session_ids": [],
        "failed_session_ids": [],
        "purged_idempotency_keys": 0,
    }


def test_db_commands_on_stores_without_a_schema(redis_url: str) -> None:
    """db upgrade / current on redis:// and memory:// open the store (as a start
    would), say there is nothing to migrate and exit 0; an unreachable Redis is exit 1,
    an unknown scheme exit 5; a password never shows in the output."""
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    for url in (redis_url, "memory://"):
        upgraded = invoke("db", "upgrade", "--url", url, "--json")
        assert upgraded.exit_code == 0, upgraded.output
        assert json.loads(upgraded.stdout) == {"url": url, "revision": None}
        current = json.loads(invoke("db", "current", "--url", url, "--json").stdout)
        assert current == {"current": None, "head": None, "up_to_date": True}
    unreachable = invoke("db", "upgrade", "--url", "redis://127.0.0.1:1/0")
    assert unreachable.exit_code == 1 and "Redis unreachable" in unreachable.output
    secret = invoke("db", "upgrade", "--url", f"redis://:s3cret@127.0.0.1:{port}/0", "--json")
    assert "s3cret" not in secret.output
    unknown = invoke("db", "upgrade", "--url", "foo://x")
    assert unknown.exit_code == 5 and "unsupported store URL scheme 'foo'" in unknown.output


def test_exit_code_table() -> None:
    """Each error family maps to its documented exit code, most specific first."""
    assert exit_code_for(SessionNotFound(session_id="ses_x")) == 3
    assert exit_code_for(ValidationError("bad")) == 5
    assert (
        exit_code_for(IllegalTransition(session_id="ses_x", status="EXPIRED", action="close")) == 4
    )
    assert (
        exit_code_for(VersionConflict(session_id="ses_x", expected_version=1, current_version=2))
        == 4
    )
    assert exit_code_for(StoreError("disk")) == 1
    assert dict(EXIT_CODES)[ValidationError] == 5


def test_python_dash_m_agentsession_works() -> None:
    """`python -m agentsession --help` runs the same app."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "agentsession", "--help"], capture_output=True, text=True
    )
    assert proc.returncode == 0 and "sessions" in proc.stdout and "demo" in proc.stdout


def test_keys_create_writes_next_to_the_global_url_store(tmp_path: Path) -> None:
    """``agentsession --url X keys create`` puts the key where ``serve --url X`` reads
    it (next to X's database), not next to the default store."""
    db = tmp_path / "other.db"
    assert invoke("--url", f"sqlite:///{db}", "db", "upgrade").exit_code == 0
    keys = tmp_path / "other.db.keys.json"
    empty = invoke("--url", f"sqlite:///{db}", "keys", "list")
    assert (empty.exit_code, empty.stdout, empty.stderr) == (0, "", f"no keys in {keys}\n")
    result = invoke("--url", f"sqlite:///{db}", "keys", "create", "--user", "alice")
    assert result.exit_code == 0, result.output
    assert keys.exists() and "alice" in keys.read_text()
    listed = invoke("--url", f"sqlite:///{db}", "keys", "list")
    assert "alice" in listed.stdout and listed.stderr == ""


def _leaf_options(command: Any, path: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Each leaf command's path (``keys list``) -> its options."""
    subs = getattr(command, "commands", None)
    if subs is None:
        return {" ".join(path): [o for p in command.params for o in p.opts]}
    found: dict[str, list[str]] = {}
    for name, sub in subs.items():
        found.update(_leaf_options(sub, (*path, name)))
    return found


def test_every_command_on_a_store_takes_url_after_the_command() -> None:
    """``--url`` works after any command as before it (``keys list --url X`` said "No
    such option"); only the commands on no store have none: the demo (its own store),
    the keyring's (a file) and the export signing ones (files)."""
    import typer

    leaves = _leaf_options(typer.main.get_command(build_app()))
    assert "keys list" in leaves and "keyring reencrypt" in leaves and "encrypt" in leaves
    storeless = {"demo", "export-keygen", "export-verify"} | {
        f"keyring {name}" for name in ("create", "rotate", "status")
    }
    assert {path for path, opts in leaves.items() if "--url" not in opts} == storeless


def test_keys_commands_take_url_after_the_command(tmp_path: Path) -> None:
    """``keys create/list/revoke --url X``: the key file next to X, as with ``--url``
    before the command; a missing database at X is refused the same way."""
    db = tmp_path / "other.db"
    url = f"sqlite:///{db}"
    assert invoke("db", "upgrade", "--url", url).exit_code == 0
    made = invoke("keys", "create", "--user", "alice", "--url", url)
    assert made.exit_code == 0, made.output
    key_id = made.stdout.split(".", 1)[0]
    listed = invoke("keys", "list", "--url", url)
    assert listed.exit_code == 0 and listed.stdout.startswith(f"{key_id}\talice\t")
    assert invoke("keys", "revoke", key_id, "--url", url).stdout == f"revoked {key_id}\n"
    assert "alice" in (tmp_path / "other.db.keys.json").read_text()
    typo = invoke("keys", "list", "--url", f"sqlite:///{tmp_path / 'typo.db'}")
    assert typo.exit_code == 2 and typo.stderr.startswith("error: no SQLite database at ")


def test_tools_table_names_the_run_of_each_call(url: str) -> None:
    """The tool table's run column is filled: the call was recorded in a run."""
    with SessionManager.from_url(url) as sm:
        [call] = sm.get_tool_history(session_id=_sid(url), user_id="alice").items
    assert call.run_id is not None
    result = invoke("sessions", "tools", _sid(url), "--url", url, "--user", "alice")
    assert result.exit_code == 0, result.output
    assert call.run_id[:8] in result.stdout


def test_list_and_show_display_the_external_key_as_text(tmp_path: Path) -> None:
    """A session's external key shows in the listing and in show, literally: a key that
    looks like rich markup is printed as typed, not interpreted."""
    url = f"sqlite:///{tmp_path / 'keys.db'}"
    key = "[bold]thread[/bold]-1"
    with SessionManager.from_url(url, auto_migrate=True) as sm:
        sid = sm.create_session(user_id="alice", agent="coding", external_key=key).session_id
    wide = {"COLUMNS": "250"}  # one line per row, so the cells are read whole
    for args in (["list"], ["show", sid]):
        result = runner.invoke(
            build_app(), ["sessions", *args, "--url", url, "--user", "alice"], env=wide
        )
        assert result.exit_code == 0, result.output
        assert key in result.output


def _two_turns(url: str) -> str:
    """The fixture's session with a second turn that changes the memory: seqs 1..3,
    goal "say hi" up to seq 1, then "wave"."""
    sid = _sid(url)
    with SessionManager.from_url(url) as sm:
        sm.append_messages(
            session_id=sid,
            user_id="alice",
            working_memory_patch={"goal": "wave"},
            messages=[
                {"role": "user", "content": "again"},
                {"role": "assistant", "content": "a bad answer"},
            ],
        )
    return sid


def test_memory_at_seq_reads_the_memory_as_it_stood(url: str) -> None:
    """``sessions memory --at-seq N`` shows the memory in effect at message N, titled
    with the seq; a seq past the history exits 5."""
    sid = _two_turns(url)
    common = ("--url", url, "--user", "alice")
    then = invoke("sessions", "memory", sid, "--at-seq", "1", "--json", *common)
    assert then.exit_code == 0, then.output
    assert json.loads(then.stdout)["data"]["goal"] == "say hi"
    table = invoke("sessions", "memory", sid, "--at-seq", "1", *common)
    words = " ".join(table.stdout.split())  # the title wraps to the table's width
    assert "working memory at seq 1" in words and "say hi" in words
    now = invoke("sessions", "memory", sid, "--json", *common)
    assert json.loads(now.stdout)["data"]["goal"] == "wave"
    past = invoke("sessions", "memory", sid, "--at-seq", "9", *common)
    assert past.exit_code == 5 and past.stderr.startswith("error: at_seq must be at most")


def test_memory_versions_lists_the_history_newest_first(url: str) -> None:
    """``sessions memory-versions`` lists each version with the seq it came into effect
    at, newest first; ``--before`` pages below a seq; another user's session is not found
    (exit 3)."""
    sid = _two_turns(url)
    common = ("--url", url, "--user", "alice")
    listed = invoke("sessions", "memory-versions", sid, "--json", *common)
    assert listed.exit_code == 0, listed.output
    items = json.loads(listed.stdout)["items"]
    assert [i["data"].get("goal") for i in items][:2] == ["wave", "say hi"]
    assert items[0]["seq"] > items[1]["seq"]
    older = invoke(
        "sessions", "memory-versions", sid, "--before", str(items[0]["seq"]), "--json", *common
    )
    assert [i["version"] for i in json.loads(older.stdout)["items"]] == [
        i["version"] for i in items[1:]
    ]
    table = invoke("sessions", "memory-versions", sid, *common)
    assert "memory versions" in table.stdout and "wave" in table.stdout
    other = invoke("sessions", "memory-versions", sid, "--url", url, "--user", "bob")
    assert other.exit_code == 3 and "not found" in other.stderr, other.output


def test_rewind_then_rewinds_and_rewound(url: str) -> None:
    """``sessions rewind`` prints number, count, mode and memory version; ``rewinds``
    lists it; ``rewound`` shows the messages it hid; a second rewind with --remove."""
    sid = _two_turns(url)
    common = ("--url", url, "--user", "alice")
    done = invoke("sessions", "rewind", sid, "--to-seq", "2", *common)
    assert done.exit_code == 0, done.output
    shown = "rewind 1: to seq 2, 1 message, mode hide, memory version "
    assert re.fullmatch(re.escape(shown) + r"\d+\n", done.stdout), done.stdout
    removed = json.loads(
        invoke("sessions", "rewind", sid, "--to-seq", "1", "--remove", "--json", *common).stdout
    )
    assert (removed["number"], removed["to_seq"], removed["count"], removed["mode"]) == (
        2,
        1,
        1,
        "remove",
    )
    memory = json.loads(invoke("sessions", "memory", sid, "--json", *common).stdout)
    assert memory["data"]["goal"] == "say hi" and memory["version"] == removed["memory_version"]
    same = invoke("sessions", "rewind", sid, "--to-seq", "1", *common)
    assert same.exit_code == 0 and same.stdout.startswith("nothing to rewind")
    rewinds = json.loads(invoke("sessions", "rewinds", sid, "--json", *common).stdout)
    assert [(r["number"], r["to_seq"], r["count"], r["mode"]) for r in rewinds["items"]] == [
        (1, 2, 1, "hide"),
        (2, 1, 1, "remove"),
    ]
    table = invoke("sessions", "rewinds", sid, "--limit", "1", *common)
    assert "rewinds" in table.stdout and "more: --cursor " in table.stdout
    hidden = json.loads(invoke("sessions", "rewound", sid, "1", "--json", *common).stdout)
    assert [(m["seq"], m["content"]) for m in hidden["items"]] == [(3, "a bad answer")]
    assert "a bad answer" in invoke("sessions", "rewound", sid, "1", *common).stdout
    gone = json.loads(invoke("sessions", "rewound", sid, "2", "--json", *common).stdout)
    assert gone["items"] == []


def test_rewind_and_rewound_errors(url: str) -> None:
    """A to_seq past the history or below 0 exits 5, an unknown rewind number 3, a
    CLOSED session 4, another user's session 3: one stderr line each, no traceback."""
    sid = _sid(url)
    common = ("--url", url, "--user", "alice")
    past = invoke("sessions", "rewind", sid, "--to-seq", "5", *common)
    assert past.exit_code == 5 and past.stderr.startswith("error: to_seq must be at most")
    negative = invoke("sessions", "rewind", sid, "--to-seq", "-1", *common)
    assert negative.exit_code == 5 and negative.stderr.startswith("error: to_seq")
    unknown = invoke("sessions", "rewound", sid, "7", *common)
    assert unknown.exit_code == 3 and unknown.stderr.count("\n") == 1
    assert unknown.stderr.startswith("error: ") and "7" in unknown.stderr
    assert invoke("close", sid, *common).exit_code == 0
    closed = invoke("sessions", "rewind", sid, "--to-seq", "0", *common)
    assert closed.exit_code == 4 and "Traceback" not in closed.output
    other = invoke("sessions", "rewind", sid, "--to-seq", "0", "--url", url, "--user", "bob")
    assert other.exit_code == 3 and other.stderr == f"error: session '{sid}' not found\n"


def test_fork_prints_its_id_and_is_listed_by_parent(url: str) -> None:
    """``sessions fork`` prints the fork's id (--json: the fork), which ``list --parent``
    lists, with the messages up to --at-seq and the title; a bad --at-seq exits 5."""
    sid = _two_turns(url)
    common = ("--url", url, "--user", "alice")
    result = invoke("sessions", "fork", sid, "--at-seq", "1", "--title", "retry", *common)
    assert result.exit_code == 0, result.output
    fork_id = result.stdout.strip()
    assert fork_id.startswith("ses_") and fork_id != sid
    listed = json.loads(invoke("sessions", "list", "--parent", sid, "--json", *common).stdout)
    assert [(s["session_id"], s["title"], s["fork_seq"]) for s in listed["items"]] == [
        (fork_id, "retry", 1)
    ]
    memory = json.loads(invoke("sessions", "memory", fork_id, "--json", *common).stdout)
    assert memory["data"]["goal"] == "say hi"
    whole = json.loads(invoke("sessions", "fork", sid, "--json", *common).stdout)
    assert (whole["parent_session_id"], whole["message_count"]) == (sid, 3)
    bad = invoke("sessions", "fork", sid, "--at-seq", "9", *common)
    assert bad.exit_code == 5 and bad.stderr.startswith("error: at_seq must be at most")


def test_the_default_store_is_the_readme_sessions_db(tmp_path: Path, monkeypatch) -> None:
    """Without --url or AGENTSESSION_URL the store is ./sessions.db, the name the README
    and the examples use: a session made there is listed with no --url."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTSESSION_URL", raising=False)
    with SessionManager.from_url("sqlite:///sessions.db", auto_migrate=True) as sm:
        sid = sm.create_session(user_id="alice").session_id
    listed = invoke("sessions", "list", "--user", "alice", "--json")
    assert listed.exit_code == 0, listed.output
    assert [s["session_id"] for s in json.loads(listed.stdout)["items"]] == [sid]
    helped = runner.invoke(build_app(), ["--help"], env={"COLUMNS": "200"})
    assert "AGENTSESSION_URL, else sqlite:///sessions.db" in " ".join(helped.stdout.split())


READS_AND_CHANGES = [
    ["sessions", "list"],
    ["sessions", "show", "ses_x"],
    ["sessions", "messages", "ses_x"],
    ["sessions", "memory", "ses_x"],
    ["sessions", "tools", "ses_x"],
    ["sessions", "runs", "ses_x"],
    ["sessions", "steps", "ses_x", "run_x"],
    ["sessions", "audit", "ses_x"],
    ["sessions", "rewinds", "ses_x"],
    ["sessions", "rewound", "ses_x", "1"],
    ["sessions", "rewind", "ses_x", "--to-seq", "0"],
    ["sessions", "fork", "ses_x"],
    ["export", "ses_x"],
    ["close", "ses_x"],
    ["restore", "ses_x"],
    ["expire", "ses_x"],
    ["delete", "ses_x", "--yes"],
    ["erase", "--yes"],
    ["sweep"],
    ["db", "current"],
    ["serve"],
    ["import", "jsonl", "-"],
    ["keys", "list"],
    ["keys", "revoke", "key_x"],
    ["keys", "create", "--user", "alice"],
]


@pytest.mark.parametrize("args", READS_AND_CHANGES, ids=" ".join)
def test_a_missing_sqlite_file_is_refused_not_created(tmp_path: Path, args: list[str]) -> None:
    """A mistyped database path: one ``error:`` line naming it and the command that
    creates a database, exit 2, and no file left behind."""
    db = tmp_path / "typo.db"
    url = f"sqlite:///{db}"
    # serve puts the URL in its environment for its workers: set back after the call
    result = runner.invoke(
        build_app(),
        ["--url", url, "--user", "alice", *args],
        input="",
        env={"AGENTSESSION_URL": None},
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: no SQLite database at {db} (the store URL {url}); check --url or "
        f"AGENTSESSION_URL, or create one with: agentsession --url {url} db upgrade\n"
    )
    assert not db.exists() and list(tmp_path.iterdir()) == []


def test_db_upgrade_and_an_auto_migrating_import_create_the_database(tmp_path: Path) -> None:
    """``db upgrade`` creates a missing SQLite file; so does an import with
    AGENTSESSION_AUTO_MIGRATE on (it creates the schema too)."""
    made = tmp_path / "made.db"
    assert invoke("db", "upgrade", "--url", f"sqlite:///{made}").exit_code == 0 and made.exists()
    export = tmp_path / "one.jsonl"
    with SessionManager.from_url(f"sqlite:///{made}") as sm:
        sid = sm.create_session(user_id="alice").session_id
    assert (
        invoke(
            "export", sid, "--url", f"sqlite:///{made}", "--user", "alice", "--out", str(export)
        ).exit_code
        == 0
    )
    fresh = tmp_path / "fresh.db"
    imported = runner.invoke(
        build_app(),
        ["import", "jsonl", str(export), "--url", f"sqlite:///{fresh}", "--user", "bob"],
        env={"AGENTSESSION_AUTO_MIGRATE": "1"},
    )
    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("imported ses_") and fresh.exists()


@pytest.mark.parametrize("args", [["delete", "SID"], ["erase", "--user", "alice"]], ids=" ".join)
def test_confirmation_without_a_terminal_says_pass_yes(url: str, args: list[str]) -> None:
    """No terminal to answer on (stdin empty): exit 2 and one line saying to pass --yes;
    a no exits 1; nothing is deleted either way; a yes on stdin goes ahead."""
    sid = _sid(url)
    args = [sid if a == "SID" else a for a in args]
    action = args[0]
    common = ["--url", url, "--user", "alice"]
    result = runner.invoke(build_app(), [*args, *common], input="")
    assert result.exit_code == 2, result.output
    # the error alone: no question printed first that nobody can answer
    assert result.output == (
        f"error: {action} asks for confirmation and there is no terminal to answer on: "
        f"pass --yes to {action} without asking\n"
    )
    for answer in ("n\n", "\n", "maybe\n"):
        declined = runner.invoke(build_app(), [*args, *common], input=answer)
        assert declined.exit_code == 1 and "not confirmed (pass --yes)" in declined.stderr
        assert f"[y/N]: {answer.strip()}\n" in declined.stderr
    assert _sid(url) == sid
    accepted = runner.invoke(build_app(), [*args, *common], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert invoke("sessions", "show", sid, *common).exit_code == 3


def test_serve_warns_when_no_api_key_exists(tmp_path: Path, monkeypatch) -> None:
    """``serve`` on a store whose key file holds no active key says so on stderr, with
    the exact command that makes one; with a key it says nothing."""
    import uvicorn

    started: list[str] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(app))
    db = tmp_path / "served.db"
    url = f"sqlite:///{db}"
    assert invoke("db", "upgrade", "--url", url).exit_code == 0
    env = {"AGENTSESSION_URL": url, "AGENTSESSION_KEYS_FILE": None}
    bare = runner.invoke(build_app(), ["serve"], env=env)
    assert bare.exit_code == 0, bare.output
    keys = tmp_path / "served.db.keys.json"
    assert bare.stderr == (
        f"warning: no API key in {keys}: every request will be answered 401. Create one "
        f"with: agentsession keys create --user USER --keys-file {keys}\n"
    )
    made = runner.invoke(
        build_app(), ["keys", "create", "--user", "USER", "--keys-file", str(keys)], env=env
    )
    assert made.exit_code == 0, made.output
    keyed = runner.invoke(build_app(), ["serve"], env=env)
    assert keyed.exit_code == 0 and keyed.stderr == ""
    assert started == ["agentsession.http.app:create_app"] * 2


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--port", "99999"], {}, "--port must be from 1 to 65535, not 99999"),
        (["--port", "-1"], {}, "--port must be from 1 to 65535, not -1"),
        (["--port", "0"], {}, "--port must be from 1 to 65535, not 0"),
        (
            [],
            {"AGENTSESSION_PORT": "70000"},
            "AGENTSESSION_PORT must be from 1 to 65535, not 70000",
        ),
        (["--workers", "0"], {}, "--workers must be at least 1, not 0"),
    ],
    ids=["99999", "-1", "0", "env", "workers"],
)
def test_serve_refuses_a_port_out_of_range_before_starting(
    tmp_path: Path, monkeypatch, args: list[str], env: dict[str, str], message: str
) -> None:
    """uvicorn took 99999 modulo 65536 while printing 99999, and failed on -1 only once
    started: the range is checked first, exit 2; 65535 and 1 are accepted."""
    import uvicorn

    started: list[int] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(kwargs["port"]))
    # Port 1 needs root to bind: the range is what this test is about.
    monkeypatch.setattr(server_cli, "_check_listen", lambda host, port: None)
    url = f"sqlite:///{tmp_path / 'served.db'}"
    assert invoke("db", "upgrade", "--url", url).exit_code == 0
    env = {"AGENTSESSION_URL": url, "AGENTSESSION_KEYS_FILE": None, **env}
    refused = runner.invoke(build_app(), ["serve", *args], env=env)
    assert refused.exit_code == 2, refused.output
    assert refused.stderr == f"error: {message}\n"
    assert started == []
    for port in ("1", "65535"):
        accepted = runner.invoke(build_app(), ["serve", "--port", port], env=env)
        assert accepted.exit_code == 0, accepted.output
    assert started == [1, 65535]


def test_serve_on_an_address_it_cannot_listen_on_is_one_error_line(
    tmp_path: Path, monkeypatch
) -> None:
    """A port in use, or a host that is no address here: ``error: cannot listen on
    HOST:PORT: ...``, exit 1, uvicorn not started (it printed three log lines and exited
    3, the code of ``not found``)."""
    import socket

    import uvicorn

    started: list[int] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: started.append(kwargs["port"]))
    url = f"sqlite:///{tmp_path / 'served.db'}"
    assert invoke("db", "upgrade", "--url", url).exit_code == 0
    env = {"AGENTSESSION_URL": url, "AGENTSESSION_KEYS_FILE": None}
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        args = ["serve", "--host", "127.0.0.1", "--port", str(port)]
        refused = runner.invoke(build_app(), args, env=env)
    assert refused.exit_code == 1, refused.output
    assert refused.stderr.startswith(f"error: cannot listen on 127.0.0.1:{port}: ")
    assert len(refused.stderr.splitlines()) == 1, refused.stderr
    bad_host = runner.invoke(build_app(), ["serve", "--host", "999.1.1.1"], env=env)
    assert bad_host.exit_code == 1, bad_host.output
    assert bad_host.stderr.startswith("error: cannot listen on 999.1.1.1:")
    assert started == []


def test_export_out_says_what_it_wrote_where(url: str, tmp_path: Path) -> None:
    """``export --out FILE`` prints one line: the session, the file, the count of each
    kind of line; without --out stdout holds the export only."""
    sid = _sid(url)
    out = tmp_path / "x.jsonl"
    result = invoke("export", sid, "--url", url, "--user", "alice", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        f"exported {sid} to {out}: 1 session, 1 working memory, 1 message, 1 memory, "
        "1 tool call, 1 run\n"
    )
    assert len(out.read_text().splitlines()) == 7  # and the end line
    plain = invoke("export", sid, "--url", url, "--user", "alice")
    assert plain.stdout == out.read_text()


def test_counts_are_printed_singular_and_plural(url: str, tmp_path: Path) -> None:
    """One message, two messages: never "2 message" nor "1 message(s)"."""
    from agentsession.cli.render import count

    assert [
        count(1, "message"),
        count(50000, "message"),
        count(2, "tool_call"),
        count(2, "summary"),
        count(2, "API key"),
        count(0, "working_memory"),
    ] == [
        "1 message",
        "50000 messages",
        "2 tool calls",
        "2 summaries",
        "2 API keys",
        "0 working memories",
    ]
    sid = _sid(url)
    with SessionManager.from_url(url) as sm:
        sm.append_messages(
            session_id=sid,
            user_id="alice",
            messages=[{"role": "user", "content": f"m{i}"} for i in range(2)],
        )
    out = tmp_path / "x.jsonl"
    assert invoke("export", sid, "--url", url, "--user", "alice", "--out", str(out)).exit_code == 0
    imported = invoke("import", "jsonl", str(out), "--url", url, "--user", "bob")
    assert imported.exit_code == 0, imported.output
    assert ", 3 messages, 1 memory, 1 tool call, 1 run" in imported.stdout, imported.stdout
    assert "(s)" not in imported.stdout


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("AGENTSESSION_SEARCH_WITH_KEYRING", "2", "valid boolean"),
        ("AGENTSESSION_KEYS_CACHE_SECONDS", "abc", "valid number"),
        ("AGENTSESSION_KEYS_CACHE_SECONDS", "999", "less than or equal to 300"),
        ("AGENTSESSION_KEYS", "nowhere", "'store' or 'file'"),
        ("AGENTSESSION_JWT_ALGORITHMS", "RS256", "JSON"),
    ],
)
@pytest.mark.parametrize("command", [("sessions", "list"), ("serve",)])
def test_a_bad_environment_value_is_one_error_line_and_exit_2(
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    says: str,
    command: tuple[str, ...],
) -> None:
    """A malformed ``AGENTSESSION_*`` value is named on one stderr line (exit 2, a
    usage error), with or without ``--url``, never a traceback; serve starts nothing."""
    monkeypatch.setenv(variable, value)
    for args in ([*command, "--user", "alice"], ["--url", url, *command, "--user", "alice"]):
        if command == ("serve",):
            args.remove("--user")
            args.remove("alice")
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"error: {variable}") and says in result.stderr
        assert result.stderr.count("\n") == 1 and result.stdout == ""
        assert result.exception is None or isinstance(result.exception, SystemExit)
