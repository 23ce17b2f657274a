package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/open-conduit/open-conduit/internal/management"
	"github.com/open-conduit/open-conduit/internal/metrics"
	"github.com/open-conduit/open-conduit/internal/storage"
	"github.com/open-conduit/open-conduit/internal/storage/sqlite"
)

// newMetrics registers the daemon's metrics on the injected registry, or
// on a registry of its own (with the Go runtime's and the process's
// collectors) when none is given; never the library's global one.
func (d *Daemon) newMetrics() error {
	reg := d.opts.MetricsRegistry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m, err := metrics.New(metrics.Options{Registry: reg, Counts: d.counts, Logger: d.log.With("component", "metrics")})
	if err != nil {
		return err
	}
	d.metrics = m
	return nil
}

// Metrics are the daemon's metrics: an ingress the daemon runs counts its
// deliveries on them (Metrics.IngressDelivery).
func (d *Daemon) Metrics() *metrics.Metrics { return d.metrics }

// counts reads the scrape-time values from SQLite: two grouped reads.
func (d *Daemon) counts(ctx context.Context) (metrics.Counts, error) {
	if d.pg != nil {
		return d.pgCounts(ctx)
	}
	if d.db == nil {
		return metrics.Counts{}, errors.New("coordination storage is not open")
	}
	work, err := d.db.TallyWork(ctx)
	if err != nil {
		return metrics.Counts{}, err
	}
	exes, err := d.db.TallyExecutions(ctx)
	if err != nil {
		return metrics.Counts{}, err
	}
	return countsOf(work, exes), nil
}

// pgCounts reads the same values from PostgreSQL, whose tallies have
// SQLite's shape.
func (d *Daemon) pgCounts(ctx context.Context) (metrics.Counts, error) {
	work, err := d.pg.TallyWork(ctx)
	if err != nil {
		return metrics.Counts{}, err
	}
	exes, err := d.pg.TallyExecutions(ctx)
	if err != nil {
		return metrics.Counts{}, err
	}
	w := make([]sqlite.WorkCount, len(work))
	for i, c := range work {
		w[i] = sqlite.WorkCount(c)
	}
	e := make([]sqlite.ExecutionCount, len(exes))
	for i, c := range exes {
		e[i] = sqlite.ExecutionCount(c)
	}
	return countsOf(w, e), nil
}

// countsOf converts SQLite's tallies: a hold counts only on Work that has
// not ended, and the queue is ready Work without one.
func countsOf(work []sqlite.WorkCount, exes []sqlite.ExecutionCount) metrics.Counts {
	c := metrics.Counts{Work: map[string]int{}, Held: map[string]int{}, Live: map[string]int{}, Finished: map[string]int{}}
	for _, w := range work {
		c.Work[string(w.State)] += w.Count
		switch {
		case w.BlockedReason != "" && !w.State.Terminal():
			c.Held[w.BlockedReason] += w.Count
		case w.BlockedReason == "" && w.State == storage.WorkReady:
			c.Ready += w.Count
		}
	}
	for _, e := range exes {
		c.Attempts += e.Count
		if e.State == storage.ExecutionFinished {
			c.Finished[string(e.Result)] += e.Count
		} else {
			c.Live[string(e.State)] += e.Count
		}
	}
	return c
}

// checkMetricsAddress refuses a metrics address that is not a loopback
// one (an IP literal of the loopback range, or localhost) unless
// allowRemote: the metrics listener has no authentication.
func checkMetricsAddress(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("the metrics address %q is not host:port (for example 127.0.0.1:9464): %w", addr, err)
	}
	if allowRemote || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("the metrics address %q is not a loopback address: its listener has no authentication, so use 127.0.0.1 or [::1], or pass --metrics-allow-remote to serve it beyond this machine anyway", addr)
}

// listenMetrics opens the optional TCP listener of the metrics. Only
// GET /metrics is served there, without authentication.
func (d *Daemon) listenMetrics() error {
	addr := d.opts.MetricsAddress
	if addr == "" {
		return nil
	}
	if err := checkMetricsAddress(addr, d.opts.MetricsAllowRemote); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen for metrics on %s: %w", addr, err)
	}
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() && !d.opts.MetricsAllowRemote {
		ln.Close()
		return fmt.Errorf("the metrics address %q resolved to %s, which is not a loopback address; use 127.0.0.1 or [::1], or pass --metrics-allow-remote", addr, tcp.IP)
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+management.MetricsPath, d.metrics.Handler())
	d.metricsLn = ln
	d.metricsHTTP = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 16 << 10}
	d.closers = append([]func() error{d.shutdownMetrics}, d.closers...)
	return nil
}

func (d *Daemon) serveMetrics() {
	if d.metricsHTTP == nil {
		return
	}
	go func() {
		if err := d.metricsHTTP.Serve(d.metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("the metrics listener stopped", "address", d.metricsLn.Addr().String(), "error", err)
		}
	}()
	d.log.Info("metrics served", "address", d.metricsLn.Addr().String())
}

func (d *Daemon) shutdownMetrics() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := d.metricsHTTP.Shutdown(ctx); err != nil {
		d.metricsHTTP.Close()
	}
	d.metricsLn.Close()
	return nil
}

// MetricsAddr is the metrics listener's address, nil without one.
func (d *Daemon) MetricsAddr() net.Addr {
	if d.metricsLn == nil {
		return nil
	}
	return d.metricsLn.Addr()
}
