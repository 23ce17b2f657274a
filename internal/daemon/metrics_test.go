package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/statedir"
	"github.com/open-conduit/open-conduit/internal/storage"
)

// metricsConfig is a scope t with a binding that succeeds, one that
// fails, one whose toolbelt call is refused (create_work is not granted)
// and one that holds until its fifo is written.
func metricsConfig(t *testing.T, state, fifo string) {
	t.Helper()
	sh := func(script string) map[string]any {
		return map[string]any{"executor": "shell", "config": map[string]any{"command": []string{"sh", "-c", script}, "env": map[string]string{"FIFO": fifo}}}
	}
	// refused is granted emit, so that it has a toolbelt (a binding that
	// grants nothing gets none), but not the create_work it calls.
	refused := sh(`os call create_work --input '{"binding":"ok"}' && exit 7; exit 0`)
	refused["operations"] = []string{"emit"}
	doc := map[string]any{"version": 1, "scopes": map[string]any{"t": map[string]any{
		"authorization": map[string]any{"operations": []string{"emit"}},
		"bindings": map[string]any{
			"ok":      sh("exit 0"),
			"bad":     sh("exit 3"),
			"refused": refused,
			"held":    sh(`read x < "$FIFO"`),
		}}}}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// scrape reads GET /metrics over a transport with token (none when "")
// and parses the answer with the Prometheus text parser.
func scrape(t *testing.T, c *http.Client, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		io.Copy(io.Discard, res.Body)
		return res.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	return res.StatusCode, fams
}

// value is the value of the family's metric with labels (name=value
// pairs), or -1 when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func unixClient(socket string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
}

// The metrics, scraped through the real management socket and the TCP
// listener and parsed by the Prometheus text parser, count what the test
// ran: two Work that succeed, one that fails, a refused toolbelt call, a
// lease renewal, commits.
func TestMetricsCountWhatRan(t *testing.T) {
	state := shortDir(t)
	fifo := filepath.Join(filepath.Dir(state), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	metricsConfig(t, state, fifo)
	reg := prometheus.NewRegistry()
	r := start(t, state, func(o *Options) { o.MetricsRegistry = reg; o.MetricsAddress = "127.0.0.1:0" })

	for _, b := range []string{"ok", "bad", "refused"} {
		w := r.terminal(r.create("t", b).ID)
		want := storage.WorkSucceeded
		if b == "bad" {
			want = storage.WorkFailed
		}
		if w.State != want {
			t.Fatalf("Work on %s ended %s (%s), want %s\nlogs:\n%s", b, w.State, w.OutcomeMessage, want, r.logs)
		}
	}
	// A held attempt's lease is renewed.
	held := r.create("t", "held")
	r.until(held.ID, "running", func(w storage.Work) bool { return w.State == storage.WorkRunning })
	renewed := func() float64 {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*dto.MetricFamily{}
		for _, f := range fams {
			m[f.GetName()] = f
		}
		return value(m, "open_conduit_lease_renewals_total", "outcome=renewed")
	}
	for deadline := time.Now().Add(guard); renewed() < 1; {
		if time.Now().After(deadline) {
			t.Fatalf("no lease renewal was counted\nlogs:\n%s", r.logs)
		}
		r.d.heartbeat(context.Background())
		time.Sleep(20 * time.Millisecond)
	}

	token, err := os.ReadFile(statedir.OwnerTokenPath(state))
	if err != nil {
		t.Fatal(err)
	}
	mc := unixClient(filepath.Join(state, statedir.SocketName))
	// Without a credential: refused like any route, before anything is
	// served.
	if code, _ := scrape(t, mc, "http://localhost"+management.MetricsPath, ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without a credential: %d, want 401", code)
	}
	code, fams := scrape(t, mc, "http://localhost"+management.MetricsPath, strings.TrimSpace(string(token)))
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"open_conduit_work", []string{"state=succeeded"}, 2},
		{"open_conduit_work", []string{"state=failed"}, 1},
		{"open_conduit_work", []string{"state=running"}, 1},
		{"open_conduit_work", []string{"state=cancelled"}, 0},
		{"open_conduit_queue_depth", nil, 0},
		{"open_conduit_attempts_started_total", nil, 4},
		{"open_conduit_attempts_finished_total", []string{"result=succeeded"}, 2},
		{"open_conduit_attempts_finished_total", []string{"result=failed"}, 1},
		{"open_conduit_attempts_finished_total", []string{"result=lost"}, 0},
		{"open_conduit_attempts", []string{"state=running"}, 1},
		{"open_conduit_toolbelt_calls_total", []string{"operation=create_work", "result=forbidden"}, 1},
		{"open_conduit_refusals_total", []string{"socket=toolbelt", "code=forbidden"}, 1},
		// The scrape without a credential, on the management socket.
		{"open_conduit_refusals_total", []string{"socket=management", "code=unauthorized"}, 1},
	} {
		if got := value(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := value(fams, "open_conduit_store_commit_seconds"); got < 1 {
		t.Errorf("store commits observed: %v, want some", got)
	}
	if got := value(fams, "open_conduit_lease_renewals_total", "outcome=renewed"); got < 1 {
		t.Errorf("lease renewals: %v, want at least one", got)
	}
	for name := range fams {
		if !strings.HasPrefix(name, "open_conduit_") && !strings.HasPrefix(name, "promhttp_") {
			t.Errorf("metric %s is not the daemon's: the injected registry holds only the daemon's and its handler's", name)
		}
	}

	// The TCP listener serves the same, without a credential.
	addr := r.d.MetricsAddr()
	if addr == nil {
		t.Fatal("no metrics listener")
	}
	code, tcp := scrape(t, http.DefaultClient, fmt.Sprintf("http://%s/metrics", addr), "")
	if code != http.StatusOK || value(tcp, "open_conduit_work", "state=succeeded") != 2 {
		t.Fatalf("TCP scrape: %d, succeeded Work %v", code, value(tcp, "open_conduit_work", "state=succeeded"))
	}
	if res, err := http.Get(fmt.Sprintf("http://%s/v1/health", addr)); err != nil || res.StatusCode != http.StatusNotFound {
		t.Fatalf("the metrics listener served another path: %v %v", res, err)
	} else {
		res.Body.Close()
	}

	// Release the held attempt.
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "go")
	f.Close()
	r.terminal(held.ID)
	http.DefaultClient.CloseIdleConnections()
	mc.CloseIdleConnections()
}

// A metrics address beyond loopback is refused before the state directory
// is touched, unless it is explicitly allowed.
func TestMetricsAddressMustBeLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:9464": true, "[::1]:9464": true, "localhost:9464": true, "127.0.0.2:0": true,
		"0.0.0.0:9464": false, ":9464": false, "192.0.2.1:9464": false, "example.com:9464": false, "127.0.0.1": false,
	} {
		if err := checkMetricsAddress(addr, false); (err == nil) != ok {
			t.Errorf("checkMetricsAddress(%q) = %v, want ok %v", addr, err, ok)
		}
	}
	if err := checkMetricsAddress("0.0.0.0:9464", true); err != nil {
		t.Errorf("an allowed remote address was refused: %v", err)
	}
	state := shortDir(t)
	opts := options(t, state, &syncBuffer{})
	opts.MetricsAddress = "0.0.0.0:0"
	if _, err := New(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "--metrics-allow-remote") {
		t.Fatalf("New with a remote metrics address: %v, want a refusal naming --metrics-allow-remote", err)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("the refused start touched the state directory: %v", err)
	}
}
