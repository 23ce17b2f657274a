package config

import (
	"regexp"
	"strings"

	"github.com/open-conduit/open-conduit/extension"
)

// The naming rules of the format, each in one place.
var (
	// An id of a scope, binding, grant or route.
	idRule = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	// A secret or playbook name: like an id, and '_' too, since such names
	// often mirror variable names.
	nameRule = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	// An environment variable a binding may set.
	envNameRule = regexp.MustCompile(`^[A-Z_][A-Z0-9_]{0,127}$`)
	// An unknown member that looks like a field name, safe to show.
	fieldRule = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	// A member name inside an executor's free-form config, safe to show.
	freeKeyRule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
)

// maxIDLen is the longest id: a letter and up to 62 more characters.
const maxIDLen = 63

func validID(s string) bool           { return idRule.MatchString(s) }
func validSecretName(s string) bool   { return nameRule.MatchString(s) }
func validPlaybookName(s string) bool { return nameRule.MatchString(s) }
func validEnvName(s string) bool      { return envNameRule.MatchString(s) }
func fieldShaped(s string) bool       { return fieldRule.MatchString(s) }
func freeKeyShaped(s string) bool     { return freeKeyRule.MatchString(s) }
func validExtensionName(s string) bool {
	return len(s) <= maxIDLen && extension.RegistrationName(s) == nil
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
func validEventType(s string) bool { return validToolsetName(s) }

// validMatchType reports whether s is a route's type pattern: an exact
// event type (a.b) or a prefix (a.*, a.b.*).
func validMatchType(s string) bool {
	if prefix, ok := strings.CutSuffix(s, ".*"); ok {
		return validOperationName(prefix)
	}
	return validEventType(s)
}
