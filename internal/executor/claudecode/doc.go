// Package claudecode is the groundwork of the claude-code executor, which
// will run Anthropic's Claude Code CLI as an execution: the strict check of
// a binding's executor config (ParseConfig, ValidateConfig), the playbook
// the config names (Executor.PlaybookName), and the parser of the CLI's
// machine-readable output, `claude -p … --output-format stream-json
// --verbose` (Parse, Parser).
//
// This release does not run the agent: Executor's Run and Resume refuse
// with ErrNotImplemented, and the daemon does not hand it Work.
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
