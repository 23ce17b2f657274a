package pkg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

// Serve serves p over the extension protocol: it reads the host's messages
// from in, one a line, and writes its answers to out. It answers requests
// concurrently. It returns nil once it has answered shutdown, or when in
// reaches its end (the host has gone), after the calls in flight have
// ended (their contexts are cancelled); and ctx's error when ctx ends
// first.
func Serve(ctx context.Context, in io.Reader, out io.Writer, p Package) error {
	s := &server{p: p, out: out, inflight: map[string]context.CancelFunc{}}
	if o, ok := p.(Operator); ok {
		s.ops = map[string]extension.Operation{}
		for _, op := range o.Operations() {
			s.ops[op.Name] = op
		}
	}
	if e, ok := p.(Executorer); ok {
		s.executors = map[string]Executor{}
		for _, x := range e.Executors() {
			s.executors[x.Kind()] = x
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		r := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := ReadLine(r)
			if len(bytes.TrimSpace(line)) > 0 {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	defer s.wg.Wait()
	defer s.cancelAll()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case line := <-lines:
			if s.handle(ctx, line) {
				return nil
			}
		}
	}
}

// ErrTooLong is a line over MaxMessage.
var ErrTooLong = errors.New("pkg: a message is longer than the protocol allows")

// ReadLine reads one message's line of at most MaxMessage bytes (its end
// of line included); ErrTooLong past that.
func ReadLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxMessage {
			return nil, ErrTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

type server struct {
	p         Package
	ops       map[string]extension.Operation
	executors map[string]Executor

	wmu sync.Mutex
	out io.Writer

	mu          sync.Mutex
	initialized bool
	shutting    bool
	inflight    map[string]context.CancelFunc
	wg          sync.WaitGroup
}

func (s *server) cancelAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.inflight {
		c()
	}
}

// handle handles one line; it reports whether the server is done
// (shutdown answered).
func (s *server) handle(ctx context.Context, line []byte) bool {
	var m Message
	if err := json.Unmarshal(line, &m); err != nil {
		s.send(Message{JSONRPC: "2.0", ID: json.RawMessage("null"), Error: &ErrorObject{Code: CodeParseError, Message: "parse error"}})
		return false
	}
	if m.Method == "" {
		// A response: the host sends none this version answers.
		return false
	}
	if len(m.ID) == 0 {
		if m.Method == MethodCancel {
			var c CancelParams
			if json.Unmarshal(m.Params, &c) == nil {
				s.mu.Lock()
				if cancel, ok := s.inflight[string(c.ID)]; ok {
					cancel()
				}
				s.mu.Unlock()
			}
		}
		return false
	}
	s.mu.Lock()
	initialized, shutting := s.initialized, s.shutting
	s.mu.Unlock()
	switch {
	case m.Method == MethodInitialize:
		s.initialize(m)
		return false
	case !initialized:
		s.fail(m.ID, CodeInvalidRequest, "initialize first", nil)
		return false
	case shutting:
		s.fail(m.ID, CodeNotServing, "the package is shutting down", nil)
		return false
	case m.Method == MethodShutdown:
		s.mu.Lock()
		s.shutting = true
		s.mu.Unlock()
		s.answer(m.ID, struct{}{})
		return true
	}
	cctx, cancel := context.WithCancel(ctx)
	key := string(m.ID)
	s.mu.Lock()
	s.inflight[key] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, key)
			s.mu.Unlock()
			cancel()
		}()
		result, err := s.dispatch(cctx, m)
		if err != nil {
			s.failWith(m.ID, cctx, err)
			return
		}
		s.answer(m.ID, result)
	}()
	return false
}

func (s *server) initialize(m Message) {
	var p InitializeParams
	if err := json.Unmarshal(m.Params, &p); err != nil {
		s.fail(m.ID, CodeInvalidParams, "initialize's params do not decode", nil)
		return
	}
	if !slices.Contains(p.ProtocolVersions, ProtocolVersion) {
		data, _ := json.Marshal(map[string][]string{"supported": {ProtocolVersion}})
		s.fail(m.ID, CodeUnsupportedVersion, "unsupported protocol version", data)
		return
	}
	s.mu.Lock()
	s.initialized = true
	s.mu.Unlock()
	s.answer(m.ID, InitializeResult{ProtocolVersion: ProtocolVersion, Package: Party{Name: s.p.Name(), Version: s.p.Version()}, Serves: Serves(s.p)})
}

// rpcError is an error answered with its own code.
type rpcError struct {
	code int
	msg  string
}

func (e *rpcError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &rpcError{code: CodeInvalidParams, msg: fmt.Sprintf(format, args...)}
}

var errNotFound = &rpcError{code: CodeMethodNotFound, msg: "method not found"}

func (s *server) dispatch(ctx context.Context, m Message) (any, error) {
	switch m.Method {
	case MethodCall, MethodTranslateEmit, MethodTranslateWait:
		var p CallParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, invalid("the params do not decode")
		}
		op, ok := s.ops[p.Operation]
		if !ok {
			return nil, invalid("no operation %s", p.Operation)
		}
		auth := AuthorityOf(p.Authority)
		input := p.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		switch {
		case m.Method == MethodCall && op.Handler != nil:
			out, err := op.Handler(ctx, auth, input)
			if err != nil {
				return nil, err
			}
			if len(out) == 0 {
				out = json.RawMessage(`{}`)
			}
			return CallResult{Output: out}, nil
		case m.Method == MethodTranslateEmit && op.Emit != nil:
			em, err := op.Emit(ctx, auth, input)
			if err != nil {
				return nil, err
			}
			return EmitResult{Type: em.Type, Data: em.Data, CorrelationKey: em.CorrelationKey}, nil
		case m.Method == MethodTranslateWait && op.Wait != nil:
			plan, err := op.Wait(ctx, auth, input)
			if err != nil {
				return nil, err
			}
			return WirePlan(plan), nil
		}
		return nil, invalid("operation %s is not served by %s", p.Operation, m.Method)
	case MethodGate:
		g, ok := s.p.(Gater)
		if !ok {
			return nil, errNotFound
		}
		var p CallParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, invalid("the params do not decode")
		}
		plan, err := g.Gate(ctx, extension.GateRequest{Authority: AuthorityOf(p.Authority), Operation: p.Operation, Input: p.Input})
		return verdict(plan, err)
	case MethodStartGate:
		g, ok := s.p.(StartGater)
		if !ok {
			return nil, errNotFound
		}
		var p StartGateParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, invalid("the params do not decode")
		}
		req := extension.StartRequest{Scope: p.Scope, Work: p.Work, Binding: p.Binding, Generation: p.Generation, Parent: p.Parent}
		for _, in := range p.Inputs {
			req.Inputs = append(req.Inputs, extension.StartInput{ID: in.ID, Type: in.Type, Source: in.Source, CorrelationKey: in.CorrelationKey, Data: in.Data})
		}
		plan, err := g.AllowStart(ctx, req)
		return verdict(plan, err)
	case MethodConfigCheck:
		c, ok := s.p.(Configurable)
		if !ok {
			return nil, errNotFound
		}
		var p ConfigCheckParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, invalid("the params do not decode")
		}
		res := ConfigCheckResult{Problems: []ConfigProblem{}}
		err := c.CheckConfig(p.Config)
		var ce *extension.ConfigError
		switch {
		case err == nil:
		case errors.As(err, &ce):
			for _, pr := range ce.Problems {
				res.Problems = append(res.Problems, ConfigProblem{Pointer: pr.Pointer, Code: pr.Code, Remedy: pr.Remedy})
			}
		default:
			res.Problems = append(res.Problems, ConfigProblem{Code: "invalid_value", Remedy: "the package refused its config"})
		}
		return res, nil
	case MethodExecutorRun, MethodExecutorRecov, MethodExecutorResume, MethodExecutorStop:
		var p ExecutorParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, invalid("the params do not decode")
		}
		x, ok := s.executors[p.Kind]
		if !ok {
			return nil, invalid("no executor %s", p.Kind)
		}
		switch m.Method {
		case MethodExecutorRun:
			return x.Run(ctx, p.Request)
		case MethodExecutorRecov:
			return x.Recover(ctx, p.Request)
		case MethodExecutorResume:
			return x.Resume(ctx, p.Request)
		default:
			return struct{}{}, x.Stop(ctx, p.Request, time.Duration(p.GraceMS)*time.Millisecond)
		}
	}
	return nil, errNotFound
}

func verdict(plan *extension.WaitPlan, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if plan == nil {
		return GateResult{Verdict: VerdictAllow}, nil
	}
	wp := WirePlan(*plan)
	return GateResult{Verdict: VerdictPark, Plan: &wp}, nil
}

func (s *server) send(m Message) {
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(Message{JSONRPC: "2.0", ID: m.ID, Error: &ErrorObject{Code: CodeInternalError, Message: "the answer does not encode"}})
	}
	b = append(b, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, _ = s.out.Write(b)
}

func (s *server) answer(id json.RawMessage, result any) {
	b, err := json.Marshal(result)
	if err != nil {
		s.fail(id, CodeInternalError, "the answer does not encode", nil)
		return
	}
	s.send(Message{JSONRPC: "2.0", ID: id, Result: b})
}

func (s *server) fail(id json.RawMessage, code int, msg string, data json.RawMessage) {
	s.send(Message{JSONRPC: "2.0", ID: id, Error: &ErrorObject{Code: code, Message: msg, Data: data}})
}

// failWith answers err: an operation error with its verdict, the
// protocol's own codes, and any other error as an internal error without
// its text.
func (s *server) failWith(id json.RawMessage, ctx context.Context, err error) {
	var oe *extension.OperationError
	var re *rpcError
	switch {
	case errors.As(err, &oe):
		data, _ := json.Marshal(OperationErrorData{Code: oe.Code, Message: oe.Message})
		s.fail(id, CodeOperationError, "operation error", data)
	case errors.As(err, &re):
		s.fail(id, re.code, re.msg, nil)
	case errors.Is(err, ErrSegmentGone):
		s.fail(id, CodeSegmentGone, "segment gone", nil)
	case ctx.Err() != nil:
		s.fail(id, CodeCancelled, "cancelled", nil)
	default:
		s.fail(id, CodeInternalError, "internal error", nil)
	}
}
