package pkg_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/pkg"
)

// echo is a small package: one operation that answers its input, one that
// waits to be cancelled, and a gate.
type echo struct{}

func (echo) Name() string    { return "echo" }
func (echo) Version() string { return "1.0.0" }

func (echo) Operations() []extension.Operation {
	return []extension.Operation{
		{Name: "echo.say", Handler: func(_ context.Context, _ extension.Authority, in json.RawMessage) (json.RawMessage, error) {
			return in, nil
		}},
		{Name: "echo.block", Handler: func(ctx context.Context, _ extension.Authority, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		{Name: "echo.secret", Handler: func(context.Context, extension.Authority, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("hunter2")
		}},
	}
}

func (echo) Gate(context.Context, extension.GateRequest) (*extension.WaitPlan, error) {
	return &extension.WaitPlan{Types: []string{"echo.ok"}, Timeout: 2 * time.Second}, nil
}

// session drives Serve as the host would.
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan error
}

func serve(t *testing.T, p pkg.Package) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		s.done <- pkg.Serve(context.Background(), inR, outW, p)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close() })
	return s
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *session) read() pkg.Message {
	s.t.Helper()
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		s.t.Fatalf("read: %v", err)
	}
	var m pkg.Message
	if err := json.Unmarshal(line, &m); err != nil {
		s.t.Fatalf("answer %q: %v", line, err)
	}
	return m
}

func (s *session) initialize() {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_versions":["1"],"host":{"name":"open-conduit","version":"t"},"package":{"name":"echo","version":"1.0.0"}}}`)
	m := s.read()
	var res pkg.InitializeResult
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		s.t.Fatalf("initialize = %+v", m)
	}
	if res.ProtocolVersion != "1" || res.Package != (pkg.Party{Name: "echo", Version: "1.0.0"}) ||
		!slices.Equal(res.Serves, []string{pkg.MethodCall, pkg.MethodGate}) {
		s.t.Fatalf("initialize result = %+v", res)
	}
}

func TestHandshake(t *testing.T) {
	s := serve(t, echo{})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"operation.call","params":{}}`)
	if m := s.read(); m.Error == nil || m.Error.Code != pkg.CodeInvalidRequest {
		t.Fatalf("a call before initialize = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocol_versions":["9"]}}`)
	m := s.read()
	if m.Error == nil || m.Error.Code != pkg.CodeUnsupportedVersion || string(m.Error.Data) != `{"supported":["1"]}` {
		t.Fatalf("an unsupported version = %+v", m)
	}
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":3,"method":"shutdown"}`)
	if m := s.read(); m.Error != nil || string(m.Result) != `{}` || string(m.ID) != "3" {
		t.Fatalf("shutdown = %+v", m)
	}
	if err := <-s.done; err != nil {
		t.Fatalf("Serve after shutdown = %v", err)
	}
}

func TestCallsCancelAndErrors(t *testing.T) {
	s := serve(t, echo{})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":5,"method":"operation.call","params":{"operation":"echo.block","input":{},"authority":{}}}`)
	s.send(`{"jsonrpc":"2.0","id":6,"method":"operation.call","params":{"operation":"echo.say","input":{"a":1},"authority":{}}}`)
	// The blocked call does not hold up the next one.
	if m := s.read(); string(m.ID) != "6" || string(m.Result) != `{"output":{"a":1}}` {
		t.Fatalf("say = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"$/cancel","params":{"id":5}}`)
	if m := s.read(); string(m.ID) != "5" || m.Error == nil || m.Error.Code != pkg.CodeCancelled {
		t.Fatalf("cancelled = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":7,"method":"operation.call","params":{"operation":"echo.secret","input":{},"authority":{}}}`)
	if m := s.read(); m.Error == nil || m.Error.Code != pkg.CodeInternalError || m.Error.Message != "internal error" || len(m.Error.Data) != 0 {
		t.Fatalf("an error without a verdict = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":8,"method":"operation.gate","params":{"operation":"x.y","input":{},"authority":{}}}`)
	if m := s.read(); string(m.Result) != `{"verdict":"park","plan":{"types":["echo.ok"],"timeout_ms":2000}}` {
		t.Fatalf("gate = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":9,"method":"work.start_gate","params":{}}`)
	if m := s.read(); m.Error == nil || m.Error.Code != pkg.CodeMethodNotFound {
		t.Fatalf("an unserved method = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":10,"method":"operation.call","params":{"operation":"echo.nope","input":{},"authority":{}}}`)
	if m := s.read(); m.Error == nil || m.Error.Code != pkg.CodeInvalidParams {
		t.Fatalf("an unknown operation = %+v", m)
	}
	s.send(`not json`)
	if m := s.read(); m.Error == nil || m.Error.Code != pkg.CodeParseError {
		t.Fatalf("a line that is not JSON = %+v", m)
	}
	s.in.Close()
	if err := <-s.done; err != nil {
		t.Fatalf("Serve at the end of its input = %v", err)
	}
}
