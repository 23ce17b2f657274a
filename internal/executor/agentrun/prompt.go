package agentrun

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/executor/agent"
)

// MaxPrompt bounds a rendered prompt.
const MaxPrompt = 1 << 20

// maxEventData bounds one Event's data in the resume prompt.
const maxEventData = 64 * 1024

// PromptData is what a config's prompt template sees:
//
//	{{range .Events}}{{.Type}} from {{.Source}}: {{.DataJSON}}{{end}}
//	{{(index .Events 0).Data.issue.title}}
type PromptData struct {
	// Events are the Work's input Events, oldest first.
	Events []PromptEvent
	// WorkID, ExecutionID, ScopeID and BindingID name where the agent runs.
	WorkID, ExecutionID, ScopeID, BindingID string
}

// PromptEvent is one input Event as the template sees it.
type PromptEvent struct {
	ID             string
	Seq            int64
	Type           string
	Source         string
	Scope          string
	CorrelationKey string
	// Data is the Event's data decoded from JSON (objects are maps, so
	// .Data.issue.title reads a member; nil when it has none).
	Data any
	// DataJSON is the Event's data as JSON text ("null" when it has none).
	DataJSON   string
	AcceptedAt time.Time
}

func promptEvents(events []executor.Event) []PromptEvent {
	out := make([]PromptEvent, 0, len(events))
	for _, ev := range events {
		pe := PromptEvent{ID: ev.ID, Seq: ev.Seq, Type: ev.Type, Source: ev.Source, Scope: ev.Scope,
			CorrelationKey: ev.CorrelationKey, DataJSON: "null", AcceptedAt: ev.AcceptedAt}
		if raw := bytes.TrimSpace(ev.Data); len(raw) > 0 {
			pe.DataJSON = string(raw)
			json.Unmarshal(raw, &pe.Data)
		}
		out = append(out, pe)
	}
	return out
}

// RenderPrompt executes the config's prompt template over the segment's
// Events. Its error is safe to show: it never quotes the template or an
// Event.
func RenderPrompt(cfg agent.Config, req executor.RunRequest) (string, error) {
	if cfg.Template == nil {
		return "", errors.New("the config has no prompt template")
	}
	data := PromptData{Events: promptEvents(req.Events), WorkID: req.WorkID, ExecutionID: req.ExecutionID, ScopeID: req.ScopeID, BindingID: req.BindingID}
	var b limitedBuffer
	b.limit = MaxPrompt
	if err := cfg.Template.Execute(&b, data); err != nil {
		if errors.Is(err, errPromptTooLarge) {
			return "", errors.New("the prompt rendered from the Work's input Events is larger than 1 MiB; shorten the template or what it quotes")
		}
		return "", errors.New("the prompt template failed on the Work's input Events (a missing member or a wrong type); check it against the fields the executor documents")
	}
	if strings.TrimSpace(b.String()) == "" {
		return "", errors.New("the prompt rendered from the Work's input Events is blank")
	}
	return b.String(), nil
}

var errPromptTooLarge = errors.New("prompt too large")

type limitedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.limit {
		return 0, errPromptTooLarge
	}
	return b.Buffer.Write(p)
}

// ResumePrompt is the prompt of a resumed segment: a fixed text listing the
// Events that woke the Work, oldest first, each with its type, source, id,
// correlation key and data (JSON, cut at 64 KiB).
func ResumePrompt(events []executor.Event) string {
	var b strings.Builder
	if len(events) == 0 {
		b.WriteString("The Work you were waiting on was woken, with no new input Events (a timer or an operator woke it).\n")
	} else {
		b.WriteString("The Work you were waiting on was woken by these input Events, oldest first:\n\n")
		for _, ev := range promptEvents(events) {
			data := ev.DataJSON
			if len(data) > maxEventData {
				data = data[:maxEventData] + " [cut]"
			}
			b.WriteString("- " + ev.Type + " from " + ev.Source + " (event " + ev.ID)
			if ev.CorrelationKey != "" {
				b.WriteString(", correlation key " + ev.CorrelationKey)
			}
			b.WriteString("): " + data + "\n")
		}
	}
	b.WriteString("\nContinue the task from where you stopped, using the toolbelt's tools.\n")
	return b.String()
}
