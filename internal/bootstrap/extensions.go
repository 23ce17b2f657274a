package bootstrap

import "github.com/open-conduit/open-conduit/extension"

//go:generate go test -run ^(TestOperationsReference|TestToolsetsOnlyGain)$ -update .

// Extensions returns the extensions this release bundles, which the
// daemon command registers on its host: their operations, toolsets and
// playbooks are part of the release's registry, so docs/operations.md
// lists them and a test holds every bundled toolset to the members it had
// (testdata/toolsets.json). The release bundles none yet.
func Extensions() []extension.Registration {
	return nil
}
