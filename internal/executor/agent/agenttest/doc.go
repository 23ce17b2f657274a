// Package agenttest is test support for the agent executors: scripted
// fakes of the vendors' model APIs (Anthropic Messages and OpenAI
// Responses, both streaming server-sent events) on 127.0.0.1, which the
// real Claude Code and Codex CLIs are pointed at, and the lookup of the
// pinned CLIs that .ci/run installs (Claude, Codex, MCPMemory).
//
// A Server answers each request of the conversation with the next step of
// its script (call a tool, or reply and end the turn), records every
// request (the tools offered, the conversation sent) so that a test can
// assert on them, answers the CLIs' side requests without advancing the
// script, and fails the test on anything a real client would not send:
// another path or method, a missing API key, a request that does not
// stream, another model, tools other than the expected set, a request
// that does not carry the result of the call just made, a request after
// the script's end.
//
// It is a fake for tests and must never be used by the daemon or any
// production package; it holds no real credential and never listens on
// anything but 127.0.0.1.
package agenttest
