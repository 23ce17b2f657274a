// Package claudecode is the claude-code executor: it runs Anthropic's
// Claude Code CLI as an execution through agentrun (New), with its own
// Driver: CLAUDE_CONFIG_DIR in the execution's home, an MCP configuration
// whose one server is os mcp, `claude -p --output-format stream-json
// --verbose` with the prompt on stdin, --tools and --allowedTools exactly
// the config's tools, and --resume SESSION for a resume. It also holds the
// strict check of a binding's executor config (ParseConfig,
// ValidateConfig), the playbook the config names (Namer), and the parser
// of the CLI's stream (Parse, Parser), which follows tool calls to their
// results so that a successful wait can park the segment.
//
// It must never log, store or put in an error the model API key or the
// execution token (a config names the binding's secrets by variable name
// only), never quote a configured value in a problem, and never decide what
// happens to Work: it reports what the agent did.
//
// # The stream it parses
//
// One JSON object per line, each with a "type". Relied on, as measured
// with Claude Code 2.1.328:
//
//	{"type":"system","subtype":"init","session_id":"…","tools":["…"],
//	 "mcp_servers":[{"name":"…","status":"connected"}],"model":"…"}
//	{"type":"assistant","message":{…},"session_id":"…"}
//	{"type":"user","message":{…},"session_id":"…"}
//	{"type":"result","subtype":"success","is_error":false,"num_turns":2,
//	 "result":"…","session_id":"…","total_cost_usd":0.01,
//	 "usage":{"input_tokens":1,"output_tokens":2,
//	          "cache_creation_input_tokens":3,"cache_read_input_tokens":4}}
//
// Every other type, and every other member, is ignored; a malformed or
// oversized line is counted and skipped, never fatal.
package claudecode
