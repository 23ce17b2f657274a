package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/open-conduit/open-conduit/internal/reaper"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat; it is 100 on every Linux architecture Go runs on.
const clockTicks = 100

// median is the middle of xs (the mean of the two middle values for an even
// count); NaN-free: 0 for no values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// p50 is the median of a set of latencies.
func p50(ds []time.Duration) time.Duration {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d)
	}
	return time.Duration(median(xs))
}

// cpuTime is a process's user plus system CPU time so far, from
// /proc/<pid>/stat (fields 14 and 15, counted after the command name,
// which may hold spaces and parentheses).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseCPU(string(b))
}

// descendantsCPU sums utime+stime of the live processes descended from
// pid (a package's process runs under the daemon's reaper, a child of
// the daemon). A process that exits between two readings is counted by
// neither: only long-lived ones are measured.
func descendantsCPU(pid int) time.Duration {
	var sum time.Duration
	for _, d := range reaper.Descendants(pid) {
		if c, err := cpuTime(d); err == nil {
			sum += c
		}
	}
	return sum
}

func parseCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("stat has %d fields after the name", len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(u+s) * time.Second / clockTicks, nil
}

// threads is the Threads line of /proc/<pid>/status.
func threads(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Threads:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("no Threads line")
}

// machine describes where the figures were made.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := "unknown kernel"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s, %d cores (runtime.NumCPU), Linux %s, %s %s/%s",
		model, runtime.NumCPU(), kernel, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// ms renders a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
