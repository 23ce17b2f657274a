package daemon

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// followStore keeps this daemon in step with the other daemons of a store
// they share (one that is a storage.Watcher; on SQLite it returns at
// once): on every announcement of a configuration generation, on every
// (re)connection of the watcher and at every sweep interval as a
// backstop, it serves the store's latest generation (configsvc's Follow,
// which runs the apply hooks: limits, the token cache, playbooks,
// ingresses); on an announced token revocation it empties the token
// cache. It runs until ctx ends.
func (d *Daemon) followStore(ctx context.Context) {
	w, ok := d.raw.(storage.Watcher)
	if !ok || d.follow == nil {
		return
	}
	go d.announceWork(ctx, w)
	topics := w.Watch(ctx, storage.TopicConfig, storage.TopicTokens, storage.TopicWork)
	backstop := time.NewTicker(d.opts.SweepInterval)
	defer backstop.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case t, ok := <-topics:
			if !ok {
				return
			}
			switch t {
			case storage.TopicConfig:
				d.followConfig(ctx)
			case storage.TopicTokens:
				d.tb.InvalidateTokens()
			case storage.TopicWork:
				if !d.opts.deafToWork {
					d.Wake()
				}
			}
		case <-backstop.C:
			d.followConfig(ctx)
		}
	}
}

// announceWork announces storage.TopicWork for each wake wakeAll queued,
// one at a time, until ctx ends: wakes that come while one is announced
// become one more announcement. A failed announcement costs the other
// daemons only latency (their next tick claims), so it is logged at debug
// level.
func (d *Daemon) announceWork(ctx context.Context, w storage.Watcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.announce:
			if err := w.Notify(ctx, storage.TopicWork); err != nil && ctx.Err() == nil {
				d.log.Debug("announcing new Work to the other daemons failed; their next tick claims it", "error", err.Error())
			}
		}
	}
}

// followConfig serves the store's latest generation if another daemon
// committed one.
func (d *Daemon) followConfig(ctx context.Context) {
	if _, err := d.follow(ctx); err != nil && ctx.Err() == nil {
		d.log.Error("cannot serve the configuration generation another daemon committed; this daemon keeps the one it serves, and its toolbelt refuses calls until it can", "error", err.Error())
	}
	if d.opts.followed != nil {
		d.opts.followed()
	}
}

// onListen logs the store watcher's connection.
func (d *Daemon) onListen(err error) {
	if err != nil {
		d.log.Warn("lost the store's notifications; reconnecting (configuration generations are read again meanwhile at every sweep)", "error", err.Error())
		return
	}
	d.log.Debug("listening for the store's notifications")
}

// announcingTokens is the management server's view of the toolbelt's
// tokens on a shared store: a revocation is announced (TopicTokens)
// once it committed, so the daemon that serves the token's execution
// drops its cached tokens.
type announcingTokens struct {
	management.ExecutionTokens
	w   storage.Watcher
	log func(msg string, args ...any)
}

func (a announcingTokens) Revoke(ctx context.Context, id string, at time.Time) error {
	if err := a.ExecutionTokens.Revoke(ctx, id, at); err != nil {
		return err
	}
	if err := a.w.Notify(context.WithoutCancel(ctx), storage.TopicTokens); err != nil {
		a.log("cannot announce a token's revocation to the other daemons; they drop it from their caches at their next generation or reconnection", "error", err.Error())
	}
	return nil
}

// ownerTokenAdvice logs what the operator of a daemon whose token file
// does not hold the owner's credential does (BootstrapStale). On a store
// only this daemon uses, that is auth recover. On a shared store the
// owner's credential is usually another daemon's: this one was started
// with an empty state directory, or the token was rotated through
// another daemon; copying that daemon's token file is the way, and
// recovering would revoke the owner's token at every daemon.
func (d *Daemon) ownerTokenAdvice() {
	path := statedir.OwnerTokenPath(d.state)
	if _, ok := d.raw.(storage.Watcher); !ok {
		d.log.Warn("the owner's token file does not hold the owner's credential; stop the daemon and run 'open-conduit auth recover'", "token_file", path)
		return
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		d.log.Info("the owner's credential was issued by another daemon sharing this store; to use this daemon as the owner, copy the owner's token file of a daemon that holds it here (owner-only, 0600), or have an admin issue a credential for this host through any daemon (open-conduit auth operators add NAME); 'open-conduit auth recover --store …' would revoke the owner's token at every daemon",
			"token_file", path)
		return
	}
	d.log.Warn("the owner's token file does not hold the owner's credential: it was probably rotated through another daemon sharing this store; copy the current token file of the daemon it was rotated through here (0600), or run 'open-conduit auth recover --store …' with this daemon stopped, which revokes the owner's token at every daemon",
		"token_file", path)
}
