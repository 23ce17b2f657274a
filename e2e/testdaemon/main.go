// Command testdaemon is the real Open Conduit daemon (internal/daemon) with
// one extra extension, e2ecred, whose operation e2ecred.credential serves
// git.credential and whose operator action e2ecred.whoami answers with who
// asked. The end-to-end suite builds it beside the real binaries so that
// real git, configured with `os git-credential` as its credential helper,
// has an operation to get a credential from, and an operator has an action
// to run with `open-conduit act`. The extension also publishes a toolset,
// e2ecred.agent (emit and read_context since 1.0.0, e2ecred.credential
// since 1.1.0), and the daemon's registry knows one playbook,
// e2e-release (emit, read_context and e2ecred.credential), so that the
// grant warnings and config_drift have something to be about. Everything else
// (storage, scheduler, shell executor, sockets, the os binary the shell
// job calls) is the production code, unchanged.
//
// With E2E_KEYRING set it answers keyring: secret references itself (the
// value of E2E_KEYRING followed by "-" and the user), and with
// E2E_KEYRING_STALL set to a path it stops there: the first lookup creates
// that file and never answers, so the kill drill can kill the daemon
// between a claim and its launch (a secret is resolved after the claim,
// before the executor starts anything).
//
// With E2E_PACKAGE_ECHO set, installed protocol packages run on a
// test-only runtime in Go (see packages.go).
//
// A second extension, e2egate, is only a gate: it lets every call
// through, except that with E2E_GATE_PANIC naming an operation it panics
// when asked about a call to that operation, so the suite can show that a
// gate that panics fails closed.
//
// It exists only for tests: it must never be shipped, built into a release
// or registered by the production daemon. The password it hands out comes
// from its own environment (E2E_GIT_PASSWORD) and is never logged.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/daemon"
	"github.com/open-conduit/open-conduit/internal/packages"
)

// PasswordEnv names the variable holding the password e2ecred.credential
// answers with (followed by "-" and the calling Work's id).
const PasswordEnv = "E2E_GIT_PASSWORD"

func main() {
	state := flag.String("state", "", "the state directory")
	exe := flag.String("executable", "", "the open-conduit binary (supervisor and os)")
	logFormat := flag.String("log-format", daemon.LogJSON, "text or json")
	flag.Parse()
	if *state == "" || *exe == "" {
		fmt.Fprintln(os.Stderr, "testdaemon: --state and --executable are required")
		os.Exit(2)
	}
	reg := bootstrap.ReleaseRegistry()
	if err := reg.AddPlaybook(PlaybookName, PlaybookOperations); err != nil {
		fmt.Fprintln(os.Stderr, "testdaemon:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	opts := daemon.Options{
		StateDir: *state, LogFormat: *logFormat, Stderr: os.Stderr, Executable: *exe, Registry: reg,
		Extensions: []extension.Registration{credentialExtension(os.Getenv(PasswordEnv)), panicGateExtension(os.Getenv(PanicGateEnv))},
	}
	if os.Getenv(PackageEchoEnv) != "" {
		opts.PackageRuntimes = map[string]packages.Runtime{packages.KindProtocol: &echoRuntime{events: os.Getenv(PackageEventsEnv), crashLoop: os.Getenv(PackageCrashLoopEnv)}}
	}
	if v := os.Getenv("E2E_KEYRING"); v != "" {
		opts.Keyring = testKeyring{value: v, stall: os.Getenv("E2E_KEYRING_STALL")}
	}
	err := daemon.Run(ctx, opts)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testdaemon:", err)
		os.Exit(1)
	}
}

// The playbook the test daemon's registry knows, and the operations it
// declares.
const PlaybookName = "e2e-release"

var PlaybookOperations = []string{"emit", "read_context", "e2ecred.credential"}

// agentToolset is the toolset e2ecred publishes: two builtins from the
// start and its own operation from a later version.
var agentToolset = extension.Toolset{Name: "e2ecred.agent", Operations: []extension.ToolsetOperation{
	{Name: "emit", Since: "1.0.0"}, {Name: "read_context", Since: "1.0.0"}, {Name: "e2ecred.credential", Since: "1.1.0"},
}}

// credentialInput is what os git-credential sends (docs/toolbelt.md).
type credentialInput struct {
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Path     string `json:"path,omitempty"`
	Username string `json:"username,omitempty"`
}

// credentialExtension serves git.credential: for an http(s) request it
// answers x-access-token and the password, bound to the calling Work, so
// the test can tell that the host handed the handler the caller's
// authority.
func credentialExtension(password string) extension.Registration {
	return extension.Registration{Name: "e2ecred", Actions: []extension.Action{whoamiAction}, Toolsets: []extension.Toolset{agentToolset}, Operations: []extension.Operation{{
		Name:         "e2ecred.credential",
		Summary:      "Give git a credential for the test server.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"protocol":{"type":"string"},"host":{"type":"string"},"path":{"type":"string"},"username":{"type":"string"}},"required":["protocol","host"]}`),
		Guidance:     "Git asks for this through os git-credential; there is no need to call it directly.",
		Capabilities: []string{"git.credential"},
		Handler: func(_ context.Context, auth extension.Authority, raw json.RawMessage) (json.RawMessage, error) {
			var in credentialInput
			if err := json.Unmarshal(raw, &in); err != nil {
				return nil, &extension.OperationError{Code: "invalid_input", Message: "the input is not a credential request"}
			}
			if in.Protocol != "http" && in.Protocol != "https" {
				return nil, &extension.OperationError{Code: "unsupported_protocol", Message: "only http and https credentials are served"}
			}
			if password == "" {
				return nil, &extension.OperationError{Code: "no_password", Message: "the test daemon was started without " + PasswordEnv}
			}
			return json.Marshal(map[string]string{"username": "x-access-token", "password": password + "-" + auth.Work})
		},
	}}}
}

// whoamiAction answers with what the host handed it (the caller, scope,
// Work, request id, core.action Event and input), so the suite can tell
// that an operator's action runs as that operator. An input with
// "refuse": true is refused with the action's own code.
var whoamiAction = extension.Action{
	Name:        "e2ecred.whoami",
	Summary:     "Answer with who asked, where and with what.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"refuse":{"type":"boolean"}}}`),
	Handler: func(_ context.Context, req extension.ActionRequest) (json.RawMessage, error) {
		var in struct {
			Refuse bool `json:"refuse"`
		}
		if err := json.Unmarshal(req.Input, &in); err != nil || in.Refuse {
			return nil, &extension.OperationError{Code: "whoami_refused", Message: "the input asked for a refusal; leave refuse out"}
		}
		return json.Marshal(map[string]any{
			"caller": req.Caller, "scope": req.Scope, "work": req.Work, "request_id": req.RequestID, "event": req.Event, "input": req.Input,
		})
	},
}

// testKeyring answers every keyring lookup with its value and the user, or,
// with stall set, creates the stall file and blocks for ever.
type testKeyring struct{ value, stall string }

func (k testKeyring) Get(_, user string) (string, error) {
	if k.stall != "" {
		if f, err := os.Create(k.stall); err == nil {
			f.Close()
		}
		select {}
	}
	return k.value + "-" + user, nil
}

// PanicGateEnv names the variable naming the operation e2egate's gate
// panics on.
const PanicGateEnv = "E2E_GATE_PANIC"

// panicGateExtension is a registration with only a gate, which panics
// when asked about a call to operation (none when it is empty) and lets
// every other call through.
func panicGateExtension(operation string) extension.Registration {
	return extension.Registration{Name: "e2egate", Gate: extension.GateFunc(func(_ context.Context, req extension.GateRequest) (*extension.WaitPlan, error) {
		if operation != "" && req.Operation == operation {
			panic("e2egate: asked to panic on " + operation)
		}
		return nil, nil
	})}
}
