package codex

import (
	"encoding/json"
	"io"

	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

// Bounds on what a Result keeps of a stream.
const (
	MaxMessage   = 64 * 1024
	MaxErrorLen  = 4 * 1024
	maxIDLen     = 256
	maxSucceeded = 256
)

// Usage is token usage, summed over completed turns.
type Usage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

// Result is what a stream told about one run of the agent.
type Result struct {
	// ThreadID is the thread (session) the agent ran in.
	ThreadID string
	// TurnsStarted and TurnsCompleted count turn.started and
	// turn.completed events.
	TurnsStarted   int
	TurnsCompleted int
	// Usage is summed over completed turns.
	Usage Usage
	// Message is the text of the last completed agent_message, cut at
	// MaxMessage bytes (MessageCut says so).
	Message    string
	MessageCut bool
	// Failed is set by turn.failed or error; Error is its message, cut at
	// MaxErrorLen. It is the CLI's text: show it only where the agent's
	// own output may be shown.
	Failed bool
	Error  string
	// Items counts completed items by type; MCPCalls counts completed
	// mcp_tool_call items by status.
	Items    map[string]int
	MCPCalls map[string]int
	// SucceededTools names, in order, the MCP tools whose completed call
	// carried no error (at most 256 are kept), as mcp__SERVER__TOOL.
	SucceededTools []string

	// Unknown counts well-formed lines of an event type not listed in the
	// package doc; Malformed lines that are not a JSON object with a type.
	Unknown   int
	Malformed int
	agent.LineStats
}

// Done reports whether the last turn the stream started completed.
func (r Result) Done() bool {
	return r.TurnsCompleted > 0 && r.TurnsCompleted >= r.TurnsStarted
}

// Parser consumes events one line at a time; the zero value is ready.
type Parser struct {
	res Result
}

type event struct {
	Type     string     `json:"type"`
	ThreadID string     `json:"thread_id"`
	Usage    *Usage     `json:"usage"`
	Item     *item      `json:"item"`
	Error    *errorBody `json:"error"`
	Message  *string    `json:"message"`
}

type item struct {
	Type   string          `json:"type"`
	Text   json.RawMessage `json:"text"`
	Status string          `json:"status"`
	Server string          `json:"server"`
	Tool   string          `json:"tool"`
	Error  json.RawMessage `json:"error"`
	Result *struct {
		IsError bool `json:"is_error"`
	} `json:"result"`
}

type errorBody struct {
	Message string `json:"message"`
}

const maxKinds = 64

// Line consumes one complete line (without its newline). It never fails:
// a line it cannot read is counted as malformed.
func (p *Parser) Line(b []byte) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil || e.Type == "" {
		p.res.Malformed++
		return
	}
	r := &p.res
	switch e.Type {
	case "thread.started":
		if e.ThreadID != "" && len(e.ThreadID) <= maxIDLen {
			r.ThreadID = e.ThreadID
		}
	case "turn.started":
		r.TurnsStarted++
	case "turn.completed":
		r.TurnsCompleted++
		if e.Usage != nil {
			r.Usage.InputTokens += e.Usage.InputTokens
			r.Usage.CachedInputTokens += e.Usage.CachedInputTokens
			r.Usage.OutputTokens += e.Usage.OutputTokens
		}
	case "turn.failed":
		msg := ""
		if e.Error != nil {
			msg = e.Error.Message
		}
		r.fail(msg)
	case "error":
		msg := ""
		if e.Message != nil {
			msg = *e.Message
		}
		r.fail(msg)
	case "item.started", "item.updated":
	case "item.completed":
		if e.Item == nil || e.Item.Type == "" {
			r.Malformed++
			return
		}
		count(&r.Items, bound(e.Item.Type, 64))
		switch e.Item.Type {
		case "agent_message":
			var text string
			if json.Unmarshal(e.Item.Text, &text) == nil {
				r.Message = bound(text, MaxMessage)
				r.MessageCut = len(text) > MaxMessage
			}
		case "mcp_tool_call":
			count(&r.MCPCalls, bound(e.Item.Status, 64))
			failed := len(e.Item.Error) > 0 && string(e.Item.Error) != "null"
			if e.Item.Result != nil && e.Item.Result.IsError {
				failed = true
			}
			if e.Item.Status == "completed" && !failed && len(r.SucceededTools) < maxSucceeded {
				r.SucceededTools = append(r.SucceededTools, "mcp__"+bound(e.Item.Server, 64)+"__"+bound(e.Item.Tool, 128))
			}
		}
	default:
		r.Unknown++
	}
}

func (r *Result) fail(msg string) {
	r.Failed = true
	r.Error = bound(msg, MaxErrorLen)
}

// count adds one to m[k], keeping at most maxKinds keys.
func count(m *map[string]int, k string) {
	if *m == nil {
		*m = map[string]int{}
	}
	if _, ok := (*m)[k]; !ok && len(*m) == maxKinds {
		k = "other"
	}
	(*m)[k]++
}

// bound cuts s to at most n bytes, on a rune boundary.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// Result returns what the lines so far told.
func (p *Parser) Result() Result { return p.res }

// Parse reads a whole stream, lines up to maxLine bytes (agent.MaxLine
// when maxLine <= 0), and returns what it told. Its error is the reader's
// only; a stream that never completed a turn is not an error
// (Result.Done says).
func Parse(r io.Reader, maxLine int) (Result, error) {
	var p Parser
	st, err := agent.ReadLines(r, maxLine, p.Line)
	res := p.Result()
	res.LineStats = st
	return res, err
}
