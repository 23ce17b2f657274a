package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/extensions/github"
	"github.com/open-conduit/open-conduit/extensions/human"
	"github.com/open-conduit/open-conduit/extensions/slack"
	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
	"github.com/open-conduit/open-conduit/internal/daemon/humanport"
	"github.com/open-conduit/open-conduit/internal/daemon/introspectport"
	"github.com/open-conduit/open-conduit/internal/toolbelt"
)

// resolver resolves an extension's operations list against reg, its
// problems placed inside the list.
func resolver(reg *config.Registry) func([]string) ([]string, error) {
	return func(list []string) ([]string, error) {
		ops, err := config.ResolveOperations(list, reg)
		var le *config.ListError
		if errors.As(err, &le) {
			ce := &extension.ConfigError{}
			for _, p := range le.Problems {
				ce.Problems = append(ce.Problems, extension.ConfigProblem{Pointer: p.Pointer, Code: string(p.Code), Remedy: p.Remedy})
			}
			return nil, ce
		}
		return ops, err
	}
}

// ReleaseRegistry is bootstrap.ReleaseRegistry with the operations and
// toolsets of the extensions the release bundles (bootstrap.Extensions):
// what an offline configuration check validates against, as the daemon
// does.
func ReleaseRegistry() (*config.Registry, error) {
	reg := bootstrap.ReleaseRegistry()
	host := toolbelt.NewHost(reg)
	for _, ext := range bootstrap.Extensions(bootstrap.Ports{Human: human.Options{Resolve: resolver(reg)}}) {
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
	}
	// The Slack extension reads the Work's thread through the same
	// read-only port: a Work and the Events that made it.
	ports := bootstrap.Ports{Introspection: intro, GitHub: &github.Extension{Now: d.clock.Now}, Slack: &slack.Extension{Port: intro, Now: d.clock.Now}}
	// The kernel runtime the human port routes its Events with exists
	// once the configuration is restored; it is set then (d.human).
	d.human = &humanport.Port{Store: d.store, IDs: d.ids}
	ports.Human = human.Options{
		Port: d.human, Resolve: resolver(d.opts.Registry), Now: d.clock.Now,
		ConfigAt: func(ctx context.Context, generation int64) (json.RawMessage, error) {
			snap, err := snapshotAt(ctx, d.cfg, generation)
			if err != nil {
				return nil, err
			}
			if e, ok := snap.Extension(human.Name); ok && len(e.Config) > 0 {
				return e.Config, nil
			}
			return json.RawMessage(`{}`), nil
		},
	}
	for _, ext := range bootstrap.Extensions(ports) {
		if err := d.host.Register(ext); err != nil {
			return fmt.Errorf("cannot register extension %s: %w", ext.Name, err)
		}
		d.regs = append(d.regs, ext)
	}
	return nil
}
