package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/introspection"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon/introspectport"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// releaseExtensions are the extensions the release itself ships, reading
// through the given port (nil: registered for their names only, as an
// offline configuration check needs).
func releaseExtensions(intro introspection.Port) []extension.Registration {
	return []extension.Registration{introspection.Registration(intro)}
}

// ReleaseRegistry is bootstrap.ReleaseRegistry with the operations and
// toolsets of the extensions the release ships: what an offline
// configuration check validates against, as the daemon does.
func ReleaseRegistry() (*config.Registry, error) {
	reg := bootstrap.ReleaseRegistry()
	host := toolbelt.NewHost(reg)
	for _, ext := range releaseExtensions(nil) {
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
	intro := &introspectport.Port{
		Store: d.store,
		Reads: func(scope, read string) bool { return d.cfg.Active().AuthorizeRead(scope, read) },
		EnabledAt: func(ctx context.Context, generation int64, scope string) (bool, error) {
			return enabledAt(ctx, d.cfg, generation, introspection.Name, scope)
		},
	}
	for _, ext := range releaseExtensions(intro) {
		if err := d.host.Register(ext); err != nil {
			return fmt.Errorf("cannot register extension %s: %w", ext.Name, err)
		}
	}
	return nil
}

// enabledAt reports whether the generation enables the extension name for
// scope: its entry is enabled and lists no scopes, or lists scope.
func enabledAt(ctx context.Context, cfg configSource, generation int64, name, scope string) (bool, error) {
	snap, err := snapshotAt(ctx, cfg, generation)
	if err != nil {
		return false, err
	}
	on, scopes := snap.ExtensionEnabled(name)
	return on && (scopes == nil || slices.Contains(scopes, scope)), nil
}
