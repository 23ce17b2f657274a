package agent

import (
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadLines(t *testing.T) {
	in := "one\r\n" + strings.Repeat("x", 100) + "\n\ntwo\nthree-cut"
	var got []string
	st, err := ReadLines(iotest.OneByteReader(strings.NewReader(in)), 10, func(l []byte) { got = append(got, string(l)) })
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "|") != "one||two" {
		t.Fatalf("lines %q", got)
	}
	if st != (LineStats{Lines: 3, Oversized: 1, Truncated: true}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestReadLinesLongerThanBuffer(t *testing.T) {
	long := strings.Repeat("y", 200*1024)
	var got []int
	st, err := ReadLines(strings.NewReader(long+"\nz\n"), 0, func(l []byte) { got = append(got, len(l)) })
	if err != nil || len(got) != 2 || got[0] != len(long) || got[1] != 1 || st.Truncated {
		t.Fatalf("got %v %+v %v", got, st, err)
	}
}

func TestReadLinesError(t *testing.T) {
	boom := errors.New("boom")
	_, err := ReadLines(iotest.ErrReader(boom), 0, func([]byte) {})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
}
