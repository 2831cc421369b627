"""An MCP host that signs in with OAuth, for agentrt-proxy's tests, on the
official Python SDK (`mcp`, pinned in requirements.txt).

It connects to one MCP server over streamable HTTP that is an OAuth 2.1
protected resource, signs a user in at the authorization server the resource
names, then lists the tools and makes the calls given on the command line:

    python oauth_host.py --url URL --user NAME --password PASSWORD \\
        [--scope SCOPE] [--mode auto|legacy|2026-07-28] [--timeout SECONDS] \\
        [--tool NAME [--args JSON]]...

The OAuth client is the SDK's own: `mcp.client.auth.OAuthClientProvider` as
the httpx auth of `mcp.client.streamable_http.streamable_http_client`, under
`mcp.Client`. On the resource's 401 it does the discovery
(`WWW-Authenticate: Bearer resource_metadata=...` -> protected resource
metadata, RFC 9728 -> authorization server metadata, RFC 8414 / OpenID),
registers a public client dynamically (RFC 7591; redirect URI
http://127.0.0.1:1/callback, never contacted), and runs the authorization
code grant with PKCE and the `resource` indicator (RFC 8707). The browser is
played here: the redirect handler follows the authorization URL headlessly
(with cookies), posts the first HTML form that has a `login` input with
`--user` and `--password` (the form of tests/oidc/provider.mjs), follows the
rest of the interaction (consent included) and stops at the redirect to the
redirect URI, whose `code`, `state` and `iss` the callback handler hands to
the SDK. Tokens live in memory only.

`--scope`, when given, replaces the `scope` of the authorization request
(the SDK otherwise requests the scope of the resource's challenge, else its
metadata's `scopes_supported`). `--args` gives the JSON object of arguments
of the `--tool` before it (default `{}`).

Output, one JSON object a line, keys sorted:

    {"token": {CLAIM: VALUE, ...}}      first: the access token's payload
                                        (base64url-decoded, not verified;
                                        {"opaque": true} if it is not a JWT)
    {"protocol": VERSION}               the negotiated version
    {"tools": [{"name", "inputSchema"}, ...]}             by name
    {"call": NAME, "isError": bool, "text": [...], "structured": {...} | null}
    {"call": NAME, "error": MESSAGE, "code": CODE}         a JSON-RPC error

A harness failure (a failed sign-in: wrong password, unknown user; a refused
authorization or token request; a server that cannot be reached; an answer
the SDK rejects) ends it with a message on standard error and exit status 1;
a bad command line with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import html.parser
import json
import logging
import sys
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import mcp
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

REDIRECT_URI = "http://127.0.0.1:1/callback"
MAX_HOPS = 20


class HarnessError(Exception):
    """A failure of the harness itself (not an answer of the server)."""


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class FormParser(html.parser.HTMLParser):
    """The forms of a page: their action, method and input names."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self.text: list[str] = []
        self.errors: list[str] = []  # the text of elements of class "error"
        self._in_error: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": a.get("method", "get"), "inputs": {}})
        elif tag == "input" and self.forms and "name" in a:
            self.forms[-1]["inputs"][a["name"]] = a.get("value", "")
        if "error" in a.get("class", "").split() and self._in_error is None:
            self._in_error = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in_error:
            self._in_error = None

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append(data.strip())
            if self._in_error is not None:
                self.errors.append(data.strip())

    def said(self, limit: int = 300) -> str:
        """What the page says: its error text, else all its text."""
        return " ".join(self.errors or self.text)[:limit]


class Browser:
    """Plays the user agent for the SDK's redirect and callback handlers."""

    def __init__(self, user: str, password: str, scope: str | None, timeout: float) -> None:
        self.user = user
        self.password = password
        self.scope = scope
        self.timeout = timeout
        self.result: AuthorizationCodeResult | None = None

    async def redirect_handler(self, authorization_url: str) -> None:
        if self.scope is not None:
            authorization_url = replace_query(authorization_url, "scope", self.scope)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=self.timeout) as client:
            self.result = await self.sign_in(client, authorization_url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise HarnessError("the sign-in ended without an authorization code")
        result, self.result = self.result, None
        return result

    async def sign_in(self, client: httpx2.AsyncClient, url: str) -> AuthorizationCodeResult:
        method, data = "GET", None
        posted = False
        for _ in range(MAX_HOPS):
            if url.startswith(REDIRECT_URI):
                return callback_result(url)
            response = await client.request(method, url, data=data)
            method, data = "GET", None
            if response.is_redirect:
                url = urljoin(str(response.url), response.headers["location"])
                continue
            page = FormParser()
            page.feed(response.text)
            if posted and response.status_code in (400, 401, 403):
                raise HarnessError(
                    f"sign-in failed for user {self.user!r}: the login form answered "
                    f"{response.status_code}: {page.said()}"
                )
            form = next((f for f in page.forms if "login" in f["inputs"]), None)
            if response.status_code == 200 and form is not None and not posted:
                fields = dict(form["inputs"])
                fields.update(login=self.user, password=self.password)
                url = urljoin(str(response.url), form["action"] or str(response.url))
                method, data, posted = form["method"].upper(), fields, True
                continue
            raise HarnessError(
                f"sign-in failed for user {self.user!r}: unexpected answer {response.status_code} "
                f"from {urlsplit(str(response.url)).path}: {page.said() or response.text[:300]}"
            )
        raise HarnessError(f"sign-in did not reach the redirect URI in {MAX_HOPS} steps")


def replace_query(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = httpx2.QueryParams(parts.query).set(name, value)
    return parts._replace(query=str(query)).geturl()


def callback_result(url: str) -> AuthorizationCodeResult:
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    if "error" in query:
        raise HarnessError(
            f"authorization refused: {query['error']}: {query.get('error_description', '')}".rstrip(": ")
        )
    if "code" not in query:
        raise HarnessError(f"the redirect to the client carries no code: {sorted(query)}")
    return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))


def token_claims(token: str) -> dict[str, Any]:
    """The payload of a JWT, decoded and not verified."""
    parts = token.split(".")
    if len(parts) != 3:
        return {"opaque": True}
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except ValueError:
        return {"opaque": True}
    return claims if isinstance(claims, dict) else {"opaque": True}


class ToolCall(argparse.Action):
    """`--tool NAME` starts a call; `--args JSON` gives the arguments of the last one."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, value: Any, option: str | None = None) -> None:
        calls = namespace.calls if namespace.calls is not None else []
        namespace.calls = calls
        if option == "--tool":
            calls.append({"call": value, "args": None})
            return
        if not calls or calls[-1]["args"] is not None:
            parser.error("--args goes after a --tool (once per tool)")
        try:
            args = json.loads(value)
        except json.JSONDecodeError as e:
            parser.error(f"--args is not JSON: {e}")
        if not isinstance(args, dict):
            parser.error("--args must be a JSON object")
        calls[-1]["args"] = args


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


async def call_tool(session: mcp.ClientSession, name: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await session.call_tool(name, args)
    except mcp.MCPError as e:
        return {"call": name, "error": e.message, "code": e.code}
    return {
        "call": name,
        "isError": bool(result.is_error),
        "text": [c.text for c in result.content if c.type == "text"],
        "structured": result.structured_content,
    }


def emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, sort_keys=True), flush=True)


async def run(options: argparse.Namespace, calls: list[dict[str, Any]]) -> None:
    storage = MemoryStorage()
    browser = Browser(options.user, options.password, options.scope, options.timeout)
    auth = OAuthClientProvider(
        server_url=options.url,
        client_metadata=OAuthClientMetadata(
            client_name="agentrt-proxy oauth_host.py",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
            scope=options.scope,
        ),
        storage=storage,
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    transport = streamable_http_client(options.url, http_client=create_mcp_http_client(auth=auth))
    async with mcp.Client(transport, mode=options.mode, read_timeout_seconds=options.timeout, cache=None) as client:
        if storage.tokens is None:
            raise HarnessError("connected without an access token: the server asked for no authorization")
        emit({"token": token_claims(storage.tokens.access_token)})
        emit({"protocol": client.protocol_version})
        session = client.session
        emit(await list_tools(session))
        for call in calls:
            emit(await call_tool(session, call["call"], call["args"] or {}))


def describe(error: BaseException) -> str:
    """A one-line account of an error, the members of an exception group too."""
    inner = getattr(error, "exceptions", None)
    if inner:
        return "; ".join(describe(e) for e in inner)
    if isinstance(error, HarnessError):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="An MCP host that signs in with OAuth.")
    parser.add_argument("--url", required=True, help="the streamable HTTP endpoint (the protected resource)")
    parser.add_argument("--user", required=True, help="the login name at the authorization server")
    parser.add_argument("--password", required=True, help="its password")
    parser.add_argument("--scope", help="the scope to request (default: the one the SDK picks)")
    parser.add_argument("--tool", action=ToolCall, dest="calls", metavar="NAME", help="call this tool")
    parser.add_argument("--args", action=ToolCall, dest="calls", metavar="JSON", help="its arguments")
    parser.add_argument("--mode", default="auto", help="the SDK's Client.mode (default: auto)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    options = parser.parse_args(argv)
    if urlsplit(options.url).scheme not in ("http", "https"):
        parser.error("--url must be an http(s) URL")

    # The SDK logs the failed OAuth flow with a traceback; the message below says it.
    logging.getLogger("mcp").addHandler(logging.NullHandler())
    logging.getLogger("mcp").propagate = False
    try:
        asyncio.run(run(options, options.calls or []))
    except Exception as e:  # the harness failed: say why, exit non-zero
        print(f"oauth_host.py: {describe(e)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
