package main

import (
	"context"
	"flag"
	"time"
)

// loadFlags registers the flags every open-loop subcommand shares: which
// nodes to name, how fast, for how long, and when an answer is too late.
func loadFlags(fs *flag.FlagSet, rateDefault float64, warmupDefault time.Duration, what string) (prefix *string, count *int, rate *float64, duration, warmup, timeout *time.Duration) {
	prefix = fs.String("prefix", "sim", "node names are <prefix>-0 .. <prefix>-(count-1)")
	count = fs.Int("count", 10000, "number of distinct node names")
	rate = fs.Float64("rate", rateDefault, what+" per second, evenly spaced")
	duration = fs.Duration("duration", 60*time.Second, "measured window")
	warmup = fs.Duration("warmup", warmupDefault, what+" at the same rate before the window, not counted")
	timeout = fs.Duration("timeout", 10*time.Second, "how long after it was due one of the "+what+" may go unanswered before it counts as timed out")
	return
}

// openLoop fires requests on a fixed schedule whatever the server does: the
// k-th is due at start + k/rate, and callers measure latency from the due
// time. A server that stalls then shows in the
// tail as the requests that piled up behind the stall, instead of slowing
// the generator and hiding them (coordinated omission).
type openLoop struct {
	rate             float64
	warmup, duration time.Duration
	// maxLag: the furthest a request was dispatched after it was due, so a
	// generator that fell behind (and inflated latencies) says so.
	maxLag time.Duration
	// measuredStart: when the first counted request was due.
	measuredStart time.Time
}

// run calls fire(k, due, measured) for every request of the warm-up and the
// measured window, on the pacing goroutine: fire must hand the request off,
// not wait for it. A cancelled ctx stops dispatching early.
func (o *openLoop) run(ctx context.Context, fire func(k int, due time.Time, measured bool)) {
	start := time.Now()
	o.measuredStart = start.Add(o.warmup)
	total := o.warmup + o.duration
	// Due times from k directly, not by adding a rounded period k times.
	perNs := float64(time.Second) / o.rate
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := 0; ; k++ {
		offset := time.Duration(float64(k) * perNs)
		if offset >= total {
			break
		}
		due := start.Add(offset)
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		o.maxLag = max(o.maxLag, time.Since(due))
		fire(k, due, offset >= o.warmup)
	}
}
