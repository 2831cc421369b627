"""A small, scripted MCP host for agentrt-proxy's tests, on the official
Python SDK (`mcp`, pinned in requirements.txt).

It connects to one MCP server, over stdio (it starts the server) or over
streamable HTTP, runs the steps of a JSON script read from standard input
and prints one JSON line per step on standard output:

    python host.py [--mode auto|legacy|2026-07-28] [--timeout SECONDS] \\
        (--stdio -- CMD ARGS... | --http URL [--token-file FILE]) < script.json

The connection is what a host built on the SDK makes: `mcp.Client` over the
SDK's own transports (`mcp.client.stdio.stdio_client` with
`StdioServerParameters`, `mcp.client.streamable_http.streamable_http_client`),
which negotiates the protocol version (`--mode`, the SDK's `Client.mode`:
`auto`, its default, probes `server/discover` at the newest modern version
and falls back to the `initialize` handshake; `legacy` only handshakes), and
then its `mcp.ClientSession` for every request.

The script is a JSON list of steps:

    {"list": true}                      tools/list (every page)
    {"call": NAME, "args": {...}}       tools/call ("args" may be left out)
    {"call": ..., "progress": true}     the same with a progress token; the
                                        progress notifications received for
                                        it are recorded
    {"parallel": [call steps...]}       the calls at once (asyncio.gather)

Output, one JSON object a line, keys sorted:

    {"protocol": VERSION}               first, once: the negotiated version
    {"tools": [{"name", "inputSchema"}, ...]}             a list, by name
    {"call": NAME, "isError": bool, "text": [...], "structured": {...} | null,
     "progress": [{"progress", "total", "message"}, ...]}  a call's result
    {"call": NAME, "error": MESSAGE, "code": CODE}         a JSON-RPC error
    {"parallel": [call lines...]}       in the order of the steps

A harness failure (a bad script, a server that cannot be reached or started,
an answer the SDK rejects) ends it with a message on standard error and exit
status 1; a bad command line with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import mcp
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


class HarnessError(Exception):
    """A failure of the harness itself (not an answer of the server)."""


def parse_call(step: Any, where: str) -> dict[str, Any]:
    if not isinstance(step, dict) or not isinstance(step.get("call"), str):
        raise HarnessError(f"{where}: a call step needs a string \"call\": {step!r}")
    unknown = set(step) - {"call", "args", "progress"}
    if unknown:
        raise HarnessError(f"{where}: unknown keys {sorted(unknown)}")
    args = step.get("args", {})
    if not isinstance(args, dict):
        raise HarnessError(f"{where}: \"args\" must be an object")
    if not isinstance(step.get("progress", False), bool):
        raise HarnessError(f"{where}: \"progress\" must be true or false")
    return {"call": step["call"], "args": args, "progress": step.get("progress", False)}


def parse_script(text: str) -> list[dict[str, Any]]:
    """Checks the whole script before anything is sent."""
    try:
        steps = json.loads(text)
    except json.JSONDecodeError as e:
        raise HarnessError(f"the script is not JSON: {e}") from None
    if not isinstance(steps, list):
        raise HarnessError("the script must be a JSON list of steps")
    parsed: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        where = f"step {i}"
        if isinstance(step, dict) and step.get("list") is True and len(step) == 1:
            parsed.append({"list": True})
        elif isinstance(step, dict) and "parallel" in step:
            calls = step["parallel"]
            if len(step) != 1 or not isinstance(calls, list):
                raise HarnessError(f"{where}: \"parallel\" must be the only key, with a list")
            parsed.append({"parallel": [parse_call(c, f"{where}.{j}") for j, c in enumerate(calls)]})
        else:
            parsed.append(parse_call(step, where))
    return parsed


async def list_tools(session: mcp.ClientSession) -> dict[str, Any]:
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = mcp.types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend({"name": t.name, "inputSchema": t.input_schema} for t in page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return {"tools": sorted(tools, key=lambda t: t["name"])}


async def call_tool(session: mcp.ClientSession, step: dict[str, Any]) -> dict[str, Any]:
    name = step["call"]
    progress: list[dict[str, Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append({"progress": value, "total": total, "message": message})

    try:
        result = await session.call_tool(
            name,
            step["args"],
            progress_callback=on_progress if step["progress"] else None,
        )
    except mcp.MCPError as e:
        return {"call": name, "error": e.message, "code": e.code}
    return {
        "call": name,
        "isError": bool(result.is_error),
        "text": [c.text for c in result.content if c.type == "text"],
        "structured": result.structured_content,
        "progress": progress,
    }


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, sort_keys=True), flush=True)


async def run(transport: Any, mode: str, timeout: float, steps: list[dict[str, Any]]) -> None:
    async with mcp.Client(transport, mode=mode, read_timeout_seconds=timeout, cache=None) as client:
        emit({"protocol": client.protocol_version})
        session = client.session
        for step in steps:
            if "list" in step:
                emit(await list_tools(session))
            elif "parallel" in step:
                answers = await asyncio.gather(*(call_tool(session, c) for c in step["parallel"]))
                emit({"parallel": list(answers)})
            else:
                emit(await call_tool(session, step))


def describe(error: BaseException) -> str:
    """A one-line account of an error, the members of an exception group too."""
    inner = getattr(error, "exceptions", None)
    if inner:
        return "; ".join(describe(e) for e in inner)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def main(argv: list[str]) -> int:
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description="A scripted MCP host (the script on stdin).")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--stdio", action="store_true", help="start the server given after --")
    target.add_argument("--http", metavar="URL", help="a streamable HTTP endpoint")
    parser.add_argument(
        "--token-file", metavar="FILE", help="(--http) send the bearer token this file holds"
    )
    parser.add_argument("--mode", default="auto", help="the SDK's Client.mode (default: auto)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    options = parser.parse_args(argv)
    if options.stdio and not command:
        parser.error("--stdio needs the server's command after --")
    if options.http and command:
        parser.error("--http takes no command")
    if options.token_file and not options.http:
        parser.error("--token-file goes with --http")

    try:
        steps = parse_script(sys.stdin.read())
        if options.stdio:
            transport = stdio_client(StdioServerParameters(command=command[0], args=command[1:]))
        else:
            http_client = None
            if options.token_file:
                with open(options.token_file, encoding="utf-8") as f:
                    token = f.read().strip()
                # The SDK's own client, with its timeouts, and the header.
                http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            transport = streamable_http_client(options.http, http_client=http_client)
        asyncio.run(run(transport, options.mode, options.timeout, steps))
    except Exception as e:  # the harness failed: say why, exit non-zero
        print(f"host.py: {describe(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
