package extension

import "fmt"

// Toolset is a named set of an extension's operations for one role (an
// issue's author, a PR's reviewer). Config grants it as @<name>. A toolset
// only gains operations from one release to the next.
type Toolset struct {
	// Name is <registration>.<role>, in its extension's namespace.
	Name string
	// Operations lists the operations it grants: the extension's own or
	// builtins.
	Operations []ToolsetOperation
}

// ToolsetOperation is one member of a toolset and the version it joined in.
type ToolsetOperation struct {
	Name  string
	Since string
}

// Names returns the operation names of the toolset, in order.
func (t Toolset) Names() []string {
	out := make([]string, len(t.Operations))
	for i, op := range t.Operations {
		out[i] = op.Name
	}
	return out
}

// CheckToolset checks that a toolset is named in the registration reg's
// namespace and grants only reg's own operations and builtins.
func CheckToolset(reg string, t Toolset) error {
	if !OwnsOperation(reg, t.Name) {
		return fmt.Errorf("%w: toolset %s is outside the namespace of %s", ErrInvalid, t.Name, reg)
	}
	for _, op := range t.Operations {
		if !IsBuiltin(op.Name) && !OwnsOperation(reg, op.Name) {
			return fmt.Errorf("%w: toolset %s grants %s, which %s does not own", ErrInvalid, t.Name, op.Name, reg)
		}
	}
	return nil
}
