package github

import (
	"encoding/json"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extension/inproc"
)

// DefaultListen is the address a remedy offers for the deprecated
// ingress.listen member: the webhook listener's default.
const DefaultListen = "127.0.0.1:8787"

// WarnIngressNotLoopback is the configuration warning of an ingress that
// listens beyond loopback.
const WarnIngressNotLoopback = "github_ingress_not_loopback"

// WarnIngressListenDeprecated is the configuration warning of an
// ingress.listen member on loopback: the ingresses share the daemon's
// webhook listener now, whose address is the top-level ingress.listen.
// (Beyond loopback, WarnIngressNotLoopback says so too.)
const WarnIngressListenDeprecated = "github_ingress_listen_deprecated"

// listenMoved is what a warning of the deprecated listen member says.
const listenMoved = "ingress.listen is deprecated and goes in the next release: every ingress is served on the daemon's one webhook listener, so move the address to the top-level ingress.listen of the configuration (with allow_non_loopback there if it is not loopback); while that names no address, the listener listens here"

// Config is the extension's configuration (extensions.github.config).
type Config struct {
	// Ingress is the webhook ingress, served on the daemon's webhook
	// listener; absent: off.
	Ingress *IngressConfig `json:"ingress,omitempty"`
	// Repositories maps "owner/repo" (matched without regard to case) to
	// the scope its deliveries go to.
	Repositories map[string]Claim `json:"repositories,omitempty"`
	// Installations maps a GitHub App installation id to the scope of
	// the deliveries of its repositories that Repositories does not name.
	Installations map[string]Claim `json:"installations,omitempty"`
	// API is how the operations reach GitHub's REST API; absent: every
	// operation is refused with github_not_configured.
	API *APIConfig `json:"api,omitempty"`
}

// APIConfig is GitHub's REST API and the credential the operations call
// it with: exactly one of App and Token. Every credential is named among
// the configuration's top-level secrets, never given here.
type APIConfig struct {
	// URL is the API's base URL: "" for github.com, https://HOST/api/v3/
	// for GitHub Enterprise Server (http only for a loopback host).
	URL string `json:"url,omitempty"`
	// App authenticates as a GitHub App.
	App *AppConfig `json:"app,omitempty"`
	// Token names a secret holding a token (a personal access token or
	// any token GitHub accepts).
	Token string `json:"token,omitempty"`
}

// AppConfig names the secrets of a GitHub App.
type AppConfig struct {
	// ID names the secret holding the App's numeric id.
	ID string `json:"id"`
	// PrivateKey names the secret holding the App's private key (PEM).
	PrivateKey string `json:"private_key"`
}

// IngressConfig configures the webhook listener.
type IngressConfig struct {
	// Enabled turns the ingress on (default off).
	Enabled bool `json:"enabled,omitempty"`
	// Listen is host:port, the host an IP address or localhost:
	// deprecated, for one release. The ingress is served on the daemon's
	// webhook listener, which listens here only while the configuration's
	// top-level ingress.listen names no address.
	Listen string `json:"listen,omitempty"`
	// AllowNonLoopback must be true for Listen to name an address other
	// than loopback; such a configuration is warned about.
	AllowNonLoopback bool `json:"allow_non_loopback,omitempty"`
	// Secret names the webhook secret among the configuration's
	// top-level secrets (required when Enabled).
	Secret string `json:"secret,omitempty"`
}

// Claim is the scope a repository's or an installation's deliveries go to.
type Claim struct {
	Scope string `json:"scope"`
}

var (
	nameRule  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	ownerRule = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	repoRule  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	instRule  = regexp.MustCompile(`^[1-9][0-9]{0,19}$`)
)

// escape makes a member name a JSON pointer token.
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

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
		case in.Secret == "" && in.Enabled:
			add("/ingress", inproc.CodeMissingField, "an enabled ingress needs secret: the name of the webhook secret among the top-level secrets")
		case in.Secret != "" && !nameRule.MatchString(in.Secret):
			add("/ingress/secret", inproc.CodeInvalidValue, "a secret name is a lower-case letter followed by up to 62 lower-case letters, digits or '-'")
		}
	}
	if a := c.API; a != nil {
		checkAPI(a, add)
	}
	seen := map[string]bool{}
	for _, full := range sortedKeys(c.Repositories) {
		ptr := "/repositories/" + escape(full)
		owner, repo, ok := strings.Cut(full, "/")
		if !ok || !ownerRule.MatchString(owner) || !repoRule.MatchString(repo) || repo == "." || repo == ".." {
			add(ptr, inproc.CodeInvalidValue, "a repository is named owner/repo, as GitHub shows it")
		}
		if seen[strings.ToLower(full)] {
			add(ptr, inproc.CodeDuplicateKey, "GitHub's names ignore case, so this repository is named twice: keep one")
		}
		seen[strings.ToLower(full)] = true
		checkClaim(c.Repositories[full], ptr, add)
	}
	for _, id := range sortedKeys(c.Installations) {
		ptr := "/installations/" + escape(id)
		if !instRule.MatchString(id) {
			add(ptr, inproc.CodeInvalidValue, "an installation is named by its numeric id, as GitHub shows it")
		}
		checkClaim(c.Installations[id], ptr, add)
	}
	if len(ps) > 0 {
		return Config{}, &extension.ConfigError{Problems: ps}
	}
	return c, nil
}

func checkAPI(a *APIConfig, add func(ptr, code, remedy string)) {
	if a.URL != "" && !extension.APIURL(a.URL) {
		add("/api/url", inproc.CodeInvalidValue, "give GitHub's API base URL: https://HOST/api/v3/ for GitHub Enterprise Server, or leave it out for github.com (http only for a loopback host); no credentials, query or fragment")
	}
	switch {
	case a.App == nil && a.Token == "":
		add("/api", inproc.CodeMissingField, "give app (a GitHub App's id and private key) or token: each names a secret among the top-level secrets")
	case a.App != nil && a.Token != "":
		add("/api", inproc.CodeInvalidValue, "give one credential, app or token, not both")
	}
	secret := func(ptr, name string) {
		switch {
		case name == "":
			add(ptr, inproc.CodeMissingField, "name the secret among the top-level secrets")
		case !nameRule.MatchString(name):
			add(ptr, inproc.CodeInvalidValue, "a secret name is a lower-case letter followed by up to 62 lower-case letters, digits or '-'")
		}
	}
	if a.App != nil {
		secret("/api/app/id", a.App.ID)
		secret("/api/app/private_key", a.App.PrivateKey)
	}
	if a.Token != "" {
		secret("/api/token", a.Token)
	}
}

func checkClaim(cl Claim, ptr string, add func(ptr, code, remedy string)) {
	if cl.Scope == "" {
		add(ptr, inproc.CodeMissingField, "give scope: the id of the scope its deliveries go to")
	}
}

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
		if in.Secret != "" {
			rep.Secrets = append(rep.Secrets, extension.ConfigReference{Pointer: "/ingress/secret", Name: in.Secret})
		}
		if in.Listen != "" && !extension.LoopbackListen(in.Listen) {
			rep.Warnings = append(rep.Warnings, extension.ConfigProblem{Pointer: "/ingress/listen", Code: WarnIngressNotLoopback,
				Remedy: "the GitHub ingress listens beyond loopback, so any machine that reaches this address can send it deliveries (each still needs the webhook signature); prefer 127.0.0.1 behind a reverse proxy or tunnel. " + listenMoved})
		} else if in.Listen != "" {
			rep.Warnings = append(rep.Warnings, extension.ConfigProblem{Pointer: "/ingress/listen", Code: WarnIngressListenDeprecated, Remedy: listenMoved})
		}
	}
	if a := c.API; a != nil {
		if a.App != nil {
			rep.Secrets = append(rep.Secrets, extension.ConfigReference{Pointer: "/api/app/id", Name: a.App.ID},
				extension.ConfigReference{Pointer: "/api/app/private_key", Name: a.App.PrivateKey})
		}
		if a.Token != "" {
			rep.Secrets = append(rep.Secrets, extension.ConfigReference{Pointer: "/api/token", Name: a.Token})
		}
	}
	for _, full := range sortedKeys(c.Repositories) {
		rep.Scopes = append(rep.Scopes, extension.ConfigReference{Pointer: "/repositories/" + escape(full) + "/scope", Name: c.Repositories[full].Scope})
	}
	for _, id := range sortedKeys(c.Installations) {
		rep.Scopes = append(rep.Scopes, extension.ConfigReference{Pointer: "/installations/" + escape(id) + "/scope", Name: c.Installations[id].Scope})
	}
	return rep
}

// claims is a parsed config's lookup of the scope of a delivery.
type claims struct {
	repos map[string]string // lower-case owner/repo -> scope
	names map[string]string // lower-case owner/repo -> as configured
	insts map[string]string
}

func claimsOf(c Config) claims {
	cl := claims{repos: map[string]string{}, names: map[string]string{}, insts: map[string]string{}}
	for k, v := range c.Repositories {
		cl.repos[strings.ToLower(k)] = v.Scope
		cl.names[strings.ToLower(k)] = k
	}
	for k, v := range c.Installations {
		cl.insts[k] = v.Scope
	}
	return cl
}

// scope is the scope of a delivery about repo (owner/repo, "" for none)
// from installation (0 for none): the repository's claim first, then the
// installation's.
func (cl claims) scope(repo string, installation int64) (string, bool) {
	if repo != "" {
		if s, ok := cl.repos[strings.ToLower(repo)]; ok {
			return s, true
		}
	}
	if installation > 0 {
		if s, ok := cl.insts[strconv.FormatInt(installation, 10)]; ok {
			return s, true
		}
	}
	return "", false
}

// admits reports whether some claim names scope.
func (cl claims) admits(scope string) bool {
	for _, s := range cl.repos {
		if s == scope {
			return true
		}
	}
	for _, s := range cl.insts {
		if s == scope {
			return true
		}
	}
	return false
}

// repoIn reports whether scope claims repo (owner/repo, any case) by name,
// and answers its name as configured (as GitHub spells it, which is how
// the ingress's correlation keys spell it).
func (cl claims) repoIn(scope, repo string) (string, bool) {
	low := strings.ToLower(repo)
	if s, ok := cl.repos[low]; ok && s == scope {
		return cl.names[low], true
	}
	return "", false
}

// onlyRepo answers the one repository scope claims by name, if it claims
// exactly one.
func (cl claims) onlyRepo(scope string) (string, bool) {
	found := ""
	for low, s := range cl.repos {
		if s != scope {
			continue
		}
		if found != "" {
			return "", false
		}
		found = low
	}
	return found, found != ""
}
