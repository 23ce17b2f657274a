// Command gopkg is a test package written on the Go SDK (extension/pkg):
// operations of the three kinds, a gate, a start gate, a config check and
// an executor, which pkgproto's tests run under the host's runtime.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/pkg"
)

type gopkg struct{}

func (gopkg) Name() string    { return "gopkg" }
func (gopkg) Version() string { return "0.1.0" }

func (gopkg) Operations() []extension.Operation {
	return []extension.Operation{
		{Name: "gopkg.hello", Handler: func(_ context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
			var in struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(input, &in); err != nil || in.Name == "" {
				return nil, &extension.OperationError{Code: "no_name", Message: "give a name"}
			}
			return json.Marshal(map[string]any{"hello": in.Name, "request_id": auth.RequestID, "config": auth.Config})
		}},
		{Name: "gopkg.note", Emit: func(_ context.Context, auth extension.Authority, input json.RawMessage) (extension.Emission, error) {
			return extension.Emission{Type: "gopkg.noted", Data: input, CorrelationKey: auth.Work}, nil
		}},
		{Name: "gopkg.hold", Wait: func(_ context.Context, auth extension.Authority, _ json.RawMessage) (extension.WaitPlan, error) {
			return extension.WaitPlan{Types: []string{"gopkg.done"}, Keys: []string{auth.Work}, Timeout: 90 * time.Second, Output: json.RawMessage(`{"holding":true}`)}, nil
		}},
		{Name: "gopkg.block", Handler: func(ctx context.Context, _ extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}
}

func (gopkg) Gate(_ context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
	switch req.Operation {
	case "other.refuse":
		return nil, &extension.OperationError{Code: "no", Message: "not here"}
	case "other.park":
		return &extension.WaitPlan{Types: []string{"gopkg.ok"}, Keys: []string{req.Authority.Execution}, Output: json.RawMessage(`{"parked":true}`)}, nil
	case "other.fail":
		return nil, errors.New("a failure whose text must not cross")
	}
	return nil, nil
}

func (gopkg) AllowStart(_ context.Context, req extension.StartRequest) (*extension.WaitPlan, error) {
	if req.Binding == "held" {
		return &extension.WaitPlan{Types: []string{"gopkg.go"}, Keys: []string{req.Work}, Reason: fmt.Sprintf("held with %d inputs", len(req.Inputs))}, nil
	}
	return nil, nil
}

func (gopkg) CheckConfig(raw json.RawMessage) error {
	var c struct {
		Greeting string `json:"greeting"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return &extension.ConfigError{Problems: []extension.ConfigProblem{{Pointer: "", Code: "unknown_field", Remedy: "only greeting is a member"}}}
	}
	return nil
}

func (gopkg) Executors() []pkg.Executor { return []pkg.Executor{marker{}} }

// marker writes a file naming the token file it was given, and succeeds.
type marker struct{}

func (marker) Kind() string { return "marker" }

func (marker) Run(_ context.Context, req pkg.RunRequest) (pkg.Result, error) {
	body, _ := json.Marshal(req)
	if err := os.WriteFile(filepath.Join(req.Dir, "request.json"), body, 0o600); err != nil {
		return pkg.Result{Outcome: pkg.Failed, ExitCode: 1, Message: "could not write"}, nil
	}
	return pkg.Result{Outcome: pkg.Succeeded, Message: "marked", Session: "s-" + req.ExecutionID, Usage: &pkg.Usage{Turns: 1}}, nil
}

func (marker) Recover(context.Context, pkg.RunRequest) (pkg.Result, error) {
	return pkg.Result{}, pkg.ErrSegmentGone
}

func (marker) Resume(_ context.Context, req pkg.RunRequest) (pkg.Result, error) {
	return pkg.Result{Outcome: pkg.Succeeded, Session: req.Session}, nil
}

func (marker) Stop(context.Context, pkg.RunRequest, time.Duration) error { return nil }

func main() {
	if err := pkg.Serve(context.Background(), os.Stdin, os.Stdout, gopkg{}); err != nil {
		fmt.Fprintln(os.Stderr, "gopkg:", err)
		os.Exit(1)
	}
}
