package storagetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-conduit/open-conduit/internal/storage"
)

// The egress proxy's connection records: one per connection, inserted when
// it starts (a refused one already ended), finished once with its byte
// counts, listed by (start, id).

func egressCases() []Case {
	return []Case{
		{Name: "egress_round_trip", Run: plain(egressRoundTrip), Control: dropsEgressReason},
		{Name: "egress_finish_once", Run: plain(egressFinishOnce), Control: finishesEgressUnfenced},
		{Name: "egress_list_by_execution", Run: plain(egressListByExecution), Control: egressIgnoresExecution},
		{Name: "egress_swept_after_it_ended", Run: plain(egressSwept), Control: sweepsEgressAnyAge},
	}
}

// egressSwept: the retention pass deletes the records that ended at or
// before its cut, refused ones included, and keeps those that ended later
// and those still open, however old.
func egressSwept(ctx context.Context, s storage.Store) error {
	if err := insertEgress(ctx, s,
		storage.EgressConnection{ID: "egr_old", Execution: "exe_1", Host: "a.example.com", Port: 443, Allowed: true, StartedAt: at(1)},
		storage.EgressConnection{ID: "egr_refused", Execution: "exe_1", Reason: storage.EgressNotAllowed, StartedAt: at(2), EndedAt: at(2)},
		storage.EgressConnection{ID: "egr_open", Execution: "exe_1", Host: "b.example.com", Port: 443, Allowed: true, StartedAt: at(3)},
		storage.EgressConnection{ID: "egr_late", Execution: "exe_1", Host: "c.example.com", Port: 443, Allowed: true, StartedAt: at(4)},
	); err != nil {
		return err
	}
	if err := finishEgress(ctx, s, storage.FinishEgressParams{ID: "egr_old", Reason: storage.EgressClosed, EndedAt: at(5)}); err != nil {
		return err
	}
	if err := finishEgress(ctx, s, storage.FinishEgressParams{ID: "egr_late", Reason: storage.EgressClosed, EndedAt: at(20)}); err != nil {
		return err
	}
	var res storage.SweepToolbeltResult
	err := s.WithTx(ctx, func(tx storage.Tx) error {
		var err error
		res, err = tx.SweepToolbelt(ctx, &storage.SweepToolbeltParams{EgressBefore: at(10)})
		return err
	})
	if err != nil {
		return err
	}
	ids, err := egressIDs(ctx, s, storage.ListEgressParams{})
	if err != nil {
		return err
	}
	return want(res.Egress == 2 && ids == "[egr_open egr_late]", "after a sweep at 10s: %d swept, records %s; want 2 swept, egr_open,egr_late kept", res.Egress, ids)
}

func insertEgress(ctx context.Context, s storage.Store, cs ...storage.EgressConnection) error {
	return s.WithTx(ctx, func(tx storage.Tx) error {
		for i := range cs {
			if err := tx.InsertEgressConnection(ctx, &cs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

func finishEgress(ctx context.Context, s storage.Store, p storage.FinishEgressParams) error {
	return s.WithTx(ctx, func(tx storage.Tx) error { return tx.FinishEgressConnection(ctx, &p) })
}

func egressIDs(ctx context.Context, s storage.Store, p storage.ListEgressParams) (string, error) {
	cs, err := s.ListEgressConnections(ctx, &p)
	return list(cs, func(c storage.EgressConnection) string { return c.ID }), err
}

func egressRoundTrip(ctx context.Context, s storage.Store) error {
	in := []storage.EgressConnection{
		{ID: "egr_1", Execution: "exe_1", Host: "api.example.com", Port: 443, Allowed: true, StartedAt: at(1)},
		{ID: "egr_2", Execution: "exe_1", Host: "127.0.0.1", Port: 8081, Reason: storage.EgressNotAllowed, StartedAt: at(2), EndedAt: at(2)},
		{ID: "egr_3", Execution: "exe_2", Reason: storage.EgressMalformed, StartedAt: at(3), EndedAt: at(3)},
	}
	if err := insertEgress(ctx, s, in...); err != nil {
		return err
	}
	dup := insertEgress(ctx, s, storage.EgressConnection{ID: "egr_1", Execution: "exe_9", Host: "x.example.com", Port: 1, StartedAt: at(4)})
	all, err := s.ListEgressConnections(ctx, &storage.ListEgressParams{})
	if err != nil {
		return err
	}
	if len(all) != len(in) {
		return fmt.Errorf("egress records = %+v, want the %d inserted", all, len(in))
	}
	for i := range in {
		if !same(all[i], in[i]) {
			return fmt.Errorf("egress record read back = %+v, inserted %+v", all[i], in[i])
		}
	}
	return first(want(errors.Is(dup, storage.ErrDuplicate), "a second record with the id egr_1 = %v, want ErrDuplicate", dup))
}

func egressFinishOnce(ctx context.Context, s storage.Store) error {
	if err := insertEgress(ctx, s, storage.EgressConnection{ID: "egr_1", Execution: "exe_1", Host: "api.example.com", Port: 443, Allowed: true, StartedAt: at(1)}); err != nil {
		return err
	}
	err1 := finishEgress(ctx, s, storage.FinishEgressParams{ID: "egr_1", BytesUp: 120, BytesDown: 4096, Reason: storage.EgressIdle, EndedAt: at(9)})
	again := finishEgress(ctx, s, storage.FinishEgressParams{ID: "egr_1", BytesUp: 1, BytesDown: 1, EndedAt: at(10)})
	missing := finishEgress(ctx, s, storage.FinishEgressParams{ID: "egr_404", EndedAt: at(10)})
	all, err2 := s.ListEgressConnections(ctx, &storage.ListEgressParams{Execution: "exe_1"})
	wantRec := storage.EgressConnection{ID: "egr_1", Execution: "exe_1", Host: "api.example.com", Port: 443, Allowed: true,
		Reason: storage.EgressIdle, BytesUp: 120, BytesDown: 4096, StartedAt: at(1), EndedAt: at(9)}
	return first(err1, err2,
		want(errors.Is(again, storage.ErrFenced), "finishing an ended record = %v, want ErrFenced", again),
		want(storage.IsNotFound(missing), "finishing a record that does not exist = %v, want ErrNotFound", missing),
		want(len(all) == 1 && same(all[0], wantRec), "the finished record = %+v, want %+v (the first finish only)", all, wantRec),
	)
}

func egressListByExecution(ctx context.Context, s storage.Store) error {
	var cs []storage.EgressConnection
	for i := range 6 {
		// Inserted against their order, two a second: the id breaks ties.
		exe := "exe_a"
		if i%3 == 0 {
			exe = "exe_b"
		}
		cs = append(cs, storage.EgressConnection{ID: fmt.Sprintf("egr_%d", 5-i), Execution: exe, Host: "h.example.com", Port: 443, Allowed: true, StartedAt: at((5 - i) / 2)})
	}
	if err := insertEgress(ctx, s, cs...); err != nil {
		return err
	}
	a, err1 := egressIDs(ctx, s, storage.ListEgressParams{Execution: "exe_a"})
	b, err2 := egressIDs(ctx, s, storage.ListEgressParams{Execution: "exe_b"})
	none, err3 := egressIDs(ctx, s, storage.ListEgressParams{Execution: "exe_c"})
	page, err4 := egressIDs(ctx, s, storage.ListEgressParams{Execution: "exe_a", Page: storage.Page{After: &storage.Position{CreatedAt: at(0), ID: "egr_1"}, Limit: 2}})
	return first(err1, err2, err3, err4,
		want(a == "[egr_0 egr_1 egr_3 egr_4]", "records of exe_a = %s", a),
		want(b == "[egr_2 egr_5]", "records of exe_b = %s", b),
		want(none == "[]", "records of exe_c = %s", none),
		want(page == "[egr_3 egr_4]", "two records of exe_a after egr_1 = %s", page),
	)
}
