package packages

import (
	"context"
	"encoding/json"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/executor"
)

// ManifestFile is the name of a package's manifest in its directory.
const ManifestFile = "open-conduit-package.json"

// Kinds of package.
const (
	// KindProtocol is a package that speaks the extension protocol
	// (docs/extension-protocol.md) on its stdin and stdout. The default.
	KindProtocol = "protocol"
	// KindMCP is a package that wraps an existing MCP server (stdio): its
	// tools become <name>.<tool> operations.
	KindMCP = "mcp"
)

// Permissions a manifest may ask for. The operator accepts them at install;
// a package is given none it did not ask for and the operator did not accept.
const (
	// PermissionOperationGate lets the package's gate be asked about
	// other registrations' calls (provides.operation_gate).
	PermissionOperationGate = "operation.gate"
	// PermissionStartGate lets the package's start gate be asked before a
	// Work's first attempt (provides.start_gate).
	PermissionStartGate = "work.start_gate"
	// PermissionEmit lets the package's operations emit Events
	// (an operation of kind emit).
	PermissionEmit = "event.emit"
	// PermissionExecutor lets the package run executions
	// (provides.executors).
	PermissionExecutor = "executor.run"
)

// Manifest is a package's open-conduit-package.json, strictly decoded.
type Manifest struct {
	// Name is the registration name (extension.RegistrationName): the
	// package owns the namespace <name>.*.
	Name    string `json:"name"`
	Version string `json:"version"`
	// Kind is KindProtocol ("" means it) or KindMCP.
	Kind    string `json:"kind,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Run says how the host starts the package's process.
	Run Run `json:"run"`
	// Provides is what the package adds. A KindMCP package declares
	// nothing here: its tools are listed from the server at start.
	Provides Provides `json:"provides,omitzero"`
	// Permissions are what the package asks the operator for.
	Permissions []string `json:"permissions,omitempty"`
}

// Run is how the host starts a package's process.
type Run struct {
	// Command is the argument vector; a first element with a slash is a
	// path relative to the package directory, otherwise it is looked up on
	// the daemon's PATH.
	Command []string `json:"command"`
	// Env are extra environment variables, literal values only (never a
	// secret: a package gets secrets through its extensions.<name>.config
	// and the protocol, never its manifest).
	Env map[string]string `json:"env,omitempty"`
}

// Provides is what a protocol package adds to the toolbelt and the host.
type Provides struct {
	Operations []Operation `json:"operations,omitempty"`
	Toolsets   []Toolset   `json:"toolsets,omitempty"`
	// OperationGate: the package serves operation.gate and is asked about
	// other registrations' calls in the scopes it is configured for.
	// Needs PermissionOperationGate.
	OperationGate bool `json:"operation_gate,omitempty"`
	// StartGate: the package serves work.start_gate. Needs
	// PermissionStartGate.
	StartGate bool       `json:"start_gate,omitempty"`
	Executors []Executor `json:"executors,omitempty"`
	Playbooks []Playbook `json:"playbooks,omitempty"`
}

// Operation kinds: how the host serves a package's operation.
const (
	OperationCall = "call" // the package's handler runs it (the default)
	OperationEmit = "emit" // the package translates it into an Event
	OperationWait = "wait" // the package translates it into a wait
)

// Operation is one operation a package provides.
type Operation struct {
	// Name is <package>.<suffix>.
	Name         string          `json:"name"`
	Summary      string          `json:"summary"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	Guidance     string          `json:"guidance,omitempty"`
	Capabilities []string        `json:"capabilities,omitempty"`
	Sensitive    bool            `json:"sensitive,omitempty"`
	// Kind is OperationCall ("" means it), OperationEmit or OperationWait.
	Kind string `json:"kind,omitempty"`
}

// Toolset is a named set of the package's operations (and builtins).
type Toolset struct {
	// Name is <package>.<role>.
	Name       string             `json:"name"`
	Operations []ToolsetOperation `json:"operations"`
}

// ToolsetOperation is one member of a toolset and the version it joined in.
type ToolsetOperation struct {
	Name  string `json:"name"`
	Since string `json:"since"`
}

// Executor is an executor a package provides: bindings name it as
// executor <package>.<kind>.
type Executor struct {
	// Kind is the executor's name within the package; bindings use
	// <package>.<kind>.
	Kind    string `json:"kind"`
	Summary string `json:"summary,omitempty"`
	// Toolbelt: its executions get a token and a toolbelt socket.
	Toolbelt bool `json:"toolbelt,omitempty"`
	// Resume: it can park on a wait and be resumed.
	Resume bool `json:"resume,omitempty"`
	// Dir, when false, says its executions keep nothing on disk: the
	// host creates no directory for them and sends dir "". Absent or
	// true, each execution gets its directory.
	Dir *bool `json:"dir,omitempty"`
	// Playbook names the playbook (one of provides.playbooks, or another
	// registration's) its turns start on, "" for none.
	Playbook string `json:"playbook,omitempty"`
}

// Playbook is a skill the package ships, as a Markdown file in its
// directory.
type Playbook struct {
	Name string `json:"name"`
	// File is the path of its Markdown, relative to the package
	// directory.
	File string `json:"file"`
}

// Installed is a package as the state directory holds it, its files
// verified against the digest they were installed with.
type Installed struct {
	Manifest Manifest
	// Dir is the directory holding the package's files.
	Dir string
	// Digest is "sha256:<hex>" over the package's files.
	Digest string
	// Accepted are the permissions the operator accepted at install.
	Accepted []string
	// Verify, when set, checks the package's files against Digest again.
	// A Runtime calls it before each start of the package's process
	// (restarts too) and starts none it refuses (a *ChangedError).
	Verify func() error
}

// Runtime turns an installed package into a running one. There is one
// Runtime per Kind.
type Runtime interface {
	Start(ctx context.Context, pkg Installed) (Instance, error)
}

// Instance is a running package: what the host registers for it, and its
// process's lifetime.
type Instance interface {
	// Registration is what the host registers (Name is the manifest's;
	// OptIn is always set: a package is active only where
	// extensions.<name> enables it).
	Registration() extension.Registration
	// Executors are the executors it provides, each named
	// <package>.<kind>.
	Executors() []executor.Executor
	// Health says whether its process runs, and whether it is in a crash
	// loop.
	Health() Health
	// Stop stops its process (politely, then by force) and waits for it.
	Stop(ctx context.Context) error
}

// Health is what doctor and the package list show of a running package.
type Health struct {
	// State is "running", "starting", "restarting" (waiting out a backoff
	// after a crash) or "stopped".
	State string
	// Restarts counts the restarts since the host started it.
	Restarts int
	// CrashLoop: it crashed repeatedly within a short time; the host keeps
	// restarting it with a growing backoff.
	CrashLoop bool
	// LastError is a short safe sentence about its last failure ("" for
	// none): never its output.
	LastError string
}
