// Package buildinfo says which build of Open Conduit is running: the module
// version and the commit it was built from, as the Go toolchain recorded
// them in the binary. It is read once, in one place, by the daemon (its
// health answer), the CLI (`open-conduit version`) and `os mcp` (its server
// name).
//
// It must never invent a version: a binary built without module or VCS
// information (go run, a test binary) says so instead.
package buildinfo

import (
	"runtime/debug"
	"sync"
)

// Info is what the binary knows of its own build.
type Info struct {
	// Version is the module version ("(devel)" for a build from a work
	// tree, such as go run or go build in a clone).
	Version string `json:"version"`
	// Commit is the VCS revision it was built from ("" when the build
	// recorded none), and Modified says the work tree had changes then.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Go is the toolchain that built it.
	Go string `json:"go"`
}

var (
	once sync.Once
	info Info
)

// Read returns the running binary's build information.
func Read() Info {
	once.Do(func() { info = from(debug.ReadBuildInfo()) })
	return info
}

// Version is Read().Version.
func Version() string { return Read().Version }

// from turns the toolchain's record into an Info.
func from(bi *debug.BuildInfo, ok bool) Info {
	out := Info{Version: "(devel)"}
	if !ok || bi == nil {
		return out
	}
	if bi.Main.Version != "" {
		out.Version = bi.Main.Version
	}
	out.Go = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}
