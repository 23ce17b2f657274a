package agenttest

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// Anthropic starts a scripted Anthropic Messages server. Point Claude Code
// at it with ANTHROPIC_BASE_URL=s.URL and ANTHROPIC_API_KEY=opts.APIKey.
func Anthropic(t testing.TB, opts Options) *Server {
	t.Helper()
	return start(t, opts, anthropic{})
}

type anthropic struct{}

type anthropicRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Metadata struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	MaxTokens int `json:"max_tokens"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (anthropic) serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Method == http.MethodHead && r.URL.Path == "/api/hello" {
		// Claude Code's reachability probe, sent without the key.
		s.sideRequest(r, "reachability probe")
		return
	}
	if r.Header.Get("x-api-key") != s.opts.APIKey {
		s.refuse(w, http.StatusUnauthorized, "%s %s without the API key in x-api-key", r.Method, r.URL.Path)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.refuse(w, http.StatusNotFound, "unexpected %s %s", r.Method, r.URL.Path)
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.refuse(w, http.StatusBadRequest, "POST /v1/messages without anthropic-version")
		return
	}
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.refuse(w, http.StatusBadRequest, "POST /v1/messages with a body that is no request: %v", err)
		return
	}
	if !req.Stream {
		s.refuse(w, http.StatusBadRequest, "POST /v1/messages without stream true")
		return
	}
	if req.Model != s.opts.Model {
		s.refuse(w, http.StatusBadRequest, "POST /v1/messages for model %q, want %q", req.Model, s.opts.Model)
		return
	}
	rec := Request{Model: req.Model, Body: body, System: textOf(req.System)}
	var user struct {
		SessionID string `json:"session_id"`
	}
	if json.Unmarshal([]byte(req.Metadata.UserID), &user) == nil {
		rec.Session = user.SessionID
	}
	for _, tool := range req.Tools {
		rec.Tools = append(rec.Tools, tool.Name)
	}
	for _, m := range req.Messages {
		var blocks []anthropicBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			rec.Items = append(rec.Items, Item{Role: m.Role, Kind: "text", Text: textOf(m.Content)})
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				rec.Items = append(rec.Items, Item{Role: m.Role, Kind: "text", Text: b.Text})
			case "tool_use":
				rec.Items = append(rec.Items, Item{Role: m.Role, Kind: "tool_call", Text: string(b.Input), CallID: b.ID, Name: b.Name})
			case "tool_result":
				rec.Items = append(rec.Items, Item{Role: m.Role, Kind: "tool_result", Text: textOf(b.Content), CallID: b.ToolUseID, IsError: b.IsError})
			}
		}
	}
	step, callID, ok := s.advance(rec, "toolu_oc")
	if !ok {
		step = Reply("agenttest: the script has ended")
	}
	if !step.held(r) {
		return
	}
	input, err := step.input()
	if err != nil {
		s.refuse(w, http.StatusInternalServerError, "%v", err)
		return
	}

	if step.Tool != "" && !slices.Contains(rec.Tools, step.Tool) {
		s.refuse(w, http.StatusInternalServerError, "the script calls %s, which the request does not offer", step.Tool)
		return
	}

	e := newSSE(w)
	msgID := "msg_oc" + callID
	if callID == "" {
		msgID = "msg_oc_reply"
	}
	e.event("message_start", obj{"type": "message_start", "message": obj{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": 10, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	stop := "end_turn"
	if step.Tool != "" {
		stop = "tool_use"
		e.event("content_block_start", obj{"type": "content_block_start", "index": 0,
			"content_block": obj{"type": "tool_use", "id": callID, "name": step.Tool, "input": obj{}}})
		// The input arrives in two pieces, as a real stream splits it.
		half := len(input) / 2
		for _, part := range []string{input[:half], input[half:]} {
			e.event("content_block_delta", obj{"type": "content_block_delta", "index": 0,
				"delta": obj{"type": "input_json_delta", "partial_json": part}})
		}
	} else {
		e.event("content_block_start", obj{"type": "content_block_start", "index": 0,
			"content_block": obj{"type": "text", "text": ""}})
		e.event("content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "text_delta", "text": step.Text}})
	}
	e.event("content_block_stop", obj{"type": "content_block_stop", "index": 0})
	e.event("message_delta", obj{"type": "message_delta",
		"delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": 5}})
	e.event("message_stop", obj{"type": "message_stop"})
}
