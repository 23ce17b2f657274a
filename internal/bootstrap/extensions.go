package bootstrap

import (
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github"
	"github.com/open-conduit/open-conduit/extensions/human"
	"github.com/open-conduit/open-conduit/extensions/introspection"
	"github.com/open-conduit/open-conduit/extensions/slack"
)

//go:generate go test -run ^(TestOperationsReference|TestToolsetsOnlyGain)$ -update .

// Ports are what the bundled extensions read through; the daemon adapts
// its storage and configuration to them. The zero Ports registers the
// extensions for their names only (operations, toolsets, playbooks), as an
// offline configuration check and the operations reference need; their
// calls then fail.
type Ports struct {
	Introspection introspection.Port
	// Human keeps the human extension's approvals and resolves its
	// operations lists (zero: registered for its names only).
	Human human.Options
	// GitHub is the GitHub extension with its clock (nil: registered for
	// its names only; its GitHub calls are refused).
	GitHub *github.Extension
	// Slack is the Slack extension with its port and clock (nil:
	// registered for its names only; its calls are refused and its
	// ingress does not run).
	Slack *slack.Extension
}

// Extensions returns the extensions this release bundles, reading through
// ports: the one list the daemon registers on its host and the operations
// reference is generated from. Their operations, toolsets and playbooks
// are part of the release's registry, so docs/operations.md lists them
// and a test holds every bundled toolset to the members it had
// (testdata/toolsets.json).
func Extensions(ports Ports) []extension.Registration {
	return []extension.Registration{introspection.Registration(ports.Introspection), human.Registration(ports.Human), github.Registration(ports.GitHub), slack.Registration(ports.Slack)}
}
