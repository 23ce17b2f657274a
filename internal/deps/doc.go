// Package deps holds the dependency rules of the module: which packages
// each layer may import, checked by its test against every package's
// imports (in the spirit of the Go tree's go/build/deps_test.go).
//
// It has no code of its own and must never be imported: the rules are a
// test, so a new import that breaks a layer fails the build's tests
// instead of waiting for a reviewer to notice.
package deps
