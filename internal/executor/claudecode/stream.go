package claudecode

import (
	"encoding/json"
	"io"

	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

// Bounds on what a Result keeps of a stream, so that a runaway agent
// cannot make it grow without end.
const (
	MaxResultText = 64 * 1024
	maxIDLen      = 256
	maxNameLen    = 256
	maxTools      = 1024
	maxServers    = 64
	maxPending    = 1024
	maxSucceeded  = 256
)

// Usage is the token usage the result line reports.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// MCPServer is one MCP server as the init line reports it.
type MCPServer struct {
	Name   string
	Status string
}

// Result is what a stream told about one run of the agent.
type Result struct {
	// SessionID is the session the agent ran in: the result line's, else
	// the init line's. A resume continues it.
	SessionID string
	// Init is set when the init line was seen.
	Init bool
	// Model is the model the init line names.
	Model string
	// Tools are the tools the init line lists, in its order.
	Tools []string
	// MCPServers are the MCP servers and their statuses, in its order.
	MCPServers []MCPServer

	// Done is set when a result line was seen; the members below are
	// meaningful only then.
	Done bool
	// Subtype is the result's subtype ("success", "error_max_turns", …).
	Subtype string
	// IsError is the result's is_error.
	IsError bool
	// Text is the final result text, cut at MaxResultText bytes
	// (TextCut says so).
	Text     string
	TextCut  bool
	NumTurns int64
	Usage    Usage
	CostUSD  float64

	// Messages counts assistant and user lines.
	Messages int
	// ToolCalls counts the tool_use blocks of assistant lines.
	ToolCalls int
	// SucceededTools names, in order, the tools whose call's tool_result
	// came back without is_error (at most 256 are kept), as the agent
	// names them (mcp__SERVER__TOOL for an MCP tool).
	SucceededTools []string
	// Unknown counts well-formed lines of a type not listed above.
	Unknown int
	// Malformed counts lines that are not a JSON object with a type.
	Malformed int
	// Lines, Oversized and Truncated are the line reader's counts.
	agent.LineStats
}

// Parser consumes a stream one line at a time; the zero value is ready.
type Parser struct {
	res Result
	// pending maps the id of each tool_use not yet answered to its tool.
	pending map[string]string
}

type line struct {
	Type       string          `json:"type"`
	Subtype    string          `json:"subtype"`
	SessionID  string          `json:"session_id"`
	Model      string          `json:"model"`
	Tools      []string        `json:"tools"`
	MCPServers []mcpServerLine `json:"mcp_servers"`
	IsError    bool            `json:"is_error"`
	NumTurns   int64           `json:"num_turns"`
	Result     json.RawMessage `json:"result"`
	TotalCost  float64         `json:"total_cost_usd"`
	Usage      *Usage          `json:"usage"`
	Message    *messageLine    `json:"message"`
}

type messageLine struct {
	// Content is a string or a list of blocks.
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Name      string `json:"name"`
	ToolUseID string `json:"tool_use_id"`
	IsError   bool   `json:"is_error"`
}

type mcpServerLine struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Line consumes one complete line (without its newline). It never fails:
// a line it cannot read is counted as malformed.
func (p *Parser) Line(b []byte) {
	var l line
	if err := json.Unmarshal(b, &l); err != nil || l.Type == "" {
		p.res.Malformed++
		return
	}
	r := &p.res
	switch l.Type {
	case "system":
		if l.Subtype != "init" {
			r.Unknown++
			return
		}
		r.Init = true
		r.setSession(l.SessionID)
		r.Model = bound(l.Model, maxNameLen)
		r.Tools = r.Tools[:0]
		for _, t := range l.Tools {
			if len(r.Tools) == maxTools {
				break
			}
			r.Tools = append(r.Tools, bound(t, maxNameLen))
		}
		r.MCPServers = r.MCPServers[:0]
		for _, s := range l.MCPServers {
			if len(r.MCPServers) == maxServers {
				break
			}
			r.MCPServers = append(r.MCPServers, MCPServer{Name: bound(s.Name, maxNameLen), Status: bound(s.Status, maxNameLen)})
		}
	case "assistant", "user":
		r.Messages++
		if r.SessionID == "" {
			r.setSession(l.SessionID)
		}
		p.blocks(l.Type, l.Message)
	case "result":
		r.Done = true
		r.setSession(l.SessionID)
		r.Subtype = bound(l.Subtype, maxNameLen)
		r.IsError = l.IsError
		r.NumTurns = l.NumTurns
		r.CostUSD = l.TotalCost
		r.Usage = Usage{}
		if l.Usage != nil {
			r.Usage = *l.Usage
		}
		r.Text, r.TextCut = "", false
		var text string
		if len(l.Result) > 0 && json.Unmarshal(l.Result, &text) == nil {
			r.Text = bound(text, MaxResultText)
			r.TextCut = len(text) > MaxResultText
		}
	default:
		r.Unknown++
	}
}

// blocks follows the tool calls of a message: an assistant's tool_use
// blocks, and a user's tool_result blocks that answer them.
func (p *Parser) blocks(role string, m *messageLine) {
	if m == nil || len(m.Content) == 0 || m.Content[0] != '[' {
		return
	}
	var blocks []block
	if json.Unmarshal(m.Content, &blocks) != nil {
		return
	}
	r := &p.res
	for _, b := range blocks {
		switch {
		case role == "assistant" && b.Type == "tool_use":
			r.ToolCalls++
			if p.pending == nil {
				p.pending = map[string]string{}
			}
			if b.ID != "" && len(b.ID) <= maxIDLen && len(p.pending) < maxPending {
				p.pending[b.ID] = bound(b.Name, maxNameLen)
			}
		case role == "user" && b.Type == "tool_result":
			name, ok := p.pending[b.ToolUseID]
			if !ok {
				continue
			}
			delete(p.pending, b.ToolUseID)
			if !b.IsError && len(r.SucceededTools) < maxSucceeded {
				r.SucceededTools = append(r.SucceededTools, name)
			}
		}
	}
}

func (r *Result) setSession(id string) {
	if id != "" && len(id) <= maxIDLen {
		r.SessionID = id
	}
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
// only; a stream without a result line is not an error (Result.Done says).
func Parse(r io.Reader, maxLine int) (Result, error) {
	var p Parser
	st, err := agent.ReadLines(r, maxLine, p.Line)
	res := p.Result()
	res.LineStats = st
	return res, err
}
