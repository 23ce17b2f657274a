package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every metric this package defines.
const Namespace = "open_conduit"

// WorkStates are the states the Work gauge always reports (0 when no Work
// is in one), so that an alert on a state never sees a missing series.
var WorkStates = []string{"ready", "running", "waiting", "succeeded", "failed", "cancelled"}

// AttemptStates are the live states the attempts gauge always reports.
var AttemptStates = []string{"running", "parked", "stopping"}

// AttemptResults are the results the finished attempts counter always
// reports.
var AttemptResults = []string{"succeeded", "failed", "cancelled", "lost"}

// Counts are the values read from storage at a scrape.
type Counts struct {
	// Work counts Work by state.
	Work map[string]int
	// Held counts held Work by its hold's reason.
	Held map[string]int
	// Ready counts ready Work that is not held: the queue the scheduler
	// claims from.
	Ready int
	// Attempts counts every attempt ever recorded (executions are never
	// deleted, so it only grows).
	Attempts int
	// Live counts attempts not finished, by state.
	Live map[string]int
	// Finished counts finished attempts by result.
	Finished map[string]int
}

// Counter reads the scrape-time values.
type Counter func(ctx context.Context) (Counts, error)

// Options configure the metrics.
type Options struct {
	// Registry is where every metric is registered (required): the
	// daemon makes one, never the library's global default.
	Registry *prometheus.Registry
	// Counts, when set, is read at every scrape for the Work gauges and
	// the attempt counters; a failed read leaves them out of that scrape
	// and is logged.
	Counts Counter
	// Logger receives a failed scrape's error (required).
	Logger *slog.Logger
}

// Metrics are the daemon's metrics. Its methods are safe for concurrent
// use; a nil *Metrics ignores every report, so a part built without
// metrics (a test) needs no stub.
type Metrics struct {
	reg       *prometheus.Registry
	log       *slog.Logger
	calls     *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	renewals  *prometheus.CounterVec
	commits   prometheus.Histogram
	ingresses *prometheus.CounterVec
	egress    *prometheus.CounterVec
}

// New registers the daemon's metrics on opts.Registry.
func New(opts Options) (*Metrics, error) {
	if opts.Registry == nil || opts.Logger == nil {
		return nil, errors.New("metrics: Options need a Registry and a Logger")
	}
	m := &Metrics{
		reg: opts.Registry,
		log: opts.Logger,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "toolbelt_calls_total",
			Help: "Toolbelt requests by operation (other for a name the daemon does not serve) and result (ok, or the refusal's result).",
		}, []string{"operation", "result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "refusals_total",
			Help: "Requests refused with an error code, by socket (management, toolbelt) and the code answered.",
		}, []string{"socket", "code"}),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lease_renewals_total",
			Help: "Lease renewals by outcome: renewed, lost (fenced: another owner or epoch holds it), error.",
		}, []string{"outcome"}),
		commits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "store_commit_seconds",
			Help:    "Time coordination storage took to commit a write transaction.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		ingresses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "ingress_deliveries_total",
			Help: "Deliveries an ingress received, by source (the ingress) and outcome (accepted, duplicate, rejected, failed).",
		}, []string{"source", "outcome"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "egress_connections_total",
			Help: "Connections executions opened through the egress proxy, by result: allowed, refused (by the allowlist, an ended execution, a bound or a malformed request), failed (allowed but unreachable).",
		}, []string{"result"}),
	}
	cs := []prometheus.Collector{m.calls, m.refusals, m.renewals, m.commits, m.ingresses, m.egress}
	if opts.Counts != nil {
		cs = append(cs, newStoreCollector(opts.Counts, opts.Logger))
	}
	for _, c := range cs {
		if err := opts.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Handler serves the registry in the Prometheus exposition format. A
// collector that fails is left out of the answer (and logged), never the
// whole scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slogPrinter{m.log},
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	})
}

// LeaseRenewal counts one lease renewal's outcome.
func (m *Metrics) LeaseRenewal(outcome string) {
	if m != nil {
		m.renewals.WithLabelValues(outcome).Inc()
	}
}

// ToolbeltCall counts one toolbelt request by operation and result.
func (m *Metrics) ToolbeltCall(operation, result string) {
	if m != nil {
		m.calls.WithLabelValues(operation, result).Inc()
	}
}

// Refusal counts one request refused on socket with code.
func (m *Metrics) Refusal(socket, code string) {
	if m != nil {
		m.refusals.WithLabelValues(socket, code).Inc()
	}
}

// Commit observes how long a write transaction's commit took.
func (m *Metrics) Commit(d time.Duration) {
	if m != nil {
		m.commits.Observe(d.Seconds())
	}
}

// IngressDelivery counts one delivery an ingress received: source names
// the ingress (github), outcome what became of it (accepted, duplicate,
// rejected, failed). Both must be fixed names of the ingress, never a
// value from the delivery.
func (m *Metrics) IngressDelivery(source, outcome string) {
	if m != nil {
		m.ingresses.WithLabelValues(source, outcome).Inc()
	}
}

// EgressConnection counts one connection through the egress proxy by
// result: allowed, refused or failed; any other value is counted as other,
// so the label stays a fixed set.
func (m *Metrics) EgressConnection(result string) {
	if m == nil {
		return
	}
	switch result {
	case "allowed", "refused", "failed":
	default:
		result = "other"
	}
	m.egress.WithLabelValues(result).Inc()
}

// storeCollector computes the Work gauges and the attempt counters from
// storage at every scrape: two grouped counts, so the values are never
// stale, they survive a restart, and nothing has to follow every
// transition of a Work or an attempt.
type storeCollector struct {
	read     Counter
	log      *slog.Logger
	work     *prometheus.Desc
	held     *prometheus.Desc
	queue    *prometheus.Desc
	started  *prometheus.Desc
	live     *prometheus.Desc
	finished *prometheus.Desc
}

func newStoreCollector(read Counter, log *slog.Logger) *storeCollector {
	return &storeCollector{
		read: read, log: log,
		work:     prometheus.NewDesc(Namespace+"_work", "Work by state.", []string{"state"}, nil),
		held:     prometheus.NewDesc(Namespace+"_work_held", "Held Work by the hold's reason (open-conduit work retry releases it).", []string{"reason"}, nil),
		queue:    prometheus.NewDesc(Namespace+"_queue_depth", "Ready Work that is not held: what waits for a claim.", nil, nil),
		started:  prometheus.NewDesc(Namespace+"_attempts_started_total", "Attempts started (executions created) on this state directory.", nil, nil),
		live:     prometheus.NewDesc(Namespace+"_attempts", "Attempts not finished, by state.", []string{"state"}, nil),
		finished: prometheus.NewDesc(Namespace+"_attempts_finished_total", "Attempts finished on this state directory, by result.", []string{"result"}, nil),
	}
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.work, c.held, c.queue, c.started, c.live, c.finished} {
		ch <- d
	}
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := c.read(context.Background())
	if err != nil {
		c.log.Error("metrics: cannot count Work and attempts for a scrape", "error", err.Error())
		ch <- prometheus.NewInvalidMetric(c.work, err)
		return
	}
	gauges(ch, c.work, prometheus.GaugeValue, WorkStates, n.Work)
	gauges(ch, c.held, prometheus.GaugeValue, nil, n.Held)
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(n.Ready))
	ch <- prometheus.MustNewConstMetric(c.started, prometheus.CounterValue, float64(n.Attempts))
	gauges(ch, c.live, prometheus.GaugeValue, AttemptStates, n.Live)
	gauges(ch, c.finished, prometheus.CounterValue, AttemptResults, n.Finished)
}

// gauges sends one metric per label value: every one of always (0 when
// absent), then the others of values, sorted.
func gauges(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, always []string, values map[string]int) {
	labels := slices.Clone(always)
	for k := range values {
		if !slices.Contains(always, k) {
			labels = append(labels, k)
		}
	}
	sort.Strings(labels[len(always):])
	for _, l := range labels {
		ch <- prometheus.MustNewConstMetric(d, t, float64(values[l]), l)
	}
}

// slogPrinter is promhttp's error log on the daemon's logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) {
	msg := ""
	for i, x := range v {
		if i > 0 {
			msg += " "
		}
		if err, ok := x.(error); ok {
			msg += err.Error()
			continue
		}
		if s, ok := x.(string); ok {
			msg += s
		}
	}
	p.log.Warn("metrics: scrape error", "error", msg)
}
