package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
)

// latencies keeps every value: at the rates these benchmarks run (1000/s for
// two minutes is 120k values) a sorted slice gives exact percentiles for a
// megabyte, with no histogram resolution to argue about.
type latencies struct {
	mu sync.Mutex
	ms []float64
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.ms = append(l.ms, float64(d)/float64(time.Millisecond))
	l.mu.Unlock()
}

func (l *latencies) addMs(ms float64) {
	l.mu.Lock()
	l.ms = append(l.ms, ms)
	l.mu.Unlock()
}

// percentiles by nearest rank, in ms to three decimals; keys as the harness
// reads them (p99_9 for the 99.9th).
func (l *latencies) percentiles(ps ...float64) map[string]float64 {
	l.mu.Lock()
	v := append([]float64(nil), l.ms...)
	l.mu.Unlock()
	sort.Float64s(v)
	out := make(map[string]float64, len(ps)+1)
	for _, p := range ps {
		key := "p" + trimFloat(p)
		if len(v) == 0 {
			out[key] = 0
			continue
		}
		rank := int(math.Ceil(p/100*float64(len(v)))) - 1
		out[key] = round3(v[max(rank, 0)])
	}
	if len(v) > 0 {
		out["max"] = round3(v[len(v)-1])
	} else {
		out["max"] = 0
	}
	return out
}

func trimFloat(p float64) string {
	switch p {
	case 99.9:
		return "99_9"
	case 99.99:
		return "99_99"
	}
	return strconv.Itoa(int(p))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// counts tallies errors by kind.
type counts struct {
	mu sync.Mutex
	m  map[string]int64
}

func (c *counts) add(kind string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int64{}
	}
	c.m[kind]++
	return c.m[kind]
}

func (c *counts) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int64, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// cpuMs is this process's user+system CPU so far: what the generator itself
// cost, to tell whether it, not the server, was the bottleneck.
func cpuMs() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return (ru.Utime.Nano() + ru.Stime.Nano()) / int64(time.Millisecond)
}

// codeName gives the canonical gRPC status names (UNAVAILABLE, not
// Unavailable) as the gateway's logs and docs spell them.
func codeName(c codes.Code) string {
	names := [...]string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	if int(c) < len(names) {
		return names[c]
	}
	return "CODE_" + strconv.Itoa(int(c))
}

// progress logs a status line every 5 s until the returned stop is called;
// stop waits for it, so no progress line comes after the result.
func progress(line func() string) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(5 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				logf("%s", line())
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// fmtCounts renders kind:count pairs in a stable order for progress lines.
func fmtCounts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", k, m[k])
	}
	return b.String()
}
