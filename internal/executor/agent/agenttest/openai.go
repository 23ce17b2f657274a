package agenttest

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// OpenAI starts a scripted OpenAI Responses server. Point Codex at it with
// a model provider whose base_url is s.URL+"/v1", wire_api "responses",
// and whose env_key names a variable holding opts.APIKey (CodexConfig
// writes that provider).
func OpenAI(t testing.TB, opts Options) *Server {
	t.Helper()
	return start(t, opts, openAI{})
}

type openAI struct{}

type openAIRequest struct {
	Model        string `json:"model"`
	Instructions string `json:"instructions"`
	Metadata     struct {
		ThreadID string `json:"thread_id"`
	} `json:"client_metadata"`
	Stream bool         `json:"stream"`
	Input  []openAIItem `json:"input"`
	Tools  []openAITool `json:"tools"`
}

type openAITool struct {
	Type  string       `json:"type"`
	Name  string       `json:"name"`
	Tools []openAITool `json:"tools"`
}

type openAIItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// toolNames flattens the offered tools: a function is its name, a tool
// inside a namespace is NAMESPACE__NAME (the name Claude gives it), and
// any other tool is TYPE:NAME so that it cannot pass for a function.
func toolNames(tools []openAITool) []string {
	var out []string
	for _, tool := range tools {
		switch tool.Type {
		case "function":
			out = append(out, tool.Name)
		case "namespace":
			for _, inner := range tool.Tools {
				out = append(out, tool.Name+"__"+inner.Name)
			}
		default:
			out = append(out, tool.Type+":"+tool.Name)
		}
	}
	return out
}

// resolve finds how to call name: a function offered at the top, or a
// tool inside a namespace that name begins with.
func resolve(tools []openAITool, name string) (namespace, tool string, ok bool) {
	for _, t := range tools {
		switch t.Type {
		case "function":
			if t.Name == name {
				return "", name, true
			}
		case "namespace":
			rest, found := strings.CutPrefix(name, t.Name+"__")
			if !found {
				continue
			}
			for _, inner := range t.Tools {
				if inner.Name == rest {
					return t.Name, rest, true
				}
			}
		}
	}
	return "", "", false
}

func (openAI) serve(s *Server, w http.ResponseWriter, r *http.Request, body []byte) {
	if r.Header.Get("Authorization") != "Bearer "+s.opts.APIKey {
		s.refuse(w, http.StatusUnauthorized, "%s %s without the API key as its bearer", r.Method, r.URL.Path)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.refuse(w, http.StatusNotFound, "unexpected %s %s", r.Method, r.URL.Path)
		return
	}
	var req openAIRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.refuse(w, http.StatusBadRequest, "POST /v1/responses with a body that is no request: %v", err)
		return
	}
	if !req.Stream {
		s.refuse(w, http.StatusBadRequest, "POST /v1/responses without stream true")
		return
	}
	if req.Model != s.opts.Model {
		s.refuse(w, http.StatusBadRequest, "POST /v1/responses for model %q, want %q", req.Model, s.opts.Model)
		return
	}
	rec := Request{Model: req.Model, Body: body, Session: req.Metadata.ThreadID, System: req.Instructions, Tools: toolNames(req.Tools)}
	for _, it := range req.Input {
		switch it.Type {
		case "message", "":
			rec.Items = append(rec.Items, Item{Role: it.Role, Kind: "text", Text: textOf(it.Content)})
		case "function_call":
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + "__" + it.Name
			}
			rec.Items = append(rec.Items, Item{Role: "assistant", Kind: "tool_call", Text: it.Arguments, CallID: it.CallID, Name: name})
		case "function_call_output":
			rec.Items = append(rec.Items, Item{Role: "user", Kind: "tool_result", Text: textOf(it.Output), CallID: it.CallID})
		}
	}
	step, callID, ok := s.advance(rec, "call_oc")
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
	var item obj
	if step.Tool != "" {
		ns, name, found := resolve(req.Tools, step.Tool)
		if !found {
			s.refuse(w, http.StatusInternalServerError, "the script calls %s, which the request does not offer", step.Tool)
			return
		}
		item = obj{"type": "function_call", "id": "fc_" + callID, "call_id": callID, "name": name,
			"arguments": input, "status": "completed"}
		if ns != "" {
			item["namespace"] = ns
		}
	}

	e := newSSE(w)
	respID := "resp_oc_" + callID
	seq := 0
	ev := func(name string, data obj) {
		data["type"] = name
		data["sequence_number"] = seq
		seq++
		e.event(name, data)
	}
	response := func(status string, output []any) obj {
		r := obj{"id": respID, "object": "response", "created_at": 0, "status": status, "model": req.Model, "output": output}
		if status == "completed" {
			r["usage"] = obj{"input_tokens": 10, "input_tokens_details": obj{"cached_tokens": 0},
				"output_tokens": 5, "output_tokens_details": obj{"reasoning_tokens": 0}, "total_tokens": 15}
		}
		return r
	}
	ev("response.created", obj{"response": response("in_progress", []any{})})
	if item == nil {
		msgID := "msg_oc_" + respID
		ev("response.output_item.added", obj{"output_index": 0, "item": obj{"id": msgID, "type": "message",
			"status": "in_progress", "role": "assistant", "content": []any{}}})
		ev("response.content_part.added", obj{"item_id": msgID, "output_index": 0, "content_index": 0,
			"part": obj{"type": "output_text", "text": "", "annotations": []any{}}})
		ev("response.output_text.delta", obj{"item_id": msgID, "output_index": 0, "content_index": 0, "delta": step.Text})
		ev("response.output_text.done", obj{"item_id": msgID, "output_index": 0, "content_index": 0, "text": step.Text})
		item = obj{"id": msgID, "type": "message", "status": "completed", "role": "assistant",
			"content": []any{obj{"type": "output_text", "text": step.Text, "annotations": []any{}}}}
	} else {
		ev("response.output_item.added", obj{"output_index": 0, "item": item})
	}
	ev("response.output_item.done", obj{"output_index": 0, "item": item})
	ev("response.completed", obj{"response": response("completed", []any{item})})
}
