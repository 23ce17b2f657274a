package daemon

import (
	"fmt"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon/introspectport"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// ReleaseRegistry is bootstrap.ReleaseRegistry with the operations and
// toolsets of the extensions the release bundles (bootstrap.Extensions):
// what an offline configuration check validates against, as the daemon
// does.
func ReleaseRegistry() (*config.Registry, error) {
	reg := bootstrap.ReleaseRegistry()
	host := toolbelt.NewHost(reg)
	for _, ext := range bootstrap.Extensions(bootstrap.Ports{}) {
		if err := host.Register(ext); err != nil {
			return nil, fmt.Errorf("cannot register extension %s: %w", ext.Name, err)
		}
	}
	return reg, nil
}

// registerRelease registers the release's extensions on the host, once
// storage is open and before the configuration is restored (which
// validates against the registry). Their ports read the configuration
// when called, once it is restored.
func (d *Daemon) registerRelease() error {
	ports := bootstrap.Ports{Introspection: &introspectport.Port{
		Store: d.store,
		Reads: func(scope, read string) bool { return d.cfg.Active().AuthorizeRead(scope, read) },
	}}
	for _, ext := range bootstrap.Extensions(ports) {
		if err := d.host.Register(ext); err != nil {
			return fmt.Errorf("cannot register extension %s: %w", ext.Name, err)
		}
	}
	return nil
}
