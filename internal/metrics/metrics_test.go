package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/open-conduit/open-conduit/internal/metrics"
)

func serve(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String())); err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, rec.Body)
	}
	return rec.Body.String()
}

func TestReportsAndScrapeTimeCounts(t *testing.T) {
	m, err := metrics.New(metrics.Options{Registry: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler), Counts: func(context.Context) (metrics.Counts, error) {
		return metrics.Counts{Work: map[string]int{"ready": 3}, Held: map[string]int{"secret_unavailable": 1}, Ready: 2, Attempts: 5,
			Finished: map[string]int{"succeeded": 4}, Live: map[string]int{"running": 1}}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.ToolbeltCall("emit", "ok")
	m.Refusal("toolbelt", "forbidden")
	m.LeaseRenewal("renewed")
	m.Commit(2 * time.Millisecond)
	m.IngressDelivery("github", "accepted")
	m.EgressConnection("refused")
	m.EgressConnection("refused")
	m.EgressConnection("api.example.com:443") // never a label value
	out := serve(t, m)
	for _, want := range []string{
		`open_conduit_work{state="ready"} 3`,
		`open_conduit_work{state="failed"} 0`, // every state, even when none
		`open_conduit_work_held{reason="secret_unavailable"} 1`,
		`open_conduit_queue_depth 2`,
		`open_conduit_attempts_started_total 5`,
		`open_conduit_attempts_finished_total{result="succeeded"} 4`,
		`open_conduit_attempts_finished_total{result="lost"} 0`,
		`open_conduit_attempts{state="running"} 1`,
		`open_conduit_toolbelt_calls_total{operation="emit",result="ok"} 1`,
		`open_conduit_refusals_total{code="forbidden",socket="toolbelt"} 1`,
		`open_conduit_lease_renewals_total{outcome="renewed"} 1`,
		`open_conduit_store_commit_seconds_count 1`,
		`open_conduit_ingress_deliveries_total{outcome="accepted",source="github"} 1`,
		`open_conduit_egress_connections_total{result="refused"} 2`,
		`open_conduit_egress_connections_total{result="other"} 1`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the scrape lacks %s\n%s", want, out)
		}
	}
}

// A failed count leaves the scrape-time values out and is logged; the
// rest of the scrape is served.
func TestFailedCountIsLeftOut(t *testing.T) {
	var logs bytes.Buffer
	m, err := metrics.New(metrics.Options{Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(&logs, nil)), Counts: func(context.Context) (metrics.Counts, error) {
		return metrics.Counts{}, errors.New("database is locked")
	}})
	if err != nil {
		t.Fatal(err)
	}
	m.LeaseRenewal("lost")
	out := serve(t, m)
	if strings.Contains(out, "open_conduit_work{") || !strings.Contains(out, `open_conduit_lease_renewals_total{outcome="lost"} 1`) {
		t.Fatalf("scrape after a failed count:\n%s", out)
	}
	if !strings.Contains(logs.String(), "database is locked") {
		t.Fatalf("the failed count was not logged: %s", logs.String())
	}
}

// A nil *Metrics ignores reports, and New refuses missing options.
func TestNilAndOptions(t *testing.T) {
	var m *metrics.Metrics
	m.ToolbeltCall("emit", "ok")
	m.Refusal("management", "forbidden_role")
	m.LeaseRenewal("renewed")
	m.Commit(time.Millisecond)
	m.IngressDelivery("github", "accepted")
	m.EgressConnection("allowed")
	if _, err := metrics.New(metrics.Options{Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Fatal("New without a registry succeeded")
	}
}
