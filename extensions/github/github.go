package github

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

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
	// Now is the clock its API credentials and rate limits read. Without
	// it the operations are registered for their names only and every
	// GitHub call is refused with github_not_configured.
	Now func() time.Time
	// HTTPClient sends the requests to GitHub (nil: a client with
	// ghapi.DefaultTimeout).
	HTTPClient *http.Client

	live live
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
	_ inproc.Operator        = (*Extension)(nil)
	_ inproc.Toolsetter      = (*Extension)(nil)
	_ inproc.Playbooker      = (*Extension)(nil)
	_ extension.Webhook      = ingress{}
)

// Operations are the ghapi operations (served with the credentials its
// config names), the translated waits and the translated emission.
func (e *Extension) Operations() []extension.Operation {
	ops := e.apiOperations()
	for _, w := range waitKinds {
		ops = append(ops, waitOperation(w.op, w.summary, w.what, w.types))
	}
	return append(ops, reportOperation())
}

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

// Ingress is its webhook ingress, which also holds, while the daemon runs
// it, the host the operations resolve their credentials through.
func (e *Extension) Ingress() extension.Ingress { return ingress{ext: e} }

type ingress struct{ ext *Extension }

// Source is github.webhook.
func (ingress) Source() string { return Source }

// Serve lends the operations host, through which they resolve the
// credentials an api config names, until ctx ends; without one it returns
// at once. The credentials live as long as this run of the config, in
// memory only. The webhook itself is served by the host (Endpoint).
func (i ingress) Serve(ctx context.Context, raw json.RawMessage, host extension.IngressHost) error {
	c, err := parseConfig(raw)
	if err != nil {
		return err
	}
	if c.API == nil {
		return nil
	}
	run := i.ext.live.attach(host, c.API)
	defer i.ext.live.detach(run)
	<-ctx.Done()
	return nil
}

// Endpoint is the webhook's endpoint when the config turns the ingress on.
func (i ingress) Endpoint(raw json.RawMessage) (extension.WebhookEndpoint, bool) {
	c, err := parseConfig(raw)
	if err != nil || c.Ingress == nil || !c.Ingress.Enabled {
		return extension.WebhookEndpoint{}, false
	}
	return endpoint(c, i.ext.Limits), true
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
