package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/open-conduit/open-conduit/api"
	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// Name is the extension's registration name: it owns slack.*.
const Name = "slack"

// Source is the source of the Events its ingress accepts.
const Source = "slack.events"

// Port is what the operations read the calling Work's thread through: the
// Work, the core.work.created Event that made it and the Event that caused
// that (the Slack Event a route started the Work on). The daemon adapts
// storage to it. A lookup of something that does not exist answers an
// error wrapping extension.ErrNotFound.
type Port interface {
	Work(ctx context.Context, id string) (api.Work, error)
	Event(ctx context.Context, id string) (api.Event, error)
}

// Extension is the Slack extension. It is opt-in: a configuration with no
// slack entry does not enable it, and its ingress is off until its config
// turns it on.
type Extension struct {
	// Port reads the calling Work's thread (nil: the operations are
	// registered for their names only and refused with
	// slack_not_configured).
	Port Port
	// Now is the clock the ingress checks request timestamps on (nil:
	// the ingress does not run).
	Now func() time.Time
	// HTTPClient sends the requests to Slack (nil: a client with
	// DefaultTimeout).
	HTTPClient *http.Client
	// Limits bound its ingress (zero: the defaults).
	Limits Options

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

func (*Extension) Name() string { return Name }

func (*Extension) OptIn() bool { return true }

// CheckConfig checks extensions.slack.config strictly.
func (*Extension) CheckConfig(raw json.RawMessage) error {
	_, err := parseConfig(raw)
	return err
}

// InspectConfig reports the secrets' names, the scopes the channels go to
// and a listener beyond loopback.
func (*Extension) InspectConfig(raw json.RawMessage) extension.ConfigReport {
	c, err := parseConfig(raw)
	if err != nil {
		return extension.ConfigReport{}
	}
	return inspect(c)
}

// Ingress is its Events API ingress, which also holds, while the daemon
// runs it, the host the operations resolve the bot token through.
func (e *Extension) Ingress() extension.Ingress { return ingress{ext: e} }

type ingress struct{ ext *Extension }

// Source is slack.events.
func (ingress) Source() string { return Source }

// errNoClock: the extension was registered without a clock, so the
// ingress cannot check timestamps and does not run.
var errNoClock = errors.New("slack: the ingress has no clock")

// Serve lends the operations host, through which they resolve the bot
// token, until ctx ends, when the config has an api; without one it
// returns at once. The token lives as long as this run of the config, in
// memory only. The Events API endpoint itself is served by the host
// (Endpoint); registered without a clock, an ingress the config turns on
// cannot check timestamps, and Serve says so.
func (i ingress) Serve(ctx context.Context, raw json.RawMessage, host extension.IngressHost) error {
	c, err := parseConfig(raw)
	if err != nil {
		return err
	}
	if c.Ingress != nil && c.Ingress.Enabled && i.ext.Now == nil {
		return errNoClock
	}
	if c.API == nil {
		return nil
	}
	run := i.ext.live.attach(host, c.API)
	defer i.ext.live.detach(run)
	<-ctx.Done()
	return nil
}

// Endpoint is the Events API endpoint when the config turns the ingress
// on (and the extension has a clock to check timestamps on).
func (i ingress) Endpoint(raw json.RawMessage) (extension.WebhookEndpoint, bool) {
	c, err := parseConfig(raw)
	if err != nil || c.Ingress == nil || !c.Ingress.Enabled || i.ext.Now == nil {
		return extension.WebhookEndpoint{}, false
	}
	return endpoint(c, i.ext.Now, i.ext.Limits), true
}

// AdmitsTrace admits a route trace of source slack.events in a scope some
// channel's claim names.
func (ingress) AdmitsTrace(raw json.RawMessage, scope string) bool {
	c, err := parseConfig(raw)
	if err != nil {
		return false
	}
	return c.admits(scope)
}
