// Package inproc is the SDK a first-party extension is written on: an
// extension that runs inside the daemon's own process. An extension is a
// value with a registration name (Extension) that implements whichever of
// Operator, Toolsetter, Actioner, Gater, StartGater, Playbooker, OptIn,
// Configurable, ConfigInspector and Ingresser it needs; Registration turns
// it into the one extension.Registration the host registers (operations,
// toolsets, actions, gate, start gate, playbooks, ingress and the check of
// its own configuration at once). DecodeConfig decodes an extension's
// configuration (extensions.<name>.config) strictly, with each problem at
// its place inside it.
//
// It builds on package extension alone and must never import anything
// from internal/: an extension written on it knows the host only through
// the public contracts. It must never hand an extension a token, and its
// diagnostics never quote a configured value.
package inproc
