// Package codex is the codex executor: it runs OpenAI's Codex CLI as an
// execution through agentrun (New), with its own Driver: CODEX_HOME in the
// execution's home, a config.toml naming the model, a model provider (the
// config's base_url, the key from the environment), os mcp as the one MCP
// server and Codex's own tools off unless the config names them, and
// `codex exec --json -` (or `codex exec resume --json SESSION -`) with the
// prompt on stdin. It also holds the strict check of a binding's executor
// config (ParseConfig, ValidateConfig), the playbook the config names
// (Namer), and the parser of the CLI's JSON events (Parse, Parser).
//
// It must never log, store or put in an error the model API key or the
// execution token (a config names the binding's secrets by variable name
// only), never quote a configured value in a problem, and never decide what
// happens to Work: it reports what the agent did.
//
// # The events it parses
//
// One JSON object per line, each with a "type". Relied on, from the
// ThreadEvent type of the openai/codex repository's
// codex-rs/exec/src/exec_events.rs, and seen from the pinned 0.169.0:
//
//	{"type":"thread.started","thread_id":"…"}      first; the id a resume continues
//	{"type":"turn.started"}
//	{"type":"item.started"|"item.updated"|"item.completed",
//	 "item":{"id":"…","type":"agent_message","text":"…"}}
//	{"type":"turn.completed","usage":{"input_tokens":1,
//	 "cached_input_tokens":2,"output_tokens":3}}
//	{"type":"turn.failed","error":{"message":"…"}}
//	{"type":"error","message":"…"}
//
// The final message is the text of the last completed agent_message item;
// usage is summed over the completed turns. Other item types
// (reasoning, command_execution, file_change, mcp_tool_call, web_search,
// todo_list, error, …) are counted, mcp_tool_call by its status (one
// completed without an error also names its server and tool as a
// succeeded call); every
// other event type and member is ignored, and a malformed or oversized
// line is counted and skipped, never fatal.
package codex
