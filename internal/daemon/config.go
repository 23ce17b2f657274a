package daemon

import (
	"context"

	"github.com/open-conduit/open-conduit/internal/config"
)

// ConfigFile is the configuration file's name in the state directory.
const ConfigFile = "config.json"

// configSource is what the daemon needs of the configuration service
// (configsvc.Service): the active snapshot (asked on every
// toolbelt call and route), the snapshot an attempt is pinned to, and a
// hook run when an apply publishes a new generation.
type configSource interface {
	Active() *config.Snapshot
	Snapshot(ctx context.Context, generation int64) (*config.Snapshot, error)
	OnApply(fn func(*config.Snapshot))
}
