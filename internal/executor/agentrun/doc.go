// Package agentrun runs coding-agent CLIs (Claude Code, Codex) as
// executions; the claudecode and codex packages give it a Driver each.
//
// Per execution it keeps, in the execution directory:
//
//	<dir>/home/                 HOME of the agent and its configuration home
//	                            (the driver's: CLAUDE_CONFIG_DIR, CODEX_HOME),
//	                            holding its MCP configuration and the playbook
//	                            as its skill; it persists across segments, so
//	                            a resume finds the agent's session there
//	<dir>/work/                 the default working directory
//	<dir>/segments/<epoch>/     one segment (Run, or a Resume), supervised by
//	                            proc: launch, status, stop, the stream
//	                            (stream.jsonl, the transcript), the log
//	                            (output.log, stderr), the prompt (prompt.txt,
//	                            the agent's stdin) and segment.json (its
//	                            deadline)
//
// A Work whose binding names a git repository gets its own clone under the
// workspaces root (<root>/<key of the Work id>/checkout), which
// SweepWorkspaces removes once the Work has ended, or a while after it
// failed.
//
// While a segment runs, its stream is followed through inotify; once it
// shows a successful call of the toolbelt's wait or declare_outcome, the
// agent has a grace to end its turn, after which its group is stopped.
//
// It must never write the model API key or the execution token to a file
// it keeps (the key reaches the agent only in its environment, through
// the supervisor's launch file that the supervisor deletes on reading it;
// the token only as the host's token file), never put a secret or the
// prompt on a command line, never quote a configured value or the model's
// output in a Result's message or an error, never read coordination
// storage (a Work's end is asked of its caller), and never decide what
// happens to Work: it reports what the agent did.
package agentrun
