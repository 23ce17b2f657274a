package slack

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// DefaultListen is the address a remedy offers for the deprecated
// ingress.listen member (the last release's default; the webhook
// listener's is 127.0.0.1:8787).
const DefaultListen = "127.0.0.1:8788"

// WarnIngressNotLoopback is the configuration warning of an ingress that
// listens beyond loopback.
const WarnIngressNotLoopback = "slack_ingress_not_loopback"

// WarnIngressListenDeprecated is the configuration warning of an
// ingress.listen member on loopback: the ingresses share the daemon's
// webhook listener now, whose address is the top-level ingress.listen.
// (Beyond loopback, WarnIngressNotLoopback says so too.)
const WarnIngressListenDeprecated = "slack_ingress_listen_deprecated"

// listenMoved is what a warning of the deprecated listen member says.
const listenMoved = "ingress.listen is deprecated and goes in the next release: every ingress is served on the daemon's one webhook listener, so move the address to the top-level ingress.listen of the configuration (with allow_non_loopback there if it is not loopback); while that names no address, the listener listens here unless the GitHub ingress's names one"

// Config is the extension's configuration (extensions.slack.config).
type Config struct {
	// Ingress is the Events API ingress, served on the daemon's webhook
	// listener; absent: off.
	Ingress *IngressConfig `json:"ingress,omitempty"`
	// Channels maps a channel id (C…, G…) to the scope its messages go
	// to, and whose Work may read and answer in its threads.
	Channels map[string]Claim `json:"channels,omitempty"`
	// API is how the operations reach Slack's Web API; absent: every
	// operation that calls Slack is refused with slack_not_configured.
	API *APIConfig `json:"api,omitempty"`
}

// IngressConfig configures the Events API listener.
type IngressConfig struct {
	// Enabled turns the ingress on (default off).
	Enabled bool `json:"enabled,omitempty"`
	// Listen is host:port, the host an IP address or localhost:
	// deprecated, for one release. The ingress is served on the daemon's
	// webhook listener, which listens here only while the configuration's
	// top-level ingress.listen (and the GitHub ingress's own) names no
	// address.
	Listen string `json:"listen,omitempty"`
	// AllowNonLoopback must be true for Listen to name an address other
	// than loopback; such a configuration is warned about.
	AllowNonLoopback bool `json:"allow_non_loopback,omitempty"`
	// SigningSecret names the app's signing secret among the
	// configuration's top-level secrets (required when Enabled).
	SigningSecret string `json:"signing_secret,omitempty"`
}

// APIConfig is Slack's Web API and the bot token the operations call it
// with, named among the configuration's top-level secrets.
type APIConfig struct {
	// URL is the Web API's base URL ("" for https://slack.com/api/; http
	// only for a loopback host).
	URL string `json:"url,omitempty"`
	// Token names the secret holding the bot token (xoxb-…).
	Token string `json:"token"`
}

// Claim is the scope a channel's messages go to.
type Claim struct {
	Scope string `json:"scope"`
}

var (
	nameRule    = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	channelRule = regexp.MustCompile(`^[CGD][A-Z0-9]{2,31}$`)
)

const secretNameRemedy = "a secret name is a lower-case letter followed by up to 62 lower-case letters, digits or '-'"

// parseConfig decodes and checks a configuration strictly. Every problem
// is reported at its place; no remedy quotes a value.
func parseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := inproc.DecodeConfig(raw, &c); err != nil {
		return Config{}, err
	}
	var ps []extension.ConfigProblem
	add := func(ptr, code, remedy string) {
		ps = append(ps, extension.ConfigProblem{Pointer: ptr, Code: code, Remedy: remedy})
	}
	if in := c.Ingress; in != nil {
		if in.Listen != "" {
			if !extension.ValidListen(in.Listen) {
				add("/ingress/listen", inproc.CodeInvalidValue, "give host:port, the host an IP address or localhost and the port a number from 0 to 65535, such as "+DefaultListen)
			} else if !extension.LoopbackListen(in.Listen) && !in.AllowNonLoopback {
				add("/ingress/listen", inproc.CodeInvalidValue, "this address is not loopback, so the ingress would be reachable from other machines: listen on 127.0.0.1 behind a reverse proxy or tunnel, or set allow_non_loopback to true")
			}
		}
		switch {
		case in.SigningSecret == "" && in.Enabled:
			add("/ingress", inproc.CodeMissingField, "an enabled ingress needs signing_secret: the name of the Slack app's signing secret among the top-level secrets")
		case in.SigningSecret != "" && !nameRule.MatchString(in.SigningSecret):
			add("/ingress/signing_secret", inproc.CodeInvalidValue, secretNameRemedy)
		}
	}
	if a := c.API; a != nil {
		if a.URL != "" && !apiURL(a.URL) {
			add("/api/url", inproc.CodeInvalidValue, "give Slack's Web API base URL ending in /, or leave it out for https://slack.com/api/ (http only for a loopback host); no credentials, query or fragment")
		}
		switch {
		case a.Token == "":
			add("/api", inproc.CodeMissingField, "give token: the name of the bot token's secret among the top-level secrets")
		case !nameRule.MatchString(a.Token):
			add("/api/token", inproc.CodeInvalidValue, secretNameRemedy)
		}
	}
	for _, ch := range sortedKeys(c.Channels) {
		ptr := "/channels/" + ch
		if !channelRule.MatchString(ch) {
			// The pointer stops before a name that is not a channel id.
			add("/channels", inproc.CodeInvalidValue, "a channel is named by its id (C…, G… or D… and upper-case letters and digits), as Slack shows it in the channel's details")
			continue
		}
		if c.Channels[ch].Scope == "" {
			add(ptr, inproc.CodeMissingField, "give scope: the id of the scope the channel's messages go to")
		}
	}
	if len(ps) > 0 {
		return Config{}, &extension.ConfigError{Problems: ps}
	}
	return c, nil
}

// apiURL reports whether s is an acceptable Web API base URL: one
// extension.APIURL accepts, ending in / (the client library joins method
// names to it).
func apiURL(s string) bool { return extension.APIURL(s) && strings.HasSuffix(s, "/") }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// inspect reports what an accepted config refers to and its warnings.
func inspect(c Config) extension.ConfigReport {
	var rep extension.ConfigReport
	if in := c.Ingress; in != nil {
		if in.SigningSecret != "" {
			rep.Secrets = append(rep.Secrets, extension.ConfigReference{Pointer: "/ingress/signing_secret", Name: in.SigningSecret})
		}
		if in.Listen != "" && !extension.LoopbackListen(in.Listen) {
			rep.Warnings = append(rep.Warnings, extension.ConfigProblem{Pointer: "/ingress/listen", Code: WarnIngressNotLoopback,
				Remedy: "the Slack ingress listens beyond loopback, so any machine that reaches this address can send it requests (each still needs Slack's signature); prefer 127.0.0.1 behind a reverse proxy or tunnel. " + listenMoved})
		} else if in.Listen != "" {
			rep.Warnings = append(rep.Warnings, extension.ConfigProblem{Pointer: "/ingress/listen", Code: WarnIngressListenDeprecated, Remedy: listenMoved})
		}
	}
	if a := c.API; a != nil && a.Token != "" {
		rep.Secrets = append(rep.Secrets, extension.ConfigReference{Pointer: "/api/token", Name: a.Token})
	}
	for _, ch := range sortedKeys(c.Channels) {
		rep.Scopes = append(rep.Scopes, extension.ConfigReference{Pointer: "/channels/" + ch + "/scope", Name: c.Channels[ch].Scope})
	}
	return rep
}

// scopeOf is the scope that claims channel.
func (c Config) scopeOf(channel string) (string, bool) {
	cl, ok := c.Channels[channel]
	return cl.Scope, ok
}

// claims reports whether scope claims channel.
func (c Config) claims(scope, channel string) bool {
	s, ok := c.scopeOf(channel)
	return ok && s == scope
}

// admits reports whether some channel's claim names scope.
func (c Config) admits(scope string) bool {
	for _, cl := range c.Channels {
		if cl.Scope == scope {
			return true
		}
	}
	return false
}
