package config

import (
	"fmt"
	"strconv"
	"strings"
)

// An operation list holds operation names, toolsets as @<name>, and either
// denied with a leading !. Resolving it gives operation names: what it names
// and its toolsets' registered operations, in order, less what it denies.

// entry is one parsed element of an operation list.
type entry struct {
	deny    bool
	toolset bool
	name    string
}

func parseEntry(s string) (entry, bool) {
	var e entry
	s, e.deny = strings.CutPrefix(s, "!")
	s, e.toolset = strings.CutPrefix(s, "@")
	e.name = s
	if e.toolset {
		return e, validToolsetName(s)
	}
	return e, validOperationName(s)
}

// authority is a resolved ceiling: the operations it grants, in order, and
// the ones it or an ancestor denies with !. An unlimited authority checks
// nothing: it stands above a root scope, and above a scope whose ancestry is
// already reported broken.
type authority struct {
	unlimited bool
	ops       []string
	grants    map[string]bool
	denied    map[string]bool
}

var unlimited = &authority{unlimited: true}

func newAuthority(ops []string, denied map[string]bool) *authority {
	a := &authority{ops: ops, grants: make(map[string]bool, len(ops)), denied: denied}
	for _, op := range ops {
		a.grants[op] = true
	}
	return a
}

// narrow resolves a list that must stay inside a. Denials of the list are
// added to a's to make the denials of the authority the list defines.
func (a *authority) narrow(list []string, reg *Registry) (*authority, []listProblem) {
	ops, denied, problems := resolveList(list, reg, a)
	all := map[string]bool{}
	for op := range a.denied {
		all[op] = true
	}
	for _, op := range denied {
		all[op] = true
	}
	return newAuthority(ops, all), problems
}

// listProblem is a problem with the element at index idx of a list.
type listProblem struct {
	idx    int
	code   Code
	remedy string
}

const (
	remedyEntry           = "an entry is an operation name (emit, github.pr.create), a toolset (@github.author), or either denied with a leading ! (!github.pr.merge)"
	remedyUnknownOp       = "no registered operation has this name: correct it, or register the extension that provides it"
	remedyUnknownToolset  = "no registered toolset has this name: correct it, or register the extension that publishes it"
	remedyOperationDenied = "the ceiling denies this operation with !: remove it here, or lift the denial in the scope (or parent scope) that denies it"
	remedyWidening        = "the ceiling does not grant this operation: remove it here, or grant it first in the scope's (or parent scope's) authorization.operations"
)

// resolveList resolves list against reg inside within. It returns the
// granted operations (first occurrence order, less the denied), the
// operations the list denies, and a problem for each element that is
// malformed, unknown, or names an operation outside the ceiling. A toolset
// is narrowed to the ceiling, never refused for exceeding it.
func resolveList(list []string, reg *Registry, within *authority) (ops, denied []string, problems []listProblem) {
	added := map[string]bool{}
	deniedSet := map[string]bool{}
	add := func(op string) {
		if !added[op] {
			added[op] = true
			ops = append(ops, op)
		}
	}
	deny := func(op string) {
		if !deniedSet[op] {
			deniedSet[op] = true
			denied = append(denied, op)
		}
	}
	for i, raw := range list {
		e, ok := parseEntry(raw)
		switch {
		case !ok:
			problems = append(problems, listProblem{i, CodeInvalidValue, remedyEntry})
		case e.toolset:
			if _, known := reg.toolsets[e.name]; !known {
				problems = append(problems, listProblem{i, CodeUnknownReference, remedyUnknownToolset})
				continue
			}
			for _, op := range reg.toolsetOperations(e.name) {
				switch {
				case e.deny:
					deny(op)
				case within.unlimited || within.grants[op]:
					add(op)
				}
			}
		default:
			if _, known := reg.operations[e.name]; !known {
				problems = append(problems, listProblem{i, CodeUnknownReference, remedyUnknownOp})
				continue
			}
			switch {
			case e.deny:
				deny(e.name)
			case within.unlimited:
				add(e.name)
			case within.denied[e.name]:
				problems = append(problems, listProblem{i, CodeOperationDenied, remedyOperationDenied})
			case !within.grants[e.name]:
				problems = append(problems, listProblem{i, CodeAuthorityWidening, remedyWidening})
			default:
				add(e.name)
			}
		}
	}
	if len(deniedSet) > 0 {
		kept := ops[:0:0]
		for _, op := range ops {
			if !deniedSet[op] {
				kept = append(kept, op)
			}
		}
		ops = kept
	}
	return ops, denied, problems
}

// ListError is an operation list that does not resolve: one diagnostic per
// bad element, with a pointer relative to the list (/3).
type ListError struct {
	Problems []Diagnostic
}

func (e *ListError) Error() string {
	if len(e.Problems) == 0 {
		return "config: operation list does not resolve"
	}
	return fmt.Sprintf("config: operation list does not resolve: %d problems; first: %s", len(e.Problems), e.Problems[0])
}

// ResolveOperations turns an operation list into operation names against
// reg: what it names and its toolsets' registered operations, in order,
// less what it denies. A malformed or unknown entry (operation, toolset or
// denial) is an error, so that a typo never grants, nor fails to deny.
func ResolveOperations(list []string, reg *Registry) ([]string, error) {
	if reg == nil {
		reg = NewRegistry()
	}
	ops, _, problems := resolveList(list, reg.snapshot(), unlimited)
	if len(problems) > 0 {
		e := &ListError{}
		for _, p := range problems {
			e.Problems = append(e.Problems, Diagnostic{Pointer: "/" + strconv.Itoa(p.idx), Code: p.code, Remedy: p.remedy})
		}
		return nil, e
	}
	if ops == nil {
		ops = []string{}
	}
	return ops, nil
}
