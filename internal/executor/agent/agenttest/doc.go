// Package agenttest is test support for the agent executors: scripted
// fakes of the vendors' model APIs (Anthropic Messages and OpenAI
// Responses, both streaming server-sent events) on 127.0.0.1, which the
// real Claude Code and Codex CLIs are pointed at, and the lookup of the
// pinned CLIs that .ci/run installs (Claude, Codex, MCPMemory).
//
// A Server answers each request of the conversation with the next step of
// its script (Call a tool, or Reply and end the turn), records every
// request (Requests: the tools offered, the conversation sent as Items) so
// that a test can assert on them, answers the CLIs' side requests without
// advancing the script (SideRequests), and reports through Options.Errorf
// (the test's Errorf unless given) anything a real client would not send:
// another path or method, a missing or other API key, a request that does
// not stream, another model, tools other than Options.Tools, a request
// that does not carry the result of the call just made, a script step
// calling a tool the request does not offer, a request after the
// script's end.
//
// It is a fake for tests and must never be used by the daemon or any
// production package; it holds no real credential and never listens on
// anything but 127.0.0.1.
//
// # What the pinned CLIs do (Claude Code 2.1.328, Codex 0.169.0)
//
// Measured by this package's tests; check them again when a pin moves.
//
// Claude Code, run as `claude -p PROMPT --output-format stream-json
// --verbose --model M --mcp-config FILE --strict-mcp-config --tools ""
// --allowedTools T,…` with CLAUDE_CONFIG_DIR, HOME and TMPDIR in a
// temporary directory, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY and
// ENABLE_TOOL_SEARCH=false:
//
//   - Before each run it sends HEAD /api/hello without the key (a
//     reachability probe, answered 200); then each model request is POST
//     /v1/messages?beta=true with x-api-key, anthropic-version and
//     "stream": true, thinking enabled (budget 31999 tokens) and
//     metadata.user_id, a JSON string holding the session_id
//     (Request.Session). No title, token-count or other-model request
//     was seen.
//   - `--tools ""` leaves no built-in tool: the requests offer exactly the
//     MCP server's tools, as mcp__SERVER__TOOL. A tool not named in
//     --allowedTools is still offered; its call is answered by the CLI
//     itself with an is_error tool_result "Claude requested permissions
//     to use mcp__memory__delete_entities, but you haven't granted it
//     yet.", and the stream shows a {"type":"system",
//     "subtype":"permission_denied"} line before that user line.
//   - The stream's first line is {"type":"system","subtype":"init"} with
//     session_id, tools and mcp_servers; tool calls are "assistant" lines
//     with a tool_use block, their results "user" lines with a
//     tool_result block (content a string); the last line is
//     {"type":"result"} with session_id, result, num_turns, usage and
//     total_cost_usd. On a resume, usage counts that run only while
//     total_cost_usd counts the whole session.
//   - Resume is the same command with `--resume SESSION`; the session id
//     stays the same and the request carries the whole earlier
//     conversation (prompt, tool calls, results, replies).
//   - It makes a messaging socket in $TMPDIR/cc-socks/PID.sock.
//
// Codex, run as `codex exec --json --skip-git-repo-check PROMPT` with
// CODEX_HOME, HOME and TMPDIR in a temporary directory and a config.toml
// naming a model provider (base_url, wire_api = "responses", env_key):
//
//   - Each model request is POST /v1/responses with Authorization: Bearer
//     and "stream": true, no instructions (its prompt is the first input
//     item, role "developer") and client_metadata.thread_id, the session
//     (Request.Session); no other request was seen.
//   - Its own tools are off with [features] shell_tool, unified_exec,
//     goals and view_image = false, [agents] enabled = false (the
//     feature multi_agent is deprecated and warns), web_search =
//     "disabled" and [tools.experimental_request_user_input] enabled =
//     false. Three remain whenever an MCP server is configured, with or
//     without the resources capability: list_mcp_resources,
//     list_mcp_resource_templates and read_mcp_resource; no setting was
//     found for them. MCP tools come in a {"type":"namespace",
//     "name":"mcp__SERVER"} tool, and Request.Tools names them
//     mcp__SERVER__TOOL as Claude does.
//   - For a model it has metadata for (gpt-5.5) it adds apply_patch and
//     defers MCP tools behind tool_search; for one it does not know it
//     adds neither and warns "Model metadata for `M` not found" as an
//     {"type":"item.completed","item":{"type":"error"}} line.
//   - Its MCP calls ran without --dangerously-bypass-approvals-and-sandbox
//     (create_entities, a write, included).
//   - The stream's first line is {"type":"thread.started","thread_id":…}:
//     the session id. An MCP call is item.started then item.completed
//     with {"type":"mcp_tool_call","server":…,"tool":…,"arguments":…,
//     "result":{"content":[…],"structured_content":…},"error":…,
//     "status":"completed"}; the reply an agent_message item; the last
//     line {"type":"turn.completed","usage":…}, whose usage counts the
//     whole thread, so a resume's includes the earlier turns.
//   - Resume is `codex exec resume --json --skip-git-repo-check SESSION
//     PROMPT`; the thread id stays the same and the request carries the
//     earlier conversation.
//   - With CODEX_HOME under the temporary directory ($TMPDIR, else /tmp)
//     it warns that it will not create its helper binaries there; with
//     TMPDIR elsewhere it does not. It prints "Reading additional input
//     from stdin..." when stdin is not a terminal.
//
// The streams of one run and its resume are kept in testdata
// (claude-stream.jsonl, claude-resume-stream.jsonl, codex-stream.jsonl,
// codex-resume-stream.jsonl) for the parsers' tests; `go test
// ./internal/executor/agent/agenttest -run MCPTool -record` writes them
// again.
package agenttest
