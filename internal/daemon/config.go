package daemon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/open-conduit/open-conduit/internal/bootstrap"
	"github.com/open-conduit/open-conduit/internal/config"
)

// ConfigFile is the configuration file's name in the state directory.
const ConfigFile = "config.json"

// configSource is what the daemon needs of the configuration service: the
// active snapshot (asked on every toolbelt call and route), the snapshot
// an attempt is pinned to, and a hook to rebuild what depends on the
// active generation when an apply publishes a new one.
type configSource interface {
	Active() *config.Snapshot
	Snapshot(ctx context.Context, generation int64) (*config.Snapshot, error)
	OnApply(fn func(*config.Snapshot))
}

// StartConfigError is a configuration that stops the start: the file
// exists but does not validate. It lists every diagnostic; none holds a
// configured value.
type StartConfigError struct {
	Path        string
	Diagnostics []config.Diagnostic
}

func (e *StartConfigError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the configuration file %s does not validate; fix it (check it with 'open-conduit config check %s') and start again:", e.Path, e.Path)
	for _, d := range e.Diagnostics {
		b.WriteString("\n  " + d.String())
	}
	return b.String()
}

// loadStartConfig is the first start's configuration: <state>/config.json
// when it exists (it must validate), else the default configuration,
// which is not written to a file.
func loadStartConfig(stateDir string, reg *config.Registry) (snap *config.Snapshot, fromFile bool, err error) {
	path := filepath.Join(stateDir, ConfigFile)
	data, err := config.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = bootstrap.DefaultConfig()
	case err != nil:
		return nil, false, fmt.Errorf("cannot read the configuration file %s: %w", path, err)
	default:
		fromFile = true
	}
	snap, res := config.Validate(data, reg)
	if snap == nil {
		if !fromFile {
			return nil, false, fmt.Errorf("the default configuration does not validate against this release (a bug): %v", res.Diagnostics)
		}
		return nil, true, &StartConfigError{Path: path, Diagnostics: res.Diagnostics}
	}
	return snap, fromFile, nil
}

// staticConfig is the configuration source until the management config
// service is wired in: the start configuration, active as generation 1,
// never changed while the daemon runs.
type staticConfig struct {
	mu   sync.RWMutex
	snap *config.Snapshot
}

func newStaticConfig(snap *config.Snapshot) *staticConfig {
	snap.Generation = 1
	return &staticConfig{snap: snap}
}

func (c *staticConfig) Active() *config.Snapshot {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.snap
}

func (c *staticConfig) Snapshot(_ context.Context, generation int64) (*config.Snapshot, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if generation != c.snap.Generation {
		return nil, fmt.Errorf("configuration generation %d is not known to this daemon", generation)
	}
	return c.snap, nil
}

func (c *staticConfig) OnApply(func(*config.Snapshot)) {}
