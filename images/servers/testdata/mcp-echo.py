#!/usr/bin/env python3
"""A dependency-free MCP stdio server (newline-delimited JSON-RPC 2.0) with one
tool, echo. It is what the Debian variant of the Python server image runs
(images/servers/python/Dockerfile.debian): the e2e suite runs it in image:
mode through the launcher (TestConfinedRuntimeServers), and it is a template
for a vetted in-house server. The tool definition must stay equal to
e2e/internal/mcpfixture.RuntimeEchoTool: the gateway pins it."""

import json
import platform
import sys

PROTOCOL = "2025-06-18"
TOOL = {
    "name": "echo",
    "description": "Echoes its text, prefixed with the runtime that runs the server.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}
RUNTIME = "python " + platform.python_version()


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def reply(msg_id, result):
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def fail(msg_id, code, message):
    send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def call(params):
    if not isinstance(params, dict) or params.get("name") != TOOL["name"]:
        return None, (-32602, "unknown tool")
    args = params.get("arguments") or {}
    text = args.get("text") if isinstance(args, dict) else None
    if not isinstance(text, str):
        return {"content": [{"type": "text", "text": "text: a string is required"}], "isError": True}, None
    return {"content": [{"type": "text", "text": RUNTIME + " echo: " + text}], "isError": False}, None


def handle(line):
    try:
        msg = json.loads(line)
    except ValueError:
        fail(None, -32700, "parse error")
        return
    if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
        # A response to a request of ours (we send none) or not a request.
        if isinstance(msg, dict) and "id" in msg and "result" not in msg and "error" not in msg:
            fail(msg["id"], -32600, "invalid request")
        return
    if "id" not in msg:
        return  # notifications/initialized, notifications/cancelled, ...
    msg_id = msg["id"]
    params = msg.get("params") or {}
    method = msg["method"]
    if method == "initialize":
        version = params.get("protocolVersion") if isinstance(params, dict) else None
        reply(msg_id, {
            "protocolVersion": version if isinstance(version, str) else PROTOCOL,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "ic-mcp-echo-python", "version": "1"},
        })
    elif method == "ping":
        reply(msg_id, {})
    elif method == "tools/list":
        reply(msg_id, {"tools": [TOOL]})
    elif method == "tools/call":
        result, err = call(params)
        if err:
            fail(msg_id, err[0], err[1])
        else:
            reply(msg_id, result)
    else:
        fail(msg_id, -32601, "method not found")


def main():
    sys.stderr.write("ic-mcp-echo-python: serving MCP on stdio (%s)\n" % RUNTIME)
    sys.stderr.flush()
    while True:
        line = sys.stdin.readline()  # one message at a time, never read ahead
        if not line:
            return
        if line.strip():
            handle(line)


if __name__ == "__main__":
    main()
