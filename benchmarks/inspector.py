"""(i) The inspector and the change feed, agentsession alone, over real HTTP.

Run on demand (never a timed test): part of ``make bench`` (workload ``i``), alone
``make bench-inspector``, or ``.venv/bin/python benchmarks/inspector.py [--quick]
[--json PATH] [--only pages|feed]``. Each part serves ``agentsession serve`` (one
worker, a subprocess, set up as the README says by ``tests/service.py``) on an SQLite
file of its own.

Pages against their JSON call, each a median over ``samples`` calls, the calls of a
round in a new random order (one keep-alive connection per caller):

* the inspector's newest page of a session (``/ui/sessions/<id>``) against the JSON
  call of that page (``GET /v1/sessions/<id>/messages?limit=50``), at 2,000 and 20,000
  messages (``--quick``: 200 and 2,000), and the first page of the Sessions view
  (``/ui/``) against ``GET /v1/sessions?limit=50``, for a user of 1,000 and 10,000
  sessions (``--quick``: 100 and 1,000). Goals: page <= 3x its JSON call at every size;
  the page at the larger size <= :data:`FLAT` x the page at the smaller (flat with
  history size).

The feed, with the subscribers in a process of their own:

* appends (``POST /v1/sessions/<id>/messages``, one message) with no subscriber, with
  one and with 100 Server-Sent-Events subscribers of the user's feed on the same
  worker, in alternating phases (none, one, 100, none, ...), the subscribers started
  at the feed's tail, each reading every event. Goal: append p50 with 100 subscribers
  <= 1.1x without, and <= 1.1x with one (an idle machine answers a little slower than
  one kept awake, which would flatter the first ratio). Also the worker's CPU time
  per append in each phase (``/proc``; less moved by other load on the machine than
  the latencies);
* the delay from an append's request to the moment a subscriber read its event
  (``time.monotonic``, one clock for both processes), the subscriber's event matched by
  the session version the append's ETag names. Goal: p50 <= 500 ms (the hub polls
  every 100 ms).

Prints a markdown table; exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import growth  # noqa: E402  (the store-level fill helpers)

from agentsession import SessionManager  # noqa: E402
from service import Service, agentsession, running_service  # noqa: E402

#: Goals: a page against its JSON call; the larger size against the smaller; append
#: p50 with subscribers against without; the event's delay p50 (ms).
PAGE_GOAL, FLAT, SUBSCRIBED_GOAL, DELAY_GOAL_MS = 3.0, 1.5, 1.1, 500.0
SUBSCRIBERS = 100
PARTS = ("pages", "feed")


class Sizes:
    """The counts of a run (``--quick``: a tenth, fewer samples)."""

    def __init__(self, quick: bool) -> None:
        scale = 10 if quick else 1
        self.messages = (2_000 // scale, 20_000 // scale)
        self.sessions = (1_000 // scale, 10_000 // scale)
        self.samples = 7 if quick else 25
        self.rounds = 2 if quick else 4  # of the off/on append phases
        self.appends = 25 if quick else 75  # per phase


def _fill(url: str, messages: tuple[int, int], sessions: tuple[int, int]) -> dict[str, Any]:
    """Sessions of ``hist`` with each count of messages (tool-call exchanges), and users
    ``s<n>`` with ``n`` sessions each, written through the store in big transactions."""
    made: dict[str, Any] = {"history": {}, "users": {}}
    with SessionManager.from_url(url) as m:
        for size in messages:
            row = growth._session(0, user_id="hist", message_count=size, version=size + 1)
            with m.store.transaction(write=True) as tx:
                tx.insert_session(row)
            for batch in growth._batches(size):
                with m.store.transaction(write=True) as tx:
                    tx.insert_messages(
                        [growth._exchange(row.session_id, i + 1, size) for i in batch]
                    )
            made["history"][size] = row.session_id
        for size in sessions:
            user = f"s{size}"
            for batch in growth._batches(size):
                with m.store.transaction(write=True) as tx:
                    for i in batch:
                        tx.insert_session(growth._session(i, user_id=user))
            made["users"][size] = user
    return made


def _browser(service: Service, token: str) -> httpx.Client:
    """A client signed in to the inspector with ``token`` (its session cookie kept)."""
    client = httpx.Client(base_url=service.url, timeout=60, follow_redirects=True)
    form = client.get("/ui/").text
    csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    r = client.post("/ui/login", data={"api_key": token, "csrf": csrf})
    assert r.status_code == 200 and "Sessions" in r.text, r.status_code
    return client


def _api(service: Service, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )


def _medians(calls: dict[str, Callable[[], httpx.Response]], samples: int) -> dict[str, float]:
    """The median milliseconds of each call, the calls of a round shuffled."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    rng = random.Random(27)
    for name, call in calls.items():  # warm up: templates, statements, connections
        assert call().status_code == 200, name
    for _ in range(samples):
        order = list(calls)
        rng.shuffle(order)
        for name in order:
            start = time.perf_counter()
            r = calls[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
            assert r.status_code == 200, (name, r.status_code)
    return {name: statistics.median(t) for name, t in times.items()}


def measure_pages(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """The pages and their JSON calls at both sizes (see the module docstring)."""
    with running_service(tmp, user="hist") as service:
        made = _fill(service.env["AGENTSESSION_URL"], sizes.messages, sizes.sessions)
        tokens = {"hist": service.token}
        for user in made["users"].values():
            tokens[user] = agentsession("keys", "create", "--user", user, env=service.env)
            tokens[user] = tokens[user].strip().splitlines()[0]
        calls: dict[str, Callable[[], httpx.Response]] = {}
        clients = []
        for kind, made_of, page, json_path in (
            ("session", made["history"], "/ui/sessions/{}", "/v1/sessions/{}/messages?limit=50"),
            ("sessions", made["users"], "/ui/", "/v1/sessions?limit=50"),
        ):
            for size, ident in made_of.items():
                token = tokens["hist" if kind == "session" else ident]
                ui, api = _browser(service, token), _api(service, token)
                clients += [ui, api]
                calls[f"{kind} page {size}"] = _get(ui, page.format(ident))
                calls[f"{kind} json {size}"] = _get(api, json_path.format(ident))
        try:
            medians = _medians(calls, sizes.samples)
        finally:
            for client in clients:
                client.close()
    return {"medians": medians, "messages": sizes.messages, "sessions": sizes.sessions}


def _get(client: httpx.Client, path: str) -> Callable[[], httpx.Response]:
    return lambda: client.get(path)


# ------------------------------------------------------------------- the feed


async def _subscribe(url: str, token: str, count: int, after: str) -> None:
    """The subscriber process: ``count`` streams of the user's feed after ``after``, on
    plain sockets (so the subscribers' own parsing takes little of the machine the
    service runs on); prints ``ready`` once all answered 200, then ``<version_after>
    <monotonic>`` for each event the first stream reads (every stream reads every
    event)."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"GET /v1/changes?after={after} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    streams = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(request)
        streams.append((reader, writer))
    for reader, _ in streams:
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head[:80]
    print("ready", flush=True)
    await asyncio.gather(_timed(streams[0][0]), *(_drain(reader) for reader, _ in streams[1:]))


async def _timed(reader: asyncio.StreamReader) -> None:
    """Print the version and read time of each event (one event per chunk, so a
    ``data:`` line is never split)."""
    while line := await reader.readline():
        if line.startswith(b"data: "):
            version = json.loads(line[6:])["version_after"]
            print(f"{version} {time.monotonic()}", flush=True)


async def _drain(reader: asyncio.StreamReader) -> None:
    while await reader.read(65536):
        pass


class _Subscribers:
    """The subscriber process, started and read from."""

    def __init__(self, service: Service, after: str, count: int) -> None:
        args = [sys.executable, __file__, "--subscribe", service.url, service.token, after]
        args.append(str(count))
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.seen: dict[int, float] = {}
        line = self.proc.stdout.readline().strip()
        assert line == "ready", line

    def stop(self) -> dict[int, float]:
        """End the process; the read time of each version its first stream saw."""
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:  # not a line the stop cut short
                self.seen[int(parts[0])] = float(parts[1])
        return self.seen


def _tail(api: httpx.Client) -> str:
    """The feed's newest cursor: ``next_cursor`` of its last page. (The first page's
    is not: subscribers started there would first catch up on every event since, a
    herd of catch-ups and not the following this part times.)"""
    params: dict[str, Any] = {"limit": 1000}
    while True:
        page = api.get("/v1/changes", params=params).json()
        params["after"] = page["next_cursor"]
        if not page["has_more"]:
            assert params["after"] is not None  # the session's creation is an event
            return str(params["after"])


def _cpu_seconds(pid: int) -> float:
    """The user + system CPU seconds process ``pid`` used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_feed(sizes: Sizes, tmp: Path) -> dict[str, Any]:
    """Append p50 with no subscriber, one, and :data:`SUBSCRIBERS`, the worker's CPU
    time per append in each phase, and the events' delay (see the module docstring)."""
    with running_service(tmp) as service, _api(service, service.token) as api:
        sid = api.post("/v1/sessions", json={}).json()["session_id"]
        body = {"messages": [{"role": "user", "content": "a message of about forty bytes"}]}
        times: dict[int, list[float]] = {0: [], 1: [], SUBSCRIBERS: []}
        cpu = dict.fromkeys(times, 0.0)
        delays: list[float] = []
        for _ in range(sizes.rounds):
            for count in times:
                after = _tail(api)
                subscribers = _Subscribers(service, after, count) if count else None
                sent: dict[int, float] = {}
                used = _cpu_seconds(service.pid)
                for _ in range(sizes.appends):
                    start = time.perf_counter()
                    at = time.monotonic()
                    r = api.post(f"/v1/sessions/{sid}/messages", json=body)
                    times[count].append((time.perf_counter() - start) * 1e3)
                    assert r.status_code == 201, r.text
                    sent[int(r.headers["etag"].strip('"').rsplit("@", 1)[1])] = at
                    time.sleep(0.01)  # appends a little apart, as an agent's are
                if subscribers is not None:
                    time.sleep(1.0)  # the last events reach the subscribers
                cpu[count] += _cpu_seconds(service.pid) - used
                if subscribers is not None:
                    seen = subscribers.stop()
                    assert set(sent) <= set(seen), sorted(set(sent) - set(seen))[:5]
                    if count == SUBSCRIBERS:
                        delays += [(seen[v] - t) * 1e3 for v, t in sent.items()]
    appends = len(times[0])
    return {
        "subscribers": SUBSCRIBERS,
        "appends": appends,
        "p50_off": statistics.median(times[0]),
        "p50_one": statistics.median(times[1]),
        "p50_on": statistics.median(times[SUBSCRIBERS]),
        "cpu_ms": {str(count): used * 1e3 / appends for count, used in cpu.items()},
        "delay_p50": statistics.median(delays),
        "delay_p99": sorted(delays)[int(len(delays) * 0.99) - 1],
    }


# ------------------------------------------------------------------- report


def judge(document: dict[str, Any]) -> list[tuple[str, float, float, bool]]:
    """``(what, figure, goal, met)`` for every goal of the parts measured."""
    rows = []
    if "pages" in document:
        rows += _judge_pages(document["pages"])
    if "feed" in document:
        rows += _judge_feed(document["feed"])
    return rows


def _judge_pages(pages: dict[str, Any]) -> list[tuple[str, float, float, bool]]:
    m = pages["medians"]
    rows = []
    for kind, sizes in (("session", pages["messages"]), ("sessions", pages["sessions"])):
        for size in sizes:
            ratio = m[f"{kind} page {size}"] / m[f"{kind} json {size}"]
            rows.append((f"{kind} page / JSON at {size:,}", ratio, PAGE_GOAL, ratio <= PAGE_GOAL))
        small, large = sizes
        grown = m[f"{kind} page {large}"] / m[f"{kind} page {small}"]
        rows.append((f"{kind} page {large:,} / {small:,}", grown, FLAT, grown <= FLAT))
    return rows


def _judge_feed(feed: dict[str, Any]) -> list[tuple[str, float, float, bool]]:
    rows = []
    for base, name in (("p50_off", "none"), ("p50_one", "one")):
        slowed = feed["p50_on"] / feed[base]
        what = f"append p50, {feed['subscribers']} subscribers / {name}"
        rows.append((what, slowed, SUBSCRIBED_GOAL, slowed <= SUBSCRIBED_GOAL))
    delay = feed["delay_p50"]
    rows.append(("event delay p50 (ms)", delay, DELAY_GOAL_MS, delay <= DELAY_GOAL_MS))
    return rows


def _subscribers_label(count: str) -> str:
    return {"0": "no subscriber", "1": "one subscriber"}.get(count, f"{count} subscribers")


def render(document: dict[str, Any]) -> str:
    """The section's markdown: the medians, then each goal met or missed."""
    lines = ["## (i) The inspector and the change feed", "", "| call | median ms |"]
    lines.append("| --- | ---: |")
    if "pages" in document:
        lines += [f"| {name} | {ms:.2f} |" for name, ms in document["pages"]["medians"].items()]
    if "feed" in document:
        feed = document["feed"]
        lines += [
            f"| append p50, no subscriber | {feed['p50_off']:.2f} |",
            f"| append p50, one subscriber | {feed['p50_one']:.2f} |",
            f"| append p50, {feed['subscribers']} subscribers | {feed['p50_on']:.2f} |",
            f"| event delay p50 / p99 | {feed['delay_p50']:.1f} / {feed['delay_p99']:.1f} |",
            *(
                f"| worker CPU ms per append, {_subscribers_label(count)} | {ms:.2f} |"
                for count, ms in feed.get("cpu_ms", {}).items()
            ),
        ]
    lines += ["", "| goal | figure | at most | |", "| --- | ---: | ---: | --- |"]
    for what, figure, goal, met in judge(document):
        lines.append(f"| {what} | {figure:.2f} | {goal:g} | {'met' if met else 'MISSED'} |")
    return "\n".join(lines)


def run_inspector(quick: bool, parts: tuple[str, ...] = PARTS) -> dict[str, Any]:
    """The ``parts`` named (``pages``, ``feed``); the results document (what
    ``--json`` writes), a key per part measured."""
    sizes = Sizes(quick)
    document: dict[str, Any] = {"quick": quick, "samples": sizes.samples}
    if "pages" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            document["pages"] = measure_pages(sizes, Path(tmp))
        print(f"  pages: {json.dumps(document['pages']['medians'])}", file=sys.stderr)
    if "feed" in parts:
        with tempfile.TemporaryDirectory() as tmp:
            document["feed"] = measure_feed(sizes, Path(tmp))
    return document


def main(argv: list[str] | None = None) -> int:
    """Run, print the tables; 1 if a goal is missed."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--subscribe"]:
        url, token, after, count = argv[1:5]
        # The subscribers stand for clients on other machines: they yield the CPU to
        # the service, so the figures are the service's cost, not theirs.
        os.nice(10)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_subscribe(url, token, int(count), after))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--only", choices=PARTS, help="measure one part: the pages or the feed (default both)"
    )
    args = parser.parse_args(argv)
    document = run_inspector(args.quick, (args.only,) if args.only else PARTS)
    print(render(document))
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0 if all(met for *_, met in judge(document)) else 1


if __name__ == "__main__":
    sys.exit(main())
