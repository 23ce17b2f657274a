package config

import (
	"strings"

	"github.com/open-conduit/open-conduit/extension"
)

// maxIDLen is the longest id: a letter and up to 62 more characters.
const maxIDLen = 63

// validID reports whether s is a stable id of a scope, binding, grant, route
// or secret: a lower-case letter followed by up to 62 lower-case letters,
// digits or '-'.
func validID(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// validSecretName reports whether s names a secret: like an id, but '_' is
// allowed too, since secret names often mirror variable names.
func validSecretName(s string) bool {
	if s == "" || len(s) > maxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_'):
		default:
			return false
		}
	}
	return true
}

// validExtensionName reports whether s is a registration name.
func validExtensionName(s string) bool {
	return len(s) <= maxIDLen && extension.RegistrationName(s) == nil
}

// maxEnvNameLen bounds an environment variable name.
const maxEnvNameLen = 128

// validEnvName reports whether s has the shape of an environment variable
// name a binding may set: [A-Z_][A-Z0-9_]*.
func validEnvName(s string) bool {
	if s == "" || len(s) > maxEnvNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z' || c == '_':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return false
		}
	}
	return true
}

// Reserved environment names: the host sets them for every execution, so a
// binding may not select a secret into them.
var reservedEnv = []string{"OS_ENDPOINT", "OS_TOKEN_FILE"}

// reservedEnvPrefix marks the host's own variables.
const reservedEnvPrefix = "OPEN_CONDUIT_"

// reservedEnvName reports whether the host reserves the variable name.
func reservedEnvName(s string) bool {
	if strings.HasPrefix(s, reservedEnvPrefix) {
		return true
	}
	for _, r := range reservedEnv {
		if r == s {
			return true
		}
	}
	return false
}

// validOperationName reports whether s has the shape of an operation name.
func validOperationName(s string) bool {
	return len(s) <= 200 && extension.OperationName(s) == nil
}

// validToolsetName reports whether s has the shape of a toolset name:
// <registration>.<role>, so at least two segments.
func validToolsetName(s string) bool {
	return validOperationName(s) && strings.Contains(s, ".")
}

// validEventType reports whether s is a namespaced event type or source:
// at least two dot-separated segments of lower-case letters, digits, '-'
// and '_', each starting with a letter.
func validEventType(s string) bool {
	return validToolsetName(s)
}

// validMatchType reports whether s is a route's type pattern: an exact
// event type (a.b) or a prefix (a.*, a.b.*).
func validMatchType(s string) bool {
	if prefix, ok := strings.CutSuffix(s, ".*"); ok {
		return validOperationName(prefix)
	}
	return validEventType(s)
}

// validPlaybookName reports whether s names a playbook (a skill directory):
// the same rule as a secret name.
func validPlaybookName(s string) bool { return validSecretName(s) }

// fieldShaped reports whether an unknown member name looks like a field
// name, and so is safe to show in a pointer: [a-z][a-z0-9_]{0,63}.
func fieldShaped(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
		case i > 0 && (c >= '0' && c <= '9' || c == '_'):
		default:
			return false
		}
	}
	return true
}

// freeKeyShaped reports whether a member name inside a free-form value (an
// executor's config) is safe to show in a pointer:
// [A-Za-z_][A-Za-z0-9_-]{0,63}.
func freeKeyShaped(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}
