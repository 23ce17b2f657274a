// Package packages holds installed packages: extensions the release does not
// ship, installed by the operator into the state directory and run as
// processes of their own. This file fixes what the rest of the host knows of
// one: its manifest (the package's declaration of what it provides, the
// permissions it asks for and how to start it), an installed and verified
// package, and the runtime that turns one into a running registration.
// The rest of the package checks a manifest strictly, with diagnostics like
// the configuration's (validate.go), and keeps installed packages under the
// state directory, each pinned by a hash of its files (store.go).
//
// It must never run a package whose files differ from the digest they were
// installed with, never grant a permission the operator did not accept, and
// never hand a package process a token or a secret it was not given by the
// operator's configuration.
package packages
