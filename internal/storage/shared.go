package storage

import "context"

// Topic names a kind of change in a store that several daemons share,
// which each of them must hear about because it keeps something of it in
// memory. A topic is lower-case letters only; an engine turns it into its
// own channel name.
type Topic string

// Topics of shared stores.
const (
	// TopicConfig: a configuration generation was committed. The engine
	// announces it itself, in the transaction that inserts the generation
	// (InsertGeneration), so every path that changes the active generation
	// announces it, and only once it committed.
	TopicConfig Topic = "config"
	// TopicTokens: an execution token was revoked through a daemon other
	// than the one serving its execution, whose cache of live tokens must
	// let it go. The revoking daemon announces it after the revocation
	// committed (Notify).
	TopicTokens Topic = "tokens"
	// TopicWork: a request wrote something that can start or wake Work (a
	// Work created, readied, retried, an input queued, a timer fired …;
	// scheduler.WakeOnWrites), so every daemon's scheduler runs a round
	// now rather than at its next tick. The writing daemon announces it
	// after the commit (Notify), coalesced: one announcement in flight,
	// one pending.
	TopicWork Topic = "work"
)

// Watcher is implemented by a store several daemons share (PostgreSQL)
// and not by one only a single daemon uses (SQLite): there is no other
// daemon to hear from. It is optional: a daemon asks its store whether it
// is one.
//
// A notification is a hint, never a record: it carries nothing but its
// topic, may be coalesced with others of the same topic, and may be lost
// while the watcher is disconnected, so whoever watches reads the store
// for what changed, and reads it again on every (re)connection and now and
// then as a backstop.
type Watcher interface {
	// Watch delivers a topic of topics each time another store (or this
	// one) announces it, until ctx ends, then closes the channel. Each
	// topic is also delivered once whenever the watcher (re)connects,
	// since what was announced while it was away is not delivered. Topics
	// not taken from the channel yet are coalesced: a slow reader gets
	// each pending topic once, never a backlog.
	Watch(ctx context.Context, topics ...Topic) <-chan Topic
	// Notify announces topic to every watcher of the store now (outside
	// any transaction).
	Notify(ctx context.Context, topic Topic) error
}

// ConfigDocuments is implemented by a store several daemons share: it
// keeps the document of every configuration generation, by its canonical
// hash, so that a daemon can load a generation another daemon committed.
// A store only one daemon uses does not: that daemon keeps its documents
// in its state directory. A document holds secret references (never a
// secret's value); Generation's Normalized stays the redacted form.
type ConfigDocuments interface {
	// PutConfigDocument keeps document under hash; a document already
	// kept under hash is left as it is.
	PutConfigDocument(ctx context.Context, hash string, document []byte) error
	// ConfigDocument returns the document kept under hash (ErrNotFound
	// when none is).
	ConfigDocument(ctx context.Context, hash string) ([]byte, error)
}
