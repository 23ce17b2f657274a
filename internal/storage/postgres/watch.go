package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/open-conduit/open-conduit/internal/storage"
)

var (
	_ storage.Watcher         = (*Store)(nil)
	_ storage.ConfigDocuments = (*Store)(nil)
)

// Backoff of the watcher's reconnections: doubled from minListenBackoff
// after each failure, up to maxListenBackoff, reset once connected.
const (
	minListenBackoff = 250 * time.Millisecond
	maxListenBackoff = 30 * time.Second
)

// listenApplication names the watchers' connections in pg_stat_activity.
const listenApplication = "open-conduit-watch"

// channel is the PostgreSQL channel of a topic: open_conduit_<topic>.
func channel(t storage.Topic) string { return "open_conduit_" + string(t) }

func validTopic(t storage.Topic) bool {
	if t == "" || len(t) > 40 {
		return false
	}
	for _, r := range t {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}

// Notify announces topic to every watcher of the store's schema: NOTIFY
// open_conduit_<topic>, its payload the schema.
func (s *Store) Notify(ctx context.Context, topic storage.Topic) error {
	if !validTopic(topic) {
		return errors.New("postgres: a topic is lower-case letters only")
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, current_schema())`, channel(topic)); err != nil {
		return fmt.Errorf("postgres: announce %s: %s", topic, engineMessage(err))
	}
	return nil
}

// Watch LISTENs on the topics' channels on a connection of its own
// (outside the pool, which it would otherwise hold for as long as it
// listens), reconnecting after a loss with a backoff on the store's timer
// (Options.After). Each topic is delivered on every (re)connection and
// on each notification of the store's schema. Topics that are not lower-
// case letters are left out.
func (s *Store) Watch(ctx context.Context, topics ...storage.Topic) <-chan storage.Topic {
	w := &watch{s: s, kick: make(chan struct{}, 1), pending: map[storage.Topic]bool{}, byChannel: map[string]storage.Topic{}}
	for _, t := range topics {
		if validTopic(t) && !slices.Contains(w.topics, t) {
			w.topics = append(w.topics, t)
			w.byChannel[channel(t)] = t
		}
	}
	out := make(chan storage.Topic)
	go w.listen(ctx)
	go w.forward(ctx, out)
	return out
}

// watch is one Watch: listen marks topics pending and kicks forward,
// which hands them to the reader one by one, so that the connection is
// read at once whatever the reader does and nothing pending is lost.
type watch struct {
	s         *Store
	topics    []storage.Topic
	byChannel map[string]storage.Topic

	mu      sync.Mutex
	pending map[storage.Topic]bool
	kick    chan struct{}
}

func (w *watch) mark(topics ...storage.Topic) {
	w.mu.Lock()
	for _, t := range topics {
		w.pending[t] = true
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// take returns the pending topics in Watch's order and clears them.
func (w *watch) take() []storage.Topic {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []storage.Topic
	for _, t := range w.topics {
		if w.pending[t] {
			out = append(out, t)
		}
	}
	clear(w.pending)
	return out
}

func (w *watch) forward(ctx context.Context, out chan<- storage.Topic) {
	defer close(out)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		for _, t := range w.take() {
			select {
			case out <- t:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (w *watch) listen(ctx context.Context) {
	backoff := minListenBackoff
	for ctx.Err() == nil {
		err := w.session(ctx, func() { backoff = minListenBackoff })
		if ctx.Err() != nil {
			return
		}
		if w.s.onListen != nil {
			w.s.onListen(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.s.after(backoff):
		}
		backoff = min(2*backoff, maxListenBackoff)
	}
}

// session connects, listens and delivers notifications until the
// connection fails or ctx ends; connected runs once it listens.
func (w *watch) session(ctx context.Context, connected func()) error {
	cfg := w.s.listen.Copy()
	cfg.RuntimeParams["application_name"] = listenApplication
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres: watch: %s", connFailure(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, `SELECT COALESCE(current_schema(), '')`).Scan(&schema); err != nil {
		return fmt.Errorf("postgres: watch: read the schema: %s", engineMessage(err))
	}
	for _, t := range w.topics {
		// A channel is an identifier; its name is fixed text here.
		if _, err := conn.Exec(ctx, `LISTEN `+channel(t)); err != nil {
			return fmt.Errorf("postgres: watch: listen: %s", engineMessage(err))
		}
	}
	connected()
	if w.s.onListen != nil {
		w.s.onListen(nil)
	}
	// Whatever was announced while no connection listened is not
	// delivered: every topic once now.
	w.mark(w.topics...)
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("postgres: watch: the connection was lost: %s", engineMessage(err))
		}
		if t, ok := w.byChannel[n.Channel]; ok && n.Payload == schema {
			w.mark(t)
		}
	}
}

// PutConfigDocument keeps a configuration document under its hash; one
// kept already stays.
func (s *Store) PutConfigDocument(ctx context.Context, hash string, document []byte) error {
	if hash == "" {
		return errors.New("postgres: a configuration document needs its hash")
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO config_documents (hash, document) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		hash, string(document)); err != nil {
		return writeErr(err, "keep a configuration document")
	}
	return nil
}

// ConfigDocument returns the configuration document kept under hash.
func (s *Store) ConfigDocument(ctx context.Context, hash string) ([]byte, error) {
	var doc string
	err := s.pool.QueryRow(ctx, `SELECT document FROM config_documents WHERE hash = $1`, hash).Scan(&doc)
	if err != nil {
		return nil, one(err, "configuration document", hash)
	}
	return []byte(doc), nil
}
