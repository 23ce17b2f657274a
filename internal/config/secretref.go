package config

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Scheme is the kind of a secret reference.
type Scheme string

// The secret reference schemes.
const (
	SchemeKeyring Scheme = "keyring" // keyring:<service>/<user>
	SchemeFile    Scheme = "file"    // file:<key> in <state>/secrets.json
	SchemeEnv     Scheme = "env"     // env:<NAME> of the daemon's environment
	SchemeCmd     Scheme = "cmd"     // cmd:<shell command>, run with sh -c
)

// Limits on a reference's parts.
const (
	maxKeyringUser = 256
	maxCommand     = 8192
)

// SecretRef is a parsed secret reference. Its text is kept out of every
// printed and marshalled form: String, GoString and MarshalJSON show only the
// scheme. Only Reference gives the text, for the resolver.
type SecretRef struct {
	scheme Scheme
	text   string
}

// redactedMark stands for a reference's text wherever one is shown.
const redactedMark = "<redacted>"

// ParseSecretRef checks a reference's scheme and syntax. Its error is a
// *SecretError with code secret_invalid_reference whose message says what
// the syntax is, never what the text was.
func ParseSecretRef(s string) (SecretRef, error) {
	scheme, body, ok := strings.Cut(s, ":")
	if !ok {
		return SecretRef{}, invalidRef("a secret reference is <scheme>:<rest> with scheme keyring, file, env or cmd")
	}
	var problem string
	switch Scheme(scheme) {
	case SchemeKeyring:
		problem = checkKeyringRef(body)
	case SchemeFile:
		if !validFileKey(body) {
			problem = "a file reference is file:<key>, the key 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'"
		}
	case SchemeEnv:
		if !validEnvRef(body) {
			problem = "an env reference is env:<NAME>, a variable name of letters, digits and '_', not starting with a digit"
		}
	case SchemeCmd:
		problem = checkCommand(body)
	default:
		problem = "the scheme must be keyring, file, env or cmd, followed by ':'"
	}
	if problem != "" {
		return SecretRef{}, invalidRef(problem)
	}
	return SecretRef{scheme: Scheme(scheme), text: s}, nil
}

func invalidRef(msg string) error {
	return &SecretError{Code: SecretInvalidReference, Message: msg}
}

// Scheme returns the reference's scheme.
func (r SecretRef) Scheme() Scheme { return r.scheme }

// Reference returns the reference's full text. Only the resolver needs it;
// never log, store or return it.
func (r SecretRef) Reference() string { return r.text }

// String returns the redacted form, <scheme>:<redacted>.
func (r SecretRef) String() string {
	if r.scheme == "" {
		return ""
	}
	return string(r.scheme) + ":" + redactedMark
}

// GoString keeps %#v as redacted as %v.
func (r SecretRef) GoString() string { return "config.SecretRef(" + r.String() + ")" }

// MarshalJSON writes the redacted form.
func (r SecretRef) MarshalJSON() ([]byte, error) {
	return []byte(`"` + r.String() + `"`), nil
}

// The syntax of each scheme's rest.
var (
	keyringServiceRule = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	fileKeyRule        = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	envRefRule         = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

func checkKeyringRef(body string) string {
	const syntax = "a keyring reference is keyring:<service>/<user>: the service 1 to 128 letters, digits, '.', '_' or '-' starting with a letter or digit, the user 1 to 256 printable characters"
	service, user, ok := strings.Cut(body, "/")
	if !ok || !keyringServiceRule.MatchString(service) || user == "" || len(user) > maxKeyringUser ||
		!utf8.ValidString(user) || strings.TrimSpace(user) != user || hasControl(user, "") {
		return syntax
	}
	return ""
}

func validFileKey(s string) bool { return fileKeyRule.MatchString(s) }
func validEnvRef(s string) bool  { return envRefRule.MatchString(s) }

// hasControl reports whether s holds a control character other than those
// in allowed.
func hasControl(s, allowed string) bool {
	for _, r := range s {
		if (r < 0x20 || r == 0x7f) && !strings.ContainsRune(allowed, r) {
			return true
		}
	}
	return false
}

func checkCommand(body string) string {
	switch {
	case strings.TrimSpace(body) == "" || len(body) > maxCommand:
		return "a cmd reference is cmd:<command>, a shell command of 1 to 8192 bytes"
	case !utf8.ValidString(body):
		return "a cmd reference's command must be valid UTF-8"
	case hasControl(body, "\t\n\r"):
		return "a cmd reference's command may not contain control characters other than tab and newline"
	}
	return ""
}
