package extension

import (
	"fmt"
	"strings"
)

// Builtins are the operations the host itself serves. They belong to no
// registration and pass no gate.
var Builtins = []string{"emit", "create_work", "wait", "declare_outcome", "read_context"}

// IsBuiltin reports whether op is one of the host's own operations.
func IsBuiltin(op string) bool {
	for _, b := range Builtins {
		if b == op {
			return true
		}
	}
	return false
}

// RegistrationName checks a registration (or package) name: a lower-case
// letter followed by lower-case letters, digits, '-' or '_', with no dot, so
// that two namespaces never nest.
func RegistrationName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: registration name is empty", ErrInvalid)
	}
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
		default:
			return fmt.Errorf("%w: registration name must be a lower-case letter followed by lower-case letters, digits, '-' or '_'", ErrInvalid)
		}
	}
	return nil
}

// OperationName checks the shape of an operation name: dot-separated
// segments of lower-case letters, digits, '-' and '_', each starting with a
// letter. Builtins are single segments; an extension's operations have at
// least two.
func OperationName(op string) error {
	if op == "" {
		return fmt.Errorf("%w: operation name is empty", ErrInvalid)
	}
	for _, seg := range strings.Split(op, ".") {
		if seg == "" {
			return fmt.Errorf("%w: operation name has an empty segment", ErrInvalid)
		}
		for i, r := range seg {
			switch {
			case r >= 'a' && r <= 'z':
			case i > 0 && (r >= '0' && r <= '9' || r == '-' || r == '_'):
			default:
				return fmt.Errorf("%w: operation name segments are lower-case letters, digits, '-' or '_', starting with a letter", ErrInvalid)
			}
		}
	}
	return nil
}

// OwnsOperation reports whether the registration named reg owns op: op is
// <reg>.<suffix> with a non-empty suffix.
func OwnsOperation(reg, op string) bool {
	suffix, ok := strings.CutPrefix(op, reg+".")
	return ok && suffix != "" && OperationName(op) == nil
}
