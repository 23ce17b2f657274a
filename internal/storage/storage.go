// Package storage is Open Conduit's coordination storage: the durable record
// of what happened (Events), what must be done (Work, its keys and queued
// inputs), who is doing it right now (executions, with a lease and an epoch),
// what a piece of work declared and is waiting for (declarations, waits,
// timers), and what an execution produced (artifacts).
//
// It defines the Store interface that every engine implements (SQLite, in
// package sqlite, is the embedded default) and the record and parameter types
// those engines share. One transaction entry point, Store.WithTx, groups the
// writes that belong together; every query takes a *Params struct. Updates of
// executions, Work, waits and timers are compare-and-set: they name the state
// (and the epoch and owner) they expect, and fail with ErrFenced when the row
// has moved on, so a superseded attempt can never act.
//
// It must never decide anything: it does not know what a route, a binding or
// an operator is, never reads the clock (callers pass every timestamp), never
// knows HTTP, and never stores a secret or a token's plaintext.
package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-conduit/open-conduit/extension"
)

// Sentinel errors. Engines translate their own errors (sql.ErrNoRows, unique
// constraint violations) into these at the driver edge, so callers use
// errors.Is and never look at engine errors.
var (
	// ErrNotFound: no record has the given identity.
	ErrNotFound = fmt.Errorf("storage: %w", extension.ErrNotFound)
	// ErrDuplicate: the write would break a uniqueness rule (an event id, a
	// delivery identity, a key owned by another nonterminal Work, a second
	// pending declaration of an execution).
	ErrDuplicate = fmt.Errorf("storage: duplicate: %w", extension.ErrConflict)
	// ErrFenced: a compare-and-set update found the row in another state,
	// epoch, owner or revision than the caller named; nothing was written.
	ErrFenced = fmt.Errorf("storage: fenced: %w", extension.ErrConflict)
)

// IsNotFound reports whether err is (or wraps) ErrNotFound.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Store is a coordination store. Its Reader methods read outside any write
// transaction (engines may serve them from a pool of readers, so they see the
// last committed state); WithTx runs fn in the single write transaction.
type Store interface {
	Reader
	// WithTx runs fn in a write transaction and commits it when fn returns
	// nil. When fn returns an error (or panics) the transaction is rolled
	// back, even if ctx has ended, and the error is returned unchanged.
	// Writes are serialised: one WithTx runs at a time.
	WithTx(ctx context.Context, fn func(tx Tx) error) error
	// ArtifactBlobs is where the engine keeps the bytes of artifacts, dir
	// being the daemon's own directory for them: FileBlobs(dir) keeps them
	// there, ChunkBlobs keeps them in the database (dir holds only bytes
	// on their way in), so that every daemon on it reads them.
	ArtifactBlobs(dir string) (Blobs, error)
	// Close releases the store. It must not be used afterwards.
	Close() error
}

// Reader holds the queries. Inside a transaction they see the transaction's
// own writes.
type Reader interface {
	ToolbeltReader
	ManagementReader
	ApprovalReader
	EgressReader
	DutyReader
	GetEvent(ctx context.Context, id string) (Event, error)
	GetEventBySeq(ctx context.Context, seq int64) (Event, error)
	GetEventByDelivery(ctx context.Context, source, deliveryID string) (Event, error)
	ListEvents(ctx context.Context, p *ListEventsParams) ([]Event, error)
	// FindEvent returns the first event (lowest seq) matching p, or
	// ErrNotFound. Waits use it to backscan the events accepted since their
	// watermark.
	FindEvent(ctx context.Context, p *FindEventParams) (Event, error)
	// LastSeq is the highest acceptance sequence, 0 for an empty record.
	LastSeq(ctx context.Context) (int64, error)
	GetCausalRoot(ctx context.Context, root string) (CausalRoot, error)

	GetWork(ctx context.Context, id string) (Work, error)
	ListWork(ctx context.Context, p *ListWorkParams) ([]Work, error)
	// ListClaimable lists ready, unheld Work whose previous attempt is not
	// still stopping, oldest first.
	ListClaimable(ctx context.Context, limit int) ([]Work, error)
	// GetKeyOwner returns the nonterminal Work that owns key in scope.
	GetKeyOwner(ctx context.Context, scope, key string) (Work, error)
	// ListWorkKeys lists the keys a Work currently owns, sorted.
	ListWorkKeys(ctx context.Context, workID string) ([]string, error)
	// ListKeysEverOwned lists every key the Work has owned, released or
	// not, sorted (a retry takes them back).
	ListKeysEverOwned(ctx context.Context, workID string) ([]string, error)
	ListInputs(ctx context.Context, p *ListInputsParams) ([]Input, error)

	GetExecution(ctx context.Context, id string) (Execution, error)
	ListExecutions(ctx context.Context, p *ListExecutionsParams) ([]Execution, error)
	// GetLiveExecution returns the Work's execution that is not finished
	// (running, parked or stopping), or ErrNotFound.
	GetLiveExecution(ctx context.Context, workID string) (Execution, error)
	// CountLeased counts the running and stopping executions owner holds.
	CountLeased(ctx context.Context, owner string) (int, error)
	GetDeclaration(ctx context.Context, executionID string, epoch int64) (Declaration, error)
	// GetPendingDeclaration returns the execution's declaration that has not
	// been applied yet (at most one exists), or ErrNotFound.
	GetPendingDeclaration(ctx context.Context, executionID string) (Declaration, error)
	// GetCallGuard reads what the lease guard of a segment's call checks
	// (see CallGuard) in one statement: GetExecution, GetWork of its
	// Work, GetPendingDeclaration and LatestGeneration at once, all of the
	// same snapshot, so that a toolbelt call's guard costs one statement
	// in the writer instead of four. ErrNotFound when the execution does
	// not exist. In a transaction it sees the transaction's writes, and
	// the transaction keeps the execution and Work rows it read (see
	// TxRows), as if GetExecution and GetWork had read them.
	GetCallGuard(ctx context.Context, executionID string) (CallGuard, error)

	GetWait(ctx context.Context, id string) (Wait, error)
	// GetActiveWait returns the Work's active Wait (at most one), or
	// ErrNotFound.
	GetActiveWait(ctx context.Context, workID string) (Wait, error)
	ListWaits(ctx context.Context, p *ListWaitsParams) ([]Wait, error)
	// ListActiveWaitsByKey lists the active waits in scope that name key
	// explicitly.
	ListActiveWaitsByKey(ctx context.Context, scope, key string) ([]Wait, error)
	GetTimer(ctx context.Context, id string) (Timer, error)
	ListDueTimers(ctx context.Context, now time.Time, limit int) ([]Timer, error)

	GetArtifact(ctx context.Context, id string) (Artifact, error)
	ListArtifacts(ctx context.Context, p *ListArtifactsParams) ([]Artifact, error)
	// GetArtifactChunk returns chunk seq of an artifact's bytes kept in
	// the database, or ErrNotFound (always, on an engine that keeps them
	// as files).
	GetArtifactChunk(ctx context.Context, id string, seq int64) ([]byte, error)
}

// Keeper is implemented by a Tx that keeps the Work and execution rows it
// read or wrote (TxRows): Kept returns them without a statement, as the
// transaction sees them now, or false when it holds none for the id.
type Keeper interface {
	KeptWork(id string) (Work, bool)
	KeptExecution(id string) (Execution, bool)
}

// Tx is the write transaction. Its Reader methods see its own writes.
type Tx interface {
	ToolbeltTx
	ManagementTx
	ApprovalTx
	EgressTx
	DutyTx
	Reader

	// InsertEvent appends an event. The engine assigns Seq: the next
	// number after the highest committed one, so that the sequence has no
	// gaps. ErrDuplicate when the id or (source, delivery id) is taken;
	// for a Fresh event, the transaction fails instead (see Fresh).
	InsertEvent(ctx context.Context, p *InsertEventParams) (Event, error)
	// InsertCausalRoot pins a root's limits; ErrDuplicate if pinned.
	InsertCausalRoot(ctx context.Context, r *CausalRoot) error
	// UpdateCausalWindow moves a root's rate window; ErrFenced when the
	// window is no longer the one the caller read.
	UpdateCausalWindow(ctx context.Context, p *UpdateCausalWindowParams) error
	// CountCausal counts one derived event against its pinned root, in
	// one statement, when the event is within the root's limits: its
	// depth at most MaxDepth, and fewer than PerMinute counted in the
	// window, which starts again at Now when a minute or more has passed
	// since it started or Now is before it. It returns the root as
	// counted. ErrFenced, having written nothing, when the root is not
	// pinned or the event is over a limit: the caller reads the root to
	// learn which (GetCausalRoot).
	CountCausal(ctx context.Context, p *CountCausalParams) (CausalRoot, error)

	// ReadCallGuardsAhead tells the transaction the executions whose call
	// guards it is about to read (GetCallGuard), one after the other, with
	// writes between. An engine may read them all now, in one statement,
	// and answer each GetCallGuard from that read while no statement
	// since may have changed what the guard says; GetCallGuard answers
	// the same either way. An id without an execution is left to
	// GetCallGuard to report.
	ReadCallGuardsAhead(ctx context.Context, executionIDs []string) error

	InsertWork(ctx context.Context, p *InsertWorkParams) (Work, error)
	// UpdateWork changes a Work if it is still in one of FromStates (and at
	// Revision, when given), and bumps its revision; ErrFenced otherwise.
	UpdateWork(ctx context.Context, p *UpdateWorkParams) (Work, error)
	// ClaimWork moves, in one statement, each listed Work that is still
	// ready, not held and at its listed Revision to running: its input
	// watermark becomes its input count, it counts one more attempt, and
	// its revision is bumped at Now. It returns the rows it moved, in no
	// particular order; a Work it did not move (changed since it was
	// listed, held, not ready, unknown) is left as it was.
	//
	// With Listed the claim is all or none: every listed row that is
	// still as listed (its Revision), ready and not held moves, and the
	// rows returned are the listed rows as the claim leaves them. Should
	// any of them have moved on, an error matching ErrFenced fails the
	// transaction: ClaimWork's own (which its caller returns), or, since
	// a store may answer from the listed rows and send the statement with
	// the caller's next one, a later statement's, or WithTx's when the
	// claim was the caller's last write.
	ClaimWork(ctx context.Context, p *ClaimWorkParams) ([]Work, error)
	// AcquireKey makes a Work the owner of a key in its scope;
	// ErrDuplicate when another Work owns it. Owning it already is fine.
	AcquireKey(ctx context.Context, p *AcquireKeyParams) error
	// ReleaseKeys releases every key the Work owns.
	ReleaseKeys(ctx context.Context, workID string, at time.Time) error
	// QueueInput appends an event to the Work's inputs. Queuing the same
	// event twice returns the first Input and does not add another.
	QueueInput(ctx context.Context, p *QueueInputParams) (Input, error)

	InsertExecution(ctx context.Context, p *InsertExecutionParams) (Execution, error)
	// InsertExecutions inserts, in one statement, each new execution as
	// InsertExecution would, and returns those it inserted, in no
	// particular order; one it refused (its id taken, or its Work already
	// has a live execution) inserts nothing, and the caller tells which
	// by what is missing.
	InsertExecutions(ctx context.Context, ps []InsertExecutionParams) ([]Execution, error)
	// AdvanceEpoch starts the next epoch of an execution (claim of a parked
	// one, recovery, adoption): epoch FromEpoch+1 under a new owner and
	// lease, with no exit code (nobody has observed the new epoch's end).
	// ErrFenced unless the execution is still at FromEpoch in one of
	// FromStates (and, when given, its lease expired by ExpiredBy).
	AdvanceEpoch(ctx context.Context, p *AdvanceEpochParams) (Execution, error)
	// RenewLease extends a lease held by Owner at Epoch that is still valid
	// at ValidAt; ErrFenced otherwise.
	RenewLease(ctx context.Context, p *RenewLeaseParams) (Execution, error)
	// UpdateExecution changes an execution at Epoch (held by Owner, when
	// given) in one of FromStates; ErrFenced otherwise.
	UpdateExecution(ctx context.Context, p *UpdateExecutionParams) (Execution, error)
	// MarkLaunched records, in one statement, that the segment of each
	// launch is handed to its executor now (LaunchedEpoch becomes its
	// Epoch), for each launch whose execution is still at its Epoch, held
	// by Owner, and running or stopping. It returns the executions it
	// marked, in no particular order; a launch it did not mark
	// (superseded, finished, held by another owner, unknown) is left as
	// it was.
	MarkLaunched(ctx context.Context, p *MarkLaunchedParams) ([]string, error)

	// InsertDeclaration records a segment's declaration; ErrDuplicate when
	// the epoch already declared or the execution has a pending one.
	InsertDeclaration(ctx context.Context, d *Declaration) error
	// MarkDeclarationApplied records that Complete applied (or discarded)
	// a declaration; ErrFenced when it was already.
	MarkDeclarationApplied(ctx context.Context, p *MarkDeclarationAppliedParams) error

	// InsertWait registers a Wait; ErrDuplicate when the Work has an
	// active one.
	InsertWait(ctx context.Context, p *InsertWaitParams) (Wait, error)
	// UpdateWait moves an active Wait to another state; ErrFenced when it
	// is no longer active.
	UpdateWait(ctx context.Context, p *UpdateWaitParams) (Wait, error)
	InsertTimer(ctx context.Context, t *Timer) error
	// FireTimer marks a timer fired; ErrFenced when it already fired.
	FireTimer(ctx context.Context, id string, at time.Time) error

	InsertArtifact(ctx context.Context, a *Artifact) error
	// InsertArtifactChunk stores one chunk of the bytes of an artifact
	// inserted before it (ErrNotFound when there is none, ErrDuplicate
	// when the chunk is there); an engine that keeps bytes as files
	// refuses it.
	InsertArtifactChunk(ctx context.Context, c *ArtifactChunk) error
}
