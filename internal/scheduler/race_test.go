//go:build race

package scheduler_test

// raceEnabled: the race detector slows the pure Go SQLite about tenfold,
// so the property runs fewer checks by default under it.
const raceEnabled = true
