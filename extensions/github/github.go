package github

import (
	"context"
	"encoding/json"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// Name is the extension's registration name: it owns github.*.
const Name = "github"

// Source is the source of the Events its webhook ingress accepts.
const Source = "github.webhook"

// Extension is the GitHub extension. It is opt-in: a configuration with no
// github entry does not enable it, and its ingress is off until its config
// turns it on.
type Extension struct {
	// Limits bound its ingress (zero: the defaults).
	Limits Options
}

// Registration is the extension's registration.
func Registration(ext *Extension) extension.Registration {
	if ext == nil {
		ext = &Extension{}
	}
	return inproc.Registration(ext)
}

var (
	_ inproc.Configurable    = (*Extension)(nil)
	_ inproc.ConfigInspector = (*Extension)(nil)
	_ inproc.Ingresser       = (*Extension)(nil)
	_ inproc.OptIn           = (*Extension)(nil)
)

func (*Extension) Name() string { return Name }

func (*Extension) OptIn() bool { return true }

// CheckConfig checks extensions.github.config strictly.
func (*Extension) CheckConfig(raw json.RawMessage) error {
	_, err := parseConfig(raw)
	return err
}

// InspectConfig reports the webhook secret's name, the scopes the config
// claims and a listener beyond loopback.
func (*Extension) InspectConfig(raw json.RawMessage) extension.ConfigReport {
	c, err := parseConfig(raw)
	if err != nil {
		return extension.ConfigReport{}
	}
	return inspect(c)
}

// Ingress is its webhook ingress.
func (e *Extension) Ingress() extension.Ingress { return ingress{limits: e.Limits} }

type ingress struct{ limits Options }

// Source is github.webhook.
func (ingress) Source() string { return Source }

// Serve runs the webhook listener while ctx lasts, when the config turns
// it on.
func (i ingress) Serve(ctx context.Context, raw json.RawMessage, host extension.IngressHost) error {
	c, err := parseConfig(raw)
	if err != nil {
		return err
	}
	if c.Ingress == nil || !c.Ingress.Enabled {
		return nil
	}
	return serve(ctx, c, host, i.limits)
}

// AdmitsTrace admits a route trace of source github.webhook in a scope the config
// gives a repository or an installation.
func (ingress) AdmitsTrace(raw json.RawMessage, scope string) bool {
	c, err := parseConfig(raw)
	if err != nil {
		return false
	}
	return claimsOf(c).admits(scope)
}
