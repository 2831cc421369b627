"""What a host sees of agentrt-proxy: the same tool called through the proxy
and directly, alternating, on the official Python SDK (`mcp`, pinned in
requirements.txt). Run by `cargo xtask bench-proxy`, which installs the
SDK and the npm filesystem server, builds the proxy and writes its
configuration; not part of the test suite.

    python bench.py < plan.json

The plan, a JSON object:

    {"direct": [CMD, ARGS...],     the server, started over stdio
     "through": [CMD, ARGS...],    the proxy in front of the same server
     "direct_tool": NAME,          the tool as the server names it
     "through_tool": NAME,         and as the proxy does
     "paths": [PATH, ...],         one call's arguments each: {"path": PATH}
     "warmup": N,                  rounds first, not measured
     "raw_db": PATH,               a SQLite file for the raw commits
     "synchronous": "FULL" | "NORMAL"}

Each round makes one direct call, one call through the proxy and one raw
commit (one 1 KiB row inserted in WAL mode at `synchronous`), in an order
that rotates from round to round so the three share the machine's drift.
Each round's path is a new one, so every call through the proxy is a
request new to it (its answer checked against the direct one). Printed on
standard output, one JSON object: each measure's samples in nanoseconds,
by round (`direct`, `through`, `raw`).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from typing import Any

import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client


def answer_of(result: Any) -> Any:
    """What the call answered: its structured content (the proxy gives
    the server's back, and its JSON as the text)."""
    if result.is_error:
        raise RuntimeError(f"the tool failed: {[c.text for c in result.content if c.type == 'text']}")
    if result.structured_content is None:
        raise RuntimeError("the answer has no structured content")
    return result.structured_content


def raw_commit(db: sqlite3.Connection, row: bytes) -> int:
    start = time.perf_counter_ns()
    db.execute("INSERT INTO raw (body) VALUES (?)", (row,))
    return time.perf_counter_ns() - start


async def bench(plan: dict[str, Any]) -> dict[str, list[int]]:
    db = sqlite3.connect(plan["raw_db"], isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={plan['synchronous']}")
    db.execute("CREATE TABLE IF NOT EXISTS raw (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    row = os.urandom(1024)

    def server(command: list[str]) -> Any:
        return stdio_client(StdioServerParameters(command=command[0], args=command[1:]))

    samples: dict[str, list[int]] = {"direct": [], "through": [], "raw": []}
    async with (
        mcp.Client(server(plan["direct"]), mode="legacy", cache=None) as direct,
        mcp.Client(server(plan["through"]), mode="legacy", cache=None) as through,
    ):

        async def call(client: Any, tool: str, path: str) -> tuple[int, Any]:
            start = time.perf_counter_ns()
            result = await client.session.call_tool(tool, {"path": path})
            elapsed = time.perf_counter_ns() - start
            return elapsed, answer_of(result)

        warmup = plan["warmup"]
        for i, path in enumerate(plan["paths"]):
            measures: dict[str, int] = {}
            texts: dict[str, Any] = {}
            order = ["direct", "through", "raw"]
            order = order[i % 3 :] + order[: i % 3]
            for what in order:
                if what == "raw":
                    measures["raw"] = raw_commit(db, row)
                elif what == "direct":
                    measures["direct"], texts["direct"] = await call(direct, plan["direct_tool"], path)
                else:
                    measures["through"], texts["through"] = await call(through, plan["through_tool"], path)
            if texts["direct"] != texts["through"]:
                raise RuntimeError(f"{path}: the proxy answered {texts['through']!r}, the server {texts['direct']!r}")
            if i >= warmup:
                for what, ns in measures.items():
                    samples[what].append(ns)
    db.close()
    return samples


def describe(error: BaseException) -> str:
    """A one-line account of an error, the members of an exception group too."""
    inner = getattr(error, "exceptions", None)
    if inner:
        return "; ".join(describe(e) for e in inner)
    return f"{type(error).__name__}: {error}"


def main() -> int:
    try:
        plan = json.loads(sys.stdin.read())
        samples = asyncio.run(bench(plan))
    except Exception as e:  # say why on standard error, exit non-zero
        print(f"bench.py: {describe(e)}", file=sys.stderr)
        return 1
    print(json.dumps(samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
