// Package extension holds the public contracts between Open Conduit's host
// and the extensions that add operations to the toolbelt: the Toolbelt an
// execution calls, the Registration an extension hands to the host, its
// Operations, Toolsets and Playbooks, the Actions an operator asks it for (never
// served to an execution), the Gate seam, its Ingress (a Webhook one
// served by the host at its own path), the OperationError a handler
// returns, the naming rules, and the sentinel errors every layer maps to
// stable codes.
//
// It must never import anything from internal/: extensions build against
// this package alone, and it must never carry a token's plaintext in any
// value it hands to an extension.
package extension
