package deps

import (
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/open-conduit/open-conduit"

// rules says, for every package of the module, which packages of the
// module its non-test files may import. A package missing from the table
// fails the test, so a new package is given its layer when it is made.
// The layers, from the bottom up, are in docs/architecture.md:
//
//	primitives  api, extension, internal/clock, ids, unixsock, cliexit, …
//	records     internal/storage, internal/config, internal/executor, internal/runs
//	kernel      internal/kernel, internal/wire
//	toolbelt    internal/toolbelt
//	scheduler   internal/scheduler
//	servers     internal/httpapi, configsvc, toolbeltapi, management
//	extensions  extensions/… (first-party; public contracts only)
//	composition internal/bootstrap, internal/daemon
//	clients     client, osclient
//	programs    cmd/…, e2e/…
//
// Test helpers (…test, toolbeltint) sit beside what they test and may
// import anything below it; no production package imports one.
var rules = map[string][]string{
	// Primitives: written once, importing nothing of the module but
	// each other.
	"api":                 {},
	"extension":           {},
	"extension/inproc":    {"extension"},
	"internal/atomicfile": {},
	"internal/bearer":     {},
	"internal/clock":      {},
	"internal/cliexit":    {},
	"internal/deps":       {},
	"internal/metrics":    {},
	"internal/unixhttp":   {},
	"internal/unixsock":   {},
	"internal/logfollow":  {},
	"internal/reaper":     {},
	"internal/buildinfo":  {},
	"internal/ids":        {"internal/clock"},
	"internal/statedir":   {"internal/atomicfile", "internal/unixsock"},

	// Records: storage, configuration, the executor contract, run
	// directories. Config knows the executor contract, never an executor.
	"internal/executor":       {},
	"internal/executor/proc":  {"internal/atomicfile", "internal/reaper"},
	"internal/executor/shell": {"internal/clock", "internal/executor", "internal/executor/proc", "internal/executor/sandbox"},
	// sandbox builds bwrap's command line and is the sandbox's init.
	"internal/executor/sandbox": {"internal/executor"},

	// The agent executors: agent holds their shared, process-free parts.
	"internal/executor/agent": {"extension", "internal/executor", "internal/executor/sandbox"},
	// agentrun runs them under proc's supervision; claudecode and codex
	// are its drivers.
	"internal/executor/agentrun":   {"extension", "internal/clock", "internal/executor", "internal/executor/agent", "internal/executor/proc", "internal/executor/sandbox"},
	"internal/executor/claudecode": {"extension", "internal/atomicfile", "internal/executor", "internal/executor/agent", "internal/executor/agentrun"},
	"internal/executor/codex":      {"extension", "internal/atomicfile", "internal/executor", "internal/executor/agent", "internal/executor/agentrun"},

	"internal/runs": {"internal/atomicfile", "internal/unixsock"},
	// packages: installed packages, their manifest and runtime contract.
	"internal/packages":       {"extension", "internal/atomicfile", "internal/executor"},
	"internal/storage":        {"extension", "internal/atomicfile"},
	"internal/storage/sqlite": {"internal/clock", "internal/storage", "internal/storage/group"},
	// group: the group commit both stores share; it knows no engine.
	"internal/storage/group": {},
	"internal/config":        {"extension", "internal/executor"},

	// The shared store on PostgreSQL (pgx): the same layer as SQLite's.
	"internal/storage/postgres": {"internal/clock", "internal/storage", "internal/storage/group"},

	// mcppkg: the runtime of MCP packages, an MCP client of the server.
	"internal/packages/mcppkg": {"extension", "internal/buildinfo", "internal/clock", "internal/executor", "internal/packages"},
	// Installed packages: the Go SDK a package is written on (the public
	// contracts only), and the host's side of the extension protocol, the
	// runtime of protocol packages, which speaks the SDK's wire types.
	"extension/pkg":              {"extension"},
	"internal/packages/pkgproto": {"extension", "extension/pkg", "internal/clock", "internal/executor", "internal/packages"},

	// The kernel, the toolbelt above it, the scheduler above both. Wire
	// converts storage's records and the kernel's results into api's types
	// for every layer above it that answers in them.
	"internal/kernel":    {"extension", "internal/clock", "internal/ids", "internal/storage"},
	"internal/wire":      {"api", "internal/kernel", "internal/storage"},
	"internal/toolbelt":  {"api", "extension", "internal/bearer", "internal/clock", "internal/ids", "internal/kernel", "internal/storage", "internal/wire"},
	"internal/scheduler": {"extension", "internal/clock", "internal/executor", "internal/ids", "internal/kernel", "internal/storage", "internal/toolbelt"},

	// Servers: the shared HTTP discipline, the configuration lifecycle,
	// the execution socket, and the operator routes over all of them.
	"internal/httpapi":     {"api", "extension", "internal/kernel"},
	"internal/configsvc":   {"internal/atomicfile", "internal/clock", "internal/config", "internal/kernel", "internal/statedir", "internal/storage"},
	"internal/toolbeltapi": {"api", "extension", "internal/bearer", "internal/httpapi", "internal/runs"},
	// The egress proxy: a handler runs serves on each execution's
	// egress.sock, recording into storage; its Policy is the daemon's.
	"internal/egress": {"internal/clock", "internal/storage"},
	// The one webhook listener: every webhook ingress at its path, and
	// the plumbing around each ingress's own reading of a delivery.
	"internal/webhook": {"extension", "internal/unixsock"},
	"internal/management": {"api", "extension", "internal/bearer", "internal/clock", "internal/config", "internal/configsvc", "internal/httpapi",
		"internal/ids", "internal/kernel", "internal/logfollow", "internal/packages", "internal/statedir", "internal/storage", "internal/toolbelt", "internal/toolbeltapi", "internal/unixsock", "internal/wire"},

	// Composition: the release's registry, and the daemon.
	"internal/bootstrap": {"extension", "extensions/github", "extensions/human", "extensions/introspection", "extensions/slack", "internal/config", "internal/executor",
		"internal/executor/agent", "internal/executor/claudecode", "internal/executor/codex", "internal/executor/shell"},
	"internal/daemon": {"api", "internal/buildinfo", "extension", "extensions/github", "extensions/human", "extensions/introspection", "extensions/slack", "internal/atomicfile", "internal/bootstrap", "internal/clock", "internal/config",
		"internal/configsvc", "internal/daemon/humanport", "internal/daemon/introspectport", "internal/egress", "internal/executor", "internal/executor/agentrun", "internal/executor/claudecode", "internal/executor/codex", "internal/executor/sandbox", "internal/executor/shell", "internal/ids", "internal/kernel",
		"internal/management", "internal/metrics", "internal/packages", "internal/packages/mcppkg", "internal/packages/pkgproto", "internal/runs", "internal/scheduler", "internal/statedir", "internal/storage", "internal/storage/postgres", "internal/storage/sqlite",
		"internal/toolbelt", "internal/webhook"},
	// The daemon's adapter of storage to the introspection extension's
	// port: the extension itself never knows the store.
	"internal/daemon/introspectport": {"api", "extensions/introspection", "internal/storage", "internal/wire"},
	// The daemon's adapter of storage and the kernel to the human
	// extension's port.
	"internal/daemon/humanport": {"extension", "extensions/human", "internal/ids", "internal/kernel", "internal/storage"},

	// First-party extensions: the public contracts and wire types only,
	// reading through a port of their own that the daemon adapts.
	"extensions/introspection": {"api", "extension", "extension/inproc"},
	"extensions/human":         {"extension", "extension/inproc"},
	"extensions/github":        {"extension", "extension/inproc", "extensions/github/ghapi"},
	// The GitHub extension's REST side: credentials and operations, which
	// the extension registers.
	"extensions/github/ghapi": {"api", "extension"},
	// The Slack extension: its ingress and operations over the Slack
	// client library, reading the Work's thread through its port.
	"extensions/slack": {"api", "extension", "extension/inproc"},

	// Clients: public, over the wire types and the one transport only.
	"client":   {"api", "internal/unixhttp"},
	"osclient": {"api", "internal/unixhttp"},

	// The terminal UI: a client of the management socket like any other,
	// over the public client and its wire types only.
	"internal/tui": {"api", "client"},

	// Programs. The doctor's checks read the state directory as the
	// daemon lays it out and ask the daemon through client.
	"internal/doctor":  {"api", "client", "internal/config", "internal/configsvc", "internal/daemon", "internal/runs", "internal/statedir"},
	"cmd/open-conduit": {"cmd/open-conduit/cli", "cmd/os/oscli"},
	"cmd/os":           {"cmd/os/oscli"},
	"cmd/open-conduit/cli": {"internal/buildinfo", "client", "internal/bootstrap", "internal/cliexit", "internal/clock", "internal/config", "internal/daemon", "internal/doctor",
		"internal/executor/sandbox", "internal/executor/shell", "internal/management", "internal/reaper", "internal/statedir", "internal/tui"},
	"cmd/os/oscli":   {"internal/buildinfo", "extension", "internal/cliexit", "osclient"},
	"e2e":            {},
	"e2e/testdaemon": {"extension", "internal/bootstrap", "internal/daemon", "internal/executor", "internal/packages"},

	// Test helpers.
	"internal/storage/storagetest": {"internal/storage"},
	"internal/wire/wiretest":       {},

	// A throwaway PostgreSQL cluster for the PostgreSQL store's tests.
	"internal/storage/postgres/pgtest": {},

	// A fake GitHub (its API and git over smart HTTP) for the GitHub
	// extension's tests and the end-to-end suite.
	"extensions/github/ghtest": {},
	// A fake Slack Web API for the Slack extension's tests and the
	// end-to-end suite.
	"extensions/slack/slacktest": {},
	"internal/toolbelt/toolbelttest": {"extension", "internal/bearer", "internal/clock", "internal/executor", "internal/ids", "internal/kernel",
		"internal/storage", "internal/storage/sqlite", "internal/toolbelt"},
	"internal/scheduler/schedulertest": {"internal/executor"},
	// Scripted fakes of the vendors' model APIs for the agent CLIs' tests.
	"internal/executor/agent/agenttest": {},
	// A double of an execution's toolbelt socket for the agent executors'
	// tests.
	"internal/executor/agentrun/agentruntest": {"api", "internal/clock", "internal/executor", "internal/executor/agentrun", "internal/executor/proc", "internal/executor/sandbox"},
	"internal/scheduler/toolbeltint": {"internal/bearer", "internal/executor", "internal/scheduler", "internal/scheduler/schedulertest",
		"internal/storage", "internal/toolbelt/toolbelttest"},
	"internal/management/mgmttest": {"client", "extension", "internal/bearer", "internal/bootstrap", "internal/clock", "internal/config",
		"internal/configsvc", "internal/ids", "internal/kernel", "internal/management", "internal/statedir", "internal/storage",
		"internal/storage/sqlite", "internal/toolbelt", "internal/unixsock"},
}

// forbidden are imports from outside the module that a package (or every
// package under a prefix ending in "/") must never have: storage never
// knows HTTP, and the HTTP layers never hold SQL.
var forbidden = map[string][]string{
	"internal/storage/":    {"net/http"},
	"internal/kernel/":     {"net/http", "database/sql"},
	"internal/wire":        {"net/http", "database/sql"},
	"internal/toolbelt/":   {"net/http", "database/sql"},
	"internal/scheduler/":  {"net/http", "database/sql"},
	"internal/config/":     {"net/http", "database/sql"},
	"internal/management":  {"database/sql"},
	"internal/httpapi":     {"database/sql"},
	"internal/toolbeltapi": {"database/sql"},
	"internal/configsvc":   {"net/http", "database/sql"},
	"internal/webhook":     {"database/sql"},
	"client":               {"database/sql"},
	"osclient":             {"database/sql"},
	"internal/tui":         {"database/sql", "net/http"},
}

func TestDependencyRules(t *testing.T) {
	graph, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if len(graph) < 10 {
		t.Fatalf("found only %d packages: the walk is broken", len(graph))
	}
	for _, v := range check(graph, rules, forbidden) {
		t.Error(v)
	}
}

// The rules themselves can fail: a graph with a deliberate violation of
// each kind is refused, and the tree's own graph, changed by one import,
// is refused too.
func TestDependencyRulesRefuseViolations(t *testing.T) {
	graph, err := load()
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		pkg, imp string
		want     string
	}{
		"the kernel imports the toolbelt":       {"internal/kernel", module + "/internal/toolbelt", "may not import internal/toolbelt"},
		"storage knows HTTP":                    {"internal/storage/sqlite", "net/http", "must never import net/http"},
		"the PostgreSQL store knows HTTP":       {"internal/storage/postgres", "net/http", "must never import net/http"},
		"config imports an executor":            {"internal/config", module + "/internal/executor/shell/x", "may not import"},
		"a handler holds SQL":                   {"internal/management", "database/sql", "must never import database/sql"},
		"something imports cmd":                 {"internal/daemon", module + "/cmd/open-conduit/cli", "may not import cmd/open-conduit/cli"},
		"production imports a test helper":      {"internal/daemon", module + "/internal/storage/storagetest", "may not import internal/storage/storagetest"},
		"a package nobody gave a layer":         {"internal/newthing", "fmt", "has no rule"},
		"the client reaches into the internals": {"client", module + "/internal/storage", "may not import internal/storage"},
	} {
		t.Run(name, func(t *testing.T) {
			g := map[string][]string{}
			for p, imps := range graph {
				g[p] = slices.Clone(imps)
			}
			g[c.pkg] = append(g[c.pkg], c.imp)
			vs := check(g, rules, forbidden)
			if !slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, c.want) }) {
				t.Fatalf("adding %s → %s was not refused (want %q); got %q", c.pkg, c.imp, c.want, vs)
			}
		})
	}
}

// check returns every violation of the rules in graph (package → its
// imports), sorted.
func check(graph map[string][]string, rules, forbidden map[string][]string) []string {
	var out []string
	for pkg, imps := range graph {
		allowed, ok := rules[pkg]
		if !ok {
			out = append(out, fmt.Sprintf("package %s has no rule in deps_test.go: give it its layer", pkg))
			continue
		}
		for _, imp := range imps {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				if !slices.Contains(allowed, rel) {
					out = append(out, fmt.Sprintf("%s may not import %s", pkg, rel))
				}
				continue
			}
			for prefix, bad := range forbidden {
				if (pkg == prefix || strings.HasPrefix(pkg+"/", prefix) && strings.HasSuffix(prefix, "/")) && slices.Contains(bad, imp) {
					out = append(out, fmt.Sprintf("%s must never import %s", pkg, imp))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// load returns the module's packages (relative to the module root) and
// the imports of their non-test files for this platform.
func load() (map[string][]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	graph := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		// A nested module (bench/) is not part of this one: the go
		// command leaves it out of ./..., and so does this graph.
		if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		var none *build.NoGoError
		if errorsAs(err, &none) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		rel, _ := filepath.Rel(root, path)
		graph[filepath.ToSlash(rel)] = pkg.Imports
		return nil
	})
	return graph, err
}

func errorsAs(err error, target **build.NoGoError) bool {
	e, ok := err.(*build.NoGoError)
	if ok {
		*target = e
	}
	return ok
}

// moduleRoot is the directory holding go.mod, above the test's own.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}
