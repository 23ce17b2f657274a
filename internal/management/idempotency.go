package management

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/open-conduit/open-conduit/extension"
	"github.com/open-conduit/open-conduit/internal/httpapi"
	"github.com/open-conduit/open-conduit/internal/kernel"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// IdempotencyRetention is how long a completed request is remembered.
const IdempotencyRetention = 30 * 24 * time.Hour

// MaxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const MaxIdempotencyKey = 200

// IdempotencyRecord is a completed request kept for replay.
type IdempotencyRecord struct {
	// Principal is the caller's actor (operator:<name>).
	Principal string
	// Key is the effective key (see IdempotencyKey).
	Key string
	// Method and Path (escaped) of the request.
	Method string
	Path   string
	// BodyHash is the hex SHA-256 of the request body in canonical JSON
	// form (RFC 8785), so whitespace and member order do not matter.
	BodyHash string
	// Status and Body are the response that was sent.
	Status    int
	Body      []byte
	CreatedAt time.Time
}

// IdempotencyStore keeps Idempotency-Key history. Records are looked up
// by principal and effective key together.
type IdempotencyStore interface {
	// Get returns the record of principal and key, or an error wrapping
	// extension.ErrNotFound.
	Get(ctx context.Context, principal, key string) (IdempotencyRecord, error)
	// Put stores rec, replacing any record of the same principal and key.
	Put(ctx context.Context, rec IdempotencyRecord) error
	// DeleteBefore deletes every record created before t and returns how
	// many it deleted.
	DeleteBefore(ctx context.Context, t time.Time) (int, error)
}

type idempotencyKeyCtx struct{}

// IdempotencyKey returns the effective Idempotency-Key of the request on
// ctx: the owner's key as sent, and a named operator's prefixed with its
// principal (operator:<name>:<key>), so that two operators' keys never
// meet. Operator actions derive their durable identities from it. Keys may
// not contain ':', so no key as sent can look like a prefixed one.
func IdempotencyKey(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(idempotencyKeyCtx{}).(string)
	return k, ok
}

// WithIdempotencyKey returns ctx carrying an effective key; the server
// sets it, and tests of handlers may.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// EffectiveKey is the key a principal's Idempotency-Key becomes.
func EffectiveKey(p Principal, key string) string {
	if p.IsOwner() {
		return key
	}
	return p.Actor() + ":" + key
}

// validKey checks an Idempotency-Key: 1 to 200 characters from letters,
// digits and - _ . ~ + = / (enough for UUIDs, ULIDs and base64).
func validKey(k string) bool {
	if k == "" || len(k) > MaxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '~' || c == '+' || c == '=' || c == '/':
		default:
			return false
		}
	}
	return true
}

// serveIdempotent serves a route that needs an Idempotency-Key: a
// completed request with the same key is replayed, a different request
// under the key is refused, and a new one runs and, if it succeeded, is
// recorded. Requests under one key run one at a time.
func (s *Server) serveIdempotent(w http.ResponseWriter, r *http.Request, rt *Route, p Principal, hash string) {
	vals := r.Header.Values("Idempotency-Key")
	if len(vals) == 0 {
		s.out.Error(w, r, httpapi.Wrap(httpapi.CodeIdempotencyKeyRequired, httpapi.ErrIdempotencyKeyRequired,
			"this request needs an Idempotency-Key header: send a fresh unique key, and the same key only to retry the same request"))
		return
	}
	if len(vals) != 1 || !validKey(vals[0]) {
		s.out.Error(w, r, httpapi.Errorf(httpapi.CodeInvalidRequest,
			"the Idempotency-Key must be one header of 1 to %d characters from letters, digits and - _ . ~ + = /", MaxIdempotencyKey))
		return
	}
	key := EffectiveKey(p, vals[0])
	principal := p.Actor()
	unlock := s.keys.lock(principal + "\x00" + key)
	defer unlock()

	ctx := r.Context()
	now := s.now()
	rec, err := s.opts.Idempotency.Get(ctx, principal, key)
	switch {
	case err == nil && now.Before(rec.CreatedAt.Add(IdempotencyRetention)):
		if rec.Method != r.Method || rec.Path != r.URL.EscapedPath() || rec.BodyHash != hash {
			s.out.Error(w, r, httpapi.Wrap(httpapi.CodeIdempotencyConflict, httpapi.ErrIdempotencyConflict,
				"this Idempotency-Key was already used for a different request; use a new key for a new request"))
			return
		}
		h := w.Header()
		h.Set("Idempotent-Replayed", "true")
		h.Set("Cache-Control", "no-store")
		if len(rec.Body) > 0 {
			h.Set("Content-Type", "application/json")
		}
		w.WriteHeader(rec.Status)
		_, _ = w.Write(rec.Body)
		return
	case err != nil && !errors.Is(err, extension.ErrNotFound):
		s.out.Error(w, r, err)
		return
	}

	pend := &pendingRecord{rec: IdempotencyRecord{
		Principal: principal, Key: key, Method: r.Method, Path: r.URL.EscapedPath(), BodyHash: hash, CreatedAt: now,
	}}
	if ti, ok := s.opts.Idempotency.(txIdempotency); ok {
		pend.put = ti.PutInTx
		ctx = context.WithValue(ctx, pendingKey{}, pend)
	}
	r = r.WithContext(WithIdempotencyKey(ctx, key))
	out, err := rt.Handler(r)
	if err != nil {
		s.out.Error(w, r, err)
		return
	}
	res, err := httpapi.Render(r, out)
	if err == nil && res.Stream != nil {
		err = errors.New("management: an idempotent route returned a stream")
	}
	if err != nil {
		s.out.Error(w, r, err)
		return
	}
	if res.Status >= 200 && res.Status < 300 && !pend.recorded {
		rec := IdempotencyRecord{
			Principal: principal, Key: key, Method: r.Method, Path: r.URL.EscapedPath(),
			BodyHash: hash, Status: res.Status, Body: res.Body, CreatedAt: now,
		}
		if err := s.opts.Idempotency.Put(ctx, rec); err != nil {
			// The effect happened; a retry runs the handler again and
			// derives the same identities from the key.
			s.log.Error("management: recording an idempotent response failed", "route", rt.key(), "principal", principal, "status", strconv.Itoa(res.Status), "error", err.Error())
		}
	}
	httpapi.Write(w, r, res)
}

// txIdempotency is an IdempotencyStore that can write a record inside a
// write transaction of coordination storage (StoreIdempotency): the
// request's own, when its handler offers it (recordInTx).
type txIdempotency interface {
	PutInTx(ctx context.Context, tx storage.Tx, rec IdempotencyRecord) error
}

// pendingRecord is the Idempotency-Key record of a request being served,
// waiting for its response.
type pendingRecord struct {
	rec IdempotencyRecord
	put func(ctx context.Context, tx storage.Tx, rec IdempotencyRecord) error
	// recorded: the response was recorded in the transaction of the
	// control that produced it, which committed (the handler returned
	// its result), so serveIdempotent does not write it again.
	recorded bool
}

type pendingKey struct{}

// recordInTx returns ctx for the operator control an idempotent handler
// calls: the control's own transaction records the request's
// Idempotency-Key response as its last step (kernel.ResultRecorder),
// rendered from the control's result by respond (ok false: not this
// control's result), so the effect and its record commit together in
// one transaction. A response that is not a success, or a request
// whose server keeps its records elsewhere, is left to serveIdempotent,
// which records it afterwards as before.
func recordInTx(ctx context.Context, r *http.Request, respond func(result any) (out any, ok bool)) context.Context {
	p, ok := r.Context().Value(pendingKey{}).(*pendingRecord)
	if !ok {
		return ctx
	}
	return kernel.WithResultRecorder(ctx, func(ctx context.Context, tx storage.Tx, result any) error {
		p.recorded = false
		out, ok := respond(result)
		if !ok {
			return nil
		}
		res, err := httpapi.Render(r, out)
		if err != nil || res.Stream != nil || res.Status < 200 || res.Status >= 300 {
			return nil
		}
		rec := p.rec
		rec.Status, rec.Body = res.Status, res.Body
		if err := p.put(ctx, tx, rec); err != nil {
			return err
		}
		p.recorded = true
		return nil
	})
}

// SweepIdempotency deletes Idempotency-Key history older than
// IdempotencyRetention and returns how many records it deleted.
func (s *Server) SweepIdempotency(ctx context.Context) (int, error) {
	return s.opts.Idempotency.DeleteBefore(ctx, s.now().Add(-IdempotencyRetention))
}

// keyLocks serialises requests under the same key.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
