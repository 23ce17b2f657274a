package main

import "testing"

func TestCommitTotals(t *testing.T) {
	body := []byte(`# HELP open_conduit_store_commit_seconds How long commits took.
# TYPE open_conduit_store_commit_seconds histogram
open_conduit_store_commit_seconds_bucket{le="0.001"} 3
open_conduit_store_commit_seconds_bucket{le="+Inf"} 7
open_conduit_store_commit_seconds_sum 0.0125
open_conduit_store_commit_seconds_count 7
open_conduit_work{state="ready"} 2
`)
	n, secs, err := commitTotals(body)
	if err != nil || n != 7 || secs != 0.0125 {
		t.Fatalf("commitTotals = %v, %v, %v; want 7, 0.0125, nil", n, secs, err)
	}
	// A daemon whose metrics lack the histogram must not count as zero
	// commits.
	if _, _, err := commitTotals([]byte("open_conduit_work{state=\"ready\"} 2\n")); err == nil {
		t.Fatal("commitTotals accepted metrics without the commit histogram")
	}
}
