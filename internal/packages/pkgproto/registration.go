package pkgproto

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/pkg"
	"github.com/open-conduit/open-conduit/internal/executor"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// accepted reports whether the operator accepted permission perm at
// install.
func (i *Instance) accepted(perm string) bool {
	return slices.Contains(i.pkg.Accepted, perm) && slices.Contains(i.pkg.Manifest.Permissions, perm)
}

// required lists the methods the manifest needs that serves lacks.
func (i *Instance) required(serves map[string]bool) []string {
	var need []string
	add := func(m string) {
		if !serves[m] && !slices.Contains(need, m) {
			need = append(need, m)
		}
	}
	p := i.pkg.Manifest.Provides
	for _, op := range p.Operations {
		switch op.Kind {
		case packages.OperationEmit:
			add(pkg.MethodTranslateEmit)
		case packages.OperationWait:
			add(pkg.MethodTranslateWait)
		default:
			add(pkg.MethodCall)
		}
	}
	if p.OperationGate {
		add(pkg.MethodGate)
	}
	if p.StartGate {
		add(pkg.MethodStartGate)
	}
	for _, x := range p.Executors {
		add(pkg.MethodExecutorRun)
		add(pkg.MethodExecutorStop)
		if x.Resume {
			add(pkg.MethodExecutorResume)
		}
	}
	return need
}

// build makes the registration and the executors from the manifest, the
// accepted permissions and what the process serves.
func (i *Instance) build(serves map[string]bool) error {
	m := i.pkg.Manifest
	reg := extension.Registration{Name: m.Name, OptIn: true}
	for _, mo := range m.Provides.Operations {
		op := extension.Operation{Name: mo.Name, Summary: mo.Summary, InputSchema: mo.InputSchema, Guidance: mo.Guidance,
			Capabilities: slices.Clone(mo.Capabilities), Sensitive: mo.Sensitive}
		name := mo.Name
		switch mo.Kind {
		case packages.OperationEmit:
			if !i.accepted(packages.PermissionEmit) {
				i.log.Warn("package operation not registered: its emission needs a permission the operator did not accept", "operation", name, "permission", packages.PermissionEmit)
				continue
			}
			op.Emit = func(ctx context.Context, auth extension.Authority, input json.RawMessage) (extension.Emission, error) {
				return i.translateEmit(ctx, name, auth, input)
			}
		case packages.OperationWait:
			op.Wait = func(ctx context.Context, auth extension.Authority, input json.RawMessage) (extension.WaitPlan, error) {
				return i.translateWait(ctx, name, auth, input)
			}
		default:
			op.Handler = func(ctx context.Context, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
				return i.callOperation(ctx, name, auth, input)
			}
		}
		reg.Operations = append(reg.Operations, op)
	}
	for _, ts := range m.Provides.Toolsets {
		t := extension.Toolset{Name: ts.Name}
		for _, o := range ts.Operations {
			t.Operations = append(t.Operations, extension.ToolsetOperation{Name: o.Name, Since: o.Since})
		}
		reg.Toolsets = append(reg.Toolsets, t)
	}
	for _, pb := range m.Provides.Playbooks {
		md, err := os.ReadFile(filepath.Join(i.pkg.Dir, filepath.FromSlash(pb.File)))
		if err != nil {
			return &StartError{Package: i.name, Reason: "its playbook " + pb.Name + " cannot be read", Err: err}
		}
		reg.Playbooks = append(reg.Playbooks, extension.Playbook{Name: pb.Name, Markdown: string(md)})
	}
	if m.Provides.OperationGate {
		if i.accepted(packages.PermissionOperationGate) {
			reg.Gate = extension.GateFunc(i.gate)
		} else {
			i.log.Warn("package gate not installed: the operator did not accept its permission", "permission", packages.PermissionOperationGate)
		}
	}
	if m.Provides.StartGate {
		if i.accepted(packages.PermissionStartGate) {
			reg.StartGate = extension.StartGateFunc(i.allowStart)
		} else {
			i.log.Warn("package start gate not installed: the operator did not accept its permission", "permission", packages.PermissionStartGate)
		}
	}
	if serves[pkg.MethodConfigCheck] {
		reg.CheckConfig = i.checkConfig
	}
	i.reg = reg
	if len(m.Provides.Executors) > 0 && !i.accepted(packages.PermissionExecutor) {
		i.log.Warn("package executors not registered: the operator did not accept their permission", "permission", packages.PermissionExecutor)
		return nil
	}
	for _, x := range m.Provides.Executors {
		i.executors = append(i.executors, &pkgExecutor{i: i, m: x})
	}
	return nil
}

// call sends a request to the running process.
func (i *Instance) call(ctx context.Context, method string, params any, timeout time.Duration) (json.RawMessage, error) {
	p := i.current()
	if p == nil {
		return nil, &UnavailableError{Package: i.name, Method: method, Reason: "its process is restarting or stopped"}
	}
	return p.call(ctx, method, params, timeout)
}

// failed logs a call's failure without a verdict, by kind.
func (i *Instance) failed(method, operation string, err error) {
	var oe *extension.OperationError
	if err == nil || errors.As(err, &oe) {
		return
	}
	attrs := []any{"method", method, "operation", operation, "error", err.Error()}
	i.log.Warn("package call failed without a verdict", attrs...)
}

func (i *Instance) callParams(op string, auth extension.Authority, input json.RawMessage) pkg.CallParams {
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	return pkg.CallParams{Operation: op, Input: input, Authority: pkg.WireAuthority(auth)}
}

func (i *Instance) callOperation(ctx context.Context, op string, auth extension.Authority, input json.RawMessage) (json.RawMessage, error) {
	raw, err := i.call(ctx, pkg.MethodCall, i.callParams(op, auth, input), i.rt.opts.CallTimeout)
	if err != nil {
		i.failed(pkg.MethodCall, op, err)
		return nil, err
	}
	var res pkg.CallResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &ProtocolError{Package: i.name, Method: pkg.MethodCall, What: "a result that does not decode"}
	}
	if len(res.Output) == 0 || string(res.Output) == "null" {
		return json.RawMessage(`{}`), nil
	}
	return res.Output, nil
}

func (i *Instance) translateEmit(ctx context.Context, op string, auth extension.Authority, input json.RawMessage) (extension.Emission, error) {
	raw, err := i.call(ctx, pkg.MethodTranslateEmit, i.callParams(op, auth, input), i.rt.opts.CallTimeout)
	if err != nil {
		i.failed(pkg.MethodTranslateEmit, op, err)
		return extension.Emission{}, err
	}
	var res pkg.EmitResult
	if err := json.Unmarshal(raw, &res); err != nil || res.Type == "" {
		return extension.Emission{}, &ProtocolError{Package: i.name, Method: pkg.MethodTranslateEmit, What: "a result without an Event type"}
	}
	return extension.Emission{Type: res.Type, Data: res.Data, CorrelationKey: res.CorrelationKey}, nil
}

func (i *Instance) translateWait(ctx context.Context, op string, auth extension.Authority, input json.RawMessage) (extension.WaitPlan, error) {
	raw, err := i.call(ctx, pkg.MethodTranslateWait, i.callParams(op, auth, input), i.rt.opts.CallTimeout)
	if err != nil {
		i.failed(pkg.MethodTranslateWait, op, err)
		return extension.WaitPlan{}, err
	}
	var res pkg.WaitPlan
	if err := json.Unmarshal(raw, &res); err != nil {
		return extension.WaitPlan{}, &ProtocolError{Package: i.name, Method: pkg.MethodTranslateWait, What: "a result that does not decode"}
	}
	return pkg.PlanOf(res), nil
}

// gate asks the package's gate. Anything but allow, park with a plan or an
// operation error is an error that is not an *extension.OperationError,
// which the toolbelt turns into gate_failed: the host fails closed.
func (i *Instance) gate(ctx context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
	raw, err := i.call(ctx, pkg.MethodGate, i.callParams(req.Operation, req.Authority, req.Input), i.rt.opts.GateTimeout)
	if err != nil {
		i.failed(pkg.MethodGate, req.Operation, err)
		return nil, err
	}
	plan, err := i.verdict(pkg.MethodGate, raw)
	i.failed(pkg.MethodGate, req.Operation, err)
	return plan, err
}

func (i *Instance) allowStart(ctx context.Context, req extension.StartRequest) (*extension.WaitPlan, error) {
	params := pkg.StartGateParams{Scope: req.Scope, Work: req.Work, Binding: req.Binding, Generation: req.Generation, Parent: req.Parent, Inputs: []pkg.StartInput{}}
	for _, in := range req.Inputs {
		params.Inputs = append(params.Inputs, pkg.StartInput{ID: in.ID, Type: in.Type, Source: in.Source, CorrelationKey: in.CorrelationKey, Data: in.Data})
	}
	raw, err := i.call(ctx, pkg.MethodStartGate, params, i.rt.opts.GateTimeout)
	if err != nil {
		i.failed(pkg.MethodStartGate, "", err)
		return nil, err
	}
	plan, err := i.verdict(pkg.MethodStartGate, raw)
	i.failed(pkg.MethodStartGate, "", err)
	return plan, err
}

func (i *Instance) verdict(method string, raw json.RawMessage) (*extension.WaitPlan, error) {
	var res pkg.GateResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, &ProtocolError{Package: i.name, Method: method, What: "a result that does not decode"}
	}
	switch res.Verdict {
	case pkg.VerdictAllow:
		return nil, nil
	case pkg.VerdictPark:
		if res.Plan == nil {
			return nil, &ProtocolError{Package: i.name, Method: method, What: "a park without a plan"}
		}
		plan := pkg.PlanOf(*res.Plan)
		return &plan, nil
	}
	return nil, &ProtocolError{Package: i.name, Method: method, What: "an unknown verdict"}
}

// checkConfig asks the package to check its config. A failure without an
// answer is one problem at the config itself.
func (i *Instance) checkConfig(config json.RawMessage) error {
	if len(config) == 0 {
		config = json.RawMessage(`{}`)
	}
	raw, err := i.call(context.Background(), pkg.MethodConfigCheck, pkg.ConfigCheckParams{Config: config}, i.rt.opts.CallTimeout)
	if err != nil {
		i.failed(pkg.MethodConfigCheck, "", err)
		return err
	}
	var res pkg.ConfigCheckResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return &ProtocolError{Package: i.name, Method: pkg.MethodConfigCheck, What: "a result that does not decode"}
	}
	if len(res.Problems) == 0 {
		return nil
	}
	ce := &extension.ConfigError{}
	for _, p := range res.Problems {
		ce.Problems = append(ce.Problems, extension.ConfigProblem{Pointer: p.Pointer, Code: p.Code, Remedy: p.Remedy})
	}
	return ce
}

// pkgExecutor is one of a package's executors, proxied to its process.
type pkgExecutor struct {
	i *Instance
	m packages.Executor
}

var (
	_ executor.Executor       = (*pkgExecutor)(nil)
	_ extension.PlaybookNamer = (*pkgExecutor)(nil)
)

func (x *pkgExecutor) Info() executor.Info {
	info := executor.Info{Name: x.i.name + "." + x.m.Kind, Transport: executor.TransportNone, Dirless: x.m.Dir != nil && !*x.m.Dir}
	if x.m.Toolbelt {
		info.Transport = executor.TransportOS
		info.Capabilities = append(info.Capabilities, executor.CapToolbelt)
	}
	if x.m.Resume {
		info.Capabilities = append(info.Capabilities, executor.CapResume)
	}
	return info
}

// PlaybookName is the manifest's playbook of the executor, whatever the
// binding's config.
func (x *pkgExecutor) PlaybookName(json.RawMessage) string { return x.m.Playbook }

func (x *pkgExecutor) Run(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	return x.segment(ctx, pkg.MethodExecutorRun, req)
}

func (x *pkgExecutor) Recover(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	return x.segment(ctx, pkg.MethodExecutorRecov, req)
}

func (x *pkgExecutor) Resume(ctx context.Context, req executor.RunRequest) (executor.Result, error) {
	if !x.m.Resume {
		return executor.Result{}, errors.New("pkgproto: executor " + x.Info().Name + " cannot resume")
	}
	return x.segment(ctx, pkg.MethodExecutorResume, req)
}

func (x *pkgExecutor) Stop(ctx context.Context, req executor.RunRequest, grace time.Duration) error {
	_, err := x.i.call(ctx, pkg.MethodExecutorStop, pkg.ExecutorParams{Kind: x.m.Kind, Request: wireRequest(req), GraceMS: grace.Milliseconds()}, grace+x.i.rt.opts.CallTimeout)
	x.i.failed(pkg.MethodExecutorStop, "", err)
	return err
}

func (x *pkgExecutor) segment(ctx context.Context, method string, req executor.RunRequest) (executor.Result, error) {
	raw, err := x.i.call(ctx, method, pkg.ExecutorParams{Kind: x.m.Kind, Request: wireRequest(req)}, 0)
	if err != nil {
		if ctx.Err() != nil {
			return executor.Result{}, executor.ErrDetached
		}
		var re *RemoteError
		if method == pkg.MethodExecutorRecov && errors.As(err, &re) && re.Code == pkg.CodeSegmentGone {
			return executor.Result{}, executor.ErrGone
		}
		x.i.failed(method, "", err)
		return executor.Result{}, err
	}
	var res pkg.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return executor.Result{}, &ProtocolError{Package: x.i.name, Method: method, What: "a result that does not decode"}
	}
	out := executor.Result{Outcome: executor.Outcome(res.Outcome), ExitCode: res.ExitCode, Message: res.Message, Session: res.Session}
	switch out.Outcome {
	case executor.Succeeded, executor.Failed, executor.Cancelled:
	case executor.Suspended:
		if !x.m.Resume {
			return executor.Result{}, &ProtocolError{Package: x.i.name, Method: method, What: "a suspended outcome from an executor that cannot resume"}
		}
	default:
		return executor.Result{}, &ProtocolError{Package: x.i.name, Method: method, What: "an unknown outcome"}
	}
	for _, a := range res.Artifacts {
		out.Artifacts = append(out.Artifacts, executor.Artifact{Name: a.Name, MediaType: a.MediaType, Path: a.Path})
	}
	if u := res.Usage; u != nil {
		out.Usage = &executor.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
			CacheCreationTokens: u.CacheCreationTokens, CostUSD: u.CostUSD, Turns: u.Turns}
	}
	return out, nil
}

// wireRequest is the run request as the protocol carries it: the token
// never, its file's path only.
func wireRequest(req executor.RunRequest) pkg.RunRequest {
	cfg := req.Config
	if len(cfg) == 0 {
		cfg = json.RawMessage(`{}`)
	}
	env := req.Env
	if env == nil {
		env = map[string]string{}
	}
	out := pkg.RunRequest{ExecutionID: req.ExecutionID, WorkID: req.WorkID, ScopeID: req.ScopeID, BindingID: req.BindingID, Epoch: req.Epoch,
		Config: cfg, Env: env, Dir: req.Dir, Deadline: req.Deadline, Session: req.Session, Events: []pkg.Event{},
		Context: pkg.ExecutionContext{ToolbeltEndpoint: req.Context.ToolbeltEndpoint, ToolbeltTokenFile: req.Context.ToolbeltTokenFile,
			ToolbeltDir: req.Context.ToolbeltDir, PlaybookDir: req.Context.PlaybookDir}}
	for _, e := range req.Events {
		data := e.Data
		if len(data) == 0 {
			data = json.RawMessage(`null`)
		}
		out.Events = append(out.Events, pkg.Event{ID: e.ID, Seq: e.Seq, Type: e.Type, Source: e.Source, Scope: e.Scope,
			CorrelationKey: e.CorrelationKey, Data: data, AcceptedAt: e.AcceptedAt})
	}
	return out
}
