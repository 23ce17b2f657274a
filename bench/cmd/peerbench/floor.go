package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite"
)

// The naive floor: an HTTP server on a Unix socket whose handler runs one
// SQLite transaction (WAL, synchronous=FULL) per request, inserting the
// request's body as a row. It runs as a child process (this same binary,
// re-executed with floorServeArg) so that its CPU time is its own.

const floorServeArg = "floor-serve"

// sqliteDSN is a file database in WAL mode with synchronous=FULL, through
// modernc.org/sqlite, the driver the project uses.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)"
}

// floorServe is the child: it serves until its standard input closes.
func floorServe(socket, dbPath string) error {
	db, err := sql.Open("sqlite", sqliteDSN(dbPath))
	if err != nil {
		return err
	}
	defer db.Close()
	// One connection: SQLite has one writer, and the naive server queues
	// on the pool rather than on SQLITE_BUSY.
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY, at INTEGER NOT NULL, body BLOB NOT NULL)`); err != nil {
		return err
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		tx, err := db.BeginTx(r.Context(), nil)
		if err != nil {
			http.Error(w, "begin", http.StatusInternalServerError)
			return
		}
		res, err := tx.Exec(`INSERT INTO requests (at, body) VALUES (?, ?)`, time.Now().UnixNano(), body)
		if err != nil {
			tx.Rollback()
			http.Error(w, "insert", http.StatusInternalServerError)
			return
		}
		if err := tx.Commit(); err != nil {
			http.Error(w, "commit", http.StatusInternalServerError)
			return
		}
		id, _ := res.LastInsertId()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%d}`+"\n", id)
	})
	srv := &http.Server{Handler: h}
	go func() {
		io.Copy(io.Discard, os.Stdin)
		srv.Close()
	}()
	fmt.Println("ready")
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// floorResult is one round of the floor.
type floorResult struct {
	requests   int
	elapsed    time.Duration
	latencies  []time.Duration
	serverCPU  time.Duration
	throughput float64
}

// runFloor starts the floor server in dir and drives it with clients
// concurrent clients of perClient requests each.
func runFloor(ctx context.Context, dir string, clients, perClient int) (*floorResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(dir, "floor.sock")
	cmd := exec.CommandContext(ctx, self, floorServeArg, socket, filepath.Join(dir, "floor.db"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		return nil, fmt.Errorf("the floor server did not start: %q %v", line, err)
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: clients,
	}}
	defer hc.CloseIdleConnections()
	// A body of the size of an emit's.
	body := []byte(`{"operation":"emit","input":{"type":"bench.emitted","data":{"n":1,"note":"floor"}}}`)
	cpu0, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	lat := make([][]time.Duration, clients)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perClient {
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://localhost/v1/call", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := hc.Do(req)
				if err != nil {
					errs <- err
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("floor answered %d", resp.StatusCode)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	cpu1, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return nil, err
	}
	r := &floorResult{requests: clients * perClient, elapsed: elapsed, serverCPU: cpu1 - cpu0}
	for _, l := range lat {
		r.latencies = append(r.latencies, l...)
	}
	r.throughput = float64(r.requests) / elapsed.Seconds()
	return r, nil
}
