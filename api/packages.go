package api

import "time"

// Package is an installed package (GET /v1/packages, GET
// /v1/packages/{name}), or, in a PackageInspection, one about to be.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Kind is "protocol" or "mcp".
	Kind    string `json:"kind"`
	Summary string `json:"summary,omitempty"`
	// FilesHash is "sha256:<hex>" over the package's files (their paths,
	// modes and contents): what the installed copy is verified against.
	FilesHash string `json:"files_hash"`
	// InstalledAt is when it was installed (absent in an inspection).
	InstalledAt *time.Time `json:"installed_at,omitempty"`
	// Permissions are, for an installed package, those the operator
	// accepted; in an inspection, those it asks for.
	Permissions []string        `json:"permissions"`
	Provides    PackageProvides `json:"provides"`
	// State is running, starting, restarting or stopped, as its runtime
	// reports it, or changed (its files differ from FilesHash) or
	// unavailable (it could not be started: see Problem). Absent in an
	// inspection.
	State string `json:"state,omitempty"`
	// Restarts counts its process's restarts since the daemon started it.
	Restarts int `json:"restarts"`
	// CrashLoop: its process crashed repeatedly in a short time; the
	// daemon keeps restarting it with a growing backoff.
	CrashLoop bool `json:"crash_loop"`
	// Problem says why it is not running, when it is not.
	Problem *PackageProblem `json:"problem,omitempty"`
}

// PackageProblem is why a package does not run: a stable code
// (package_changed, package_unavailable, package_crash_loop) and a short
// safe sentence saying what to do, never the package's output.
type PackageProblem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PackageProvides is what a package adds.
type PackageProvides struct {
	Operations    []PackageOperation `json:"operations"`
	Toolsets      []PackageToolset   `json:"toolsets"`
	OperationGate bool               `json:"operation_gate"`
	StartGate     bool               `json:"start_gate"`
	Executors     []PackageExecutor  `json:"executors"`
	Playbooks     []string           `json:"playbooks"`
}

// PackageOperation is one operation a package provides.
type PackageOperation struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
	// Kind is call, emit or wait.
	Kind string `json:"kind"`
}

// PackageToolset is one toolset a package publishes and what it grants.
type PackageToolset struct {
	Name       string   `json:"name"`
	Operations []string `json:"operations"`
}

// PackageExecutor is one executor a package provides: bindings name it
// as executor Name (<package>.<kind>).
type PackageExecutor struct {
	Name     string `json:"name"`
	Summary  string `json:"summary,omitempty"`
	Playbook string `json:"playbook,omitempty"`
}

// InspectPackageRequest is the body of POST /v1/packages/inspect and the
// start of an install: Dir is the package's directory on the daemon's
// machine, an absolute path.
type InspectPackageRequest struct {
	Dir string `json:"dir"`
}

// PackageInspection is what a package directory holds, checked, before
// it is installed: what it provides and the permissions it asks for.
type PackageInspection struct {
	Package Package `json:"package"`
	// Replaces is the version of the installed package of the same name
	// that installing it replaces ("" for none).
	Replaces string    `json:"replaces,omitempty"`
	Warnings []Warning `json:"warnings"`
}

// InstallPackageRequest is the body of POST /v1/packages. FilesHash is
// the inspection's (the files the operator was shown; a directory whose
// files changed since is refused with conflict), and AcceptPermissions
// must hold every permission the package asks for.
type InstallPackageRequest struct {
	Dir               string   `json:"dir"`
	FilesHash         string   `json:"files_hash"`
	AcceptPermissions []string `json:"accept_permissions"`
}

// InstalledPackage is the answer of an install.
type InstalledPackage struct {
	Package Package `json:"package"`
	// Replaced is the version it replaced ("" for none).
	Replaced string    `json:"replaced,omitempty"`
	Warnings []Warning `json:"warnings"`
}

// RemovedPackage is the answer of POST /v1/packages/{name}/remove.
type RemovedPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}
