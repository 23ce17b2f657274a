package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
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

// WorkCounts are the Work gauges' values, read from storage at a scrape.
type WorkCounts struct {
	// ByState counts Work by state.
	ByState map[string]int
	// Held counts held Work by its hold's reason.
	Held map[string]int
	// Ready counts ready Work that is not held: the queue the scheduler
	// claims from.
	Ready int
}

// WorkCounter reads the Work gauges' values.
type WorkCounter func(ctx context.Context) (WorkCounts, error)

// Options configure the metrics.
type Options struct {
	// Registry is where every metric is registered (required): the
	// daemon makes one, never the library's global default.
	Registry *prometheus.Registry
	// Work, when set, is read at every scrape for the Work gauges; a
	// failed read leaves them out of that scrape and is logged.
	Work WorkCounter
	// Logger receives a failed scrape's error (required).
	Logger *slog.Logger
}

// Metrics are the daemon's metrics. Its methods are safe for concurrent
// use; a nil *Metrics ignores every report, so a part built without
// metrics (a test) needs no stub.
type Metrics struct {
	reg       *prometheus.Registry
	log       *slog.Logger
	started   *prometheus.CounterVec
	finished  *prometheus.CounterVec
	calls     *prometheus.CounterVec
	refusals  *prometheus.CounterVec
	renewals  *prometheus.CounterVec
	commits   prometheus.Histogram
	ingresses *prometheus.CounterVec
}

// New registers the daemon's metrics on opts.Registry.
func New(opts Options) (*Metrics, error) {
	if opts.Registry == nil || opts.Logger == nil {
		return nil, errors.New("metrics: Options need a Registry and a Logger")
	}
	m := &Metrics{
		reg: opts.Registry,
		log: opts.Logger,
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "attempts_started_total",
			Help: "Attempts started by this daemon, by kind: run (a claim), resume (a parked attempt claimed again), recover (an expired or orphaned attempt taken over).",
		}, []string{"kind"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "attempts_finished_total",
			Help: "Attempts this daemon recorded as finished, by result (succeeded, failed, cancelled, lost).",
		}, []string{"result"}),
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
	}
	cs := []prometheus.Collector{m.started, m.finished, m.calls, m.refusals, m.renewals, m.commits, m.ingresses}
	if opts.Work != nil {
		cs = append(cs, newWorkCollector(opts.Work, opts.Logger))
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

// AttemptStarted counts an attempt started (run, resume or recover).
func (m *Metrics) AttemptStarted(kind string) {
	if m != nil {
		m.started.WithLabelValues(kind).Inc()
	}
}

// AttemptFinished counts an attempt recorded as finished with result.
func (m *Metrics) AttemptFinished(result string) {
	if m != nil {
		m.finished.WithLabelValues(result).Inc()
	}
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

// workCollector computes the Work gauges from storage at every scrape:
// one grouped count, so the values are never stale and nothing has to
// follow every transition of a Work.
type workCollector struct {
	read  WorkCounter
	log   *slog.Logger
	work  *prometheus.Desc
	held  *prometheus.Desc
	queue *prometheus.Desc
}

func newWorkCollector(read WorkCounter, log *slog.Logger) *workCollector {
	return &workCollector{
		read: read, log: log,
		work:  prometheus.NewDesc(Namespace+"_work", "Work by state, read from storage at the scrape.", []string{"state"}, nil),
		held:  prometheus.NewDesc(Namespace+"_work_held", "Held Work by the hold's reason (work retry releases it).", []string{"reason"}, nil),
		queue: prometheus.NewDesc(Namespace+"_queue_depth", "Ready Work that is not held: what waits for a claim.", nil, nil),
	}
}

func (c *workCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.work
	ch <- c.held
	ch <- c.queue
}

func (c *workCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := c.read(context.Background())
	if err != nil {
		c.log.Error("metrics: cannot count Work for a scrape", "error", err.Error())
		ch <- prometheus.NewInvalidMetric(c.work, err)
		return
	}
	for _, st := range WorkStates {
		ch <- prometheus.MustNewConstMetric(c.work, prometheus.GaugeValue, float64(counts.ByState[st]), st)
	}
	reasons := make([]string, 0, len(counts.Held))
	for r := range counts.Held {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(counts.Held[r]), r)
	}
	ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(counts.Ready))
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
