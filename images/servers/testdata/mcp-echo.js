#!/usr/bin/env node
// A dependency-free MCP stdio server (newline-delimited JSON-RPC 2.0) with one
// tool, echo. It is what the Debian variant of the Node server image runs
// (images/servers/node/Dockerfile.debian): the e2e suite runs it in image:
// mode through the launcher (TestConfinedRuntimeServers), and it is a
// template for a vetted in-house server. The tool definition must stay equal
// to e2e/internal/mcpfixture.RuntimeEchoTool: the gateway pins it.
"use strict";

const readline = require("readline");

const PROTOCOL = "2025-06-18";
const TOOL = {
  name: "echo",
  description: "Echoes its text, prefixed with the runtime that runs the server.",
  inputSchema: {
    type: "object",
    properties: { text: { type: "string" } },
    required: ["text"],
  },
};
const runtime = "node " + process.version;

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

function reply(id, result) {
  send({ jsonrpc: "2.0", id: id, result: result });
}

function fail(id, code, message) {
  send({ jsonrpc: "2.0", id: id, error: { code: code, message: message } });
}

function call(params) {
  if (!params || params.name !== TOOL.name) {
    return { error: [-32602, "unknown tool"] };
  }
  const args = params.arguments || {};
  if (typeof args.text !== "string") {
    return { result: { content: [{ type: "text", text: "text: a string is required" }], isError: true } };
  }
  return { result: { content: [{ type: "text", text: runtime + " echo: " + args.text }], isError: false } };
}

function handle(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    fail(null, -32700, "parse error");
    return;
  }
  if (msg === null || typeof msg !== "object" || Array.isArray(msg) || typeof msg.method !== "string") {
    // A response to a request of ours (we send none) or not a request.
    if (msg && typeof msg === "object" && "id" in msg && !("result" in msg) && !("error" in msg)) {
      fail(msg.id, -32600, "invalid request");
    }
    return;
  }
  const notification = !("id" in msg);
  if (notification) {
    return; // notifications/initialized, notifications/cancelled, ...
  }
  const params = msg.params || {};
  switch (msg.method) {
    case "initialize":
      reply(msg.id, {
        protocolVersion: typeof params.protocolVersion === "string" ? params.protocolVersion : PROTOCOL,
        capabilities: { tools: { listChanged: false } },
        serverInfo: { name: "ic-mcp-echo-node", version: "1" },
      });
      return;
    case "ping":
      reply(msg.id, {});
      return;
    case "tools/list":
      reply(msg.id, { tools: [TOOL] });
      return;
    case "tools/call": {
      const r = call(params);
      if (r.error) {
        fail(msg.id, r.error[0], r.error[1]);
      } else {
        reply(msg.id, r.result);
      }
      return;
    }
    default:
      fail(msg.id, -32601, "method not found");
  }
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
rl.on("line", (line) => {
  if (line.trim() !== "") {
    handle(line);
  }
});
rl.on("close", () => process.exit(0));
process.stderr.write("ic-mcp-echo-node: serving MCP on stdio (" + runtime + ")\n");
