package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"
)

type queryResult struct {
	Calls     int64              `json:"calls"`
	OK        int64              `json:"ok"`
	Errors    map[string]int64   `json:"errors"`
	LatencyMs map[string]float64 `json:"latencyMs"`
	// Sample-to-store lag: received_at_ms - latest.timestamp_ms, both the
	// gateway's clock when agents run on the same machine.
	LagMs            map[string]float64 `json:"lagMs"`
	NoSample         int64              `json:"noSample"`
	DispatchLagMaxMs float64            `json:"dispatchLagMaxMs"`
	GeneratorCPUMs   int64              `json:"generatorCpuMs"`
}

func runQuery(args []string) {
	fs := newFlags("query")
	var target grpcTarget
	target.register(fs)
	protoPath := fs.String("proto", "", "path to proto/oversell/v1/oversell.proto")
	tokenFile := fs.String("token-file", "", "bearer token sent as authorization on every call (optional)")
	prefix, count, rate, duration, warmup, timeout := loadFlags(fs, 50, 3*time.Second, "calls")
	fs.Parse(args)

	if *count < 1 || *rate <= 0 {
		fatalf("query: --count and --rate must be positive")
	}
	c := mustContract(*protoPath)
	reqDesc, err := c.message("GetNodeRequest")
	if err == nil {
		_, err = newMessage(reqDesc, fields{"name": "x"})
	}
	statusDesc, err2 := c.message("NodeStatus")
	if err == nil {
		err = err2
	}
	if err == nil {
		err = resolve(statusDesc, "received_at_ms", "latest.timestamp_ms")
	}
	if err != nil {
		fatalf("query: %v", err)
	}
	addr, creds, err := target.dialOptions()
	if err != nil {
		fatalf("query: %v", err)
	}
	base := context.Background()
	if *tokenFile != "" {
		tok, err := os.ReadFile(*tokenFile)
		if err != nil {
			fatalf("query: --token-file: %v", err)
		}
		base = metadata.AppendToOutgoingContext(base, "authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	// One connection for every call, as one dashboard or `oversell top` has.
	conn, err := grpc.NewClient(addr, creds, grpc.WithNoProxy())
	if err != nil {
		fatalf("query: --address %s: %v", target.address, err)
	}
	defer conn.Close()

	nodes := names(*prefix, *count)
	var calls, ok, noSample atomic.Int64
	var errs counts
	var lat, lag latencies
	loop := &openLoop{rate: *rate, warmup: *warmup, duration: *duration}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopProgress := progress(func() string {
		return fmt.Sprintf("calls %d, ok %d, errors %s", calls.Load(), ok.Load(), fmtCounts(errs.snapshot()))
	})
	logf("query: %.0f GetNode/s to %s for %s after %s warm-up", *rate, target.address, *duration, *warmup)
	call := func(due time.Time, measured bool) {
		req, _ := newMessage(reqDesc, fields{"name": nodes[rand.IntN(*count)]})
		resp := dynamicpb.NewMessage(statusDesc)
		cctx, cancel := context.WithDeadline(base, due.Add(*timeout))
		err := conn.Invoke(cctx, "/oversell.v1.NodeUsage/GetNode", req, resp)
		cancel()
		took := time.Since(due)
		if !measured {
			return
		}
		calls.Add(1)
		if err != nil {
			kind := codeName(status.Code(err))
			if errs.add(kind) == 1 {
				logf("query: first %s: %v", kind, err)
			}
			return
		}
		ok.Add(1)
		lat.add(took)
		if !has(resp, "latest") {
			noSample.Add(1)
			return
		}
		latest := get(resp, "latest").Message()
		lag.addMs(float64(get(resp, "received_at_ms").Int() - get(latest, "timestamp_ms").Int()))
	}
	cpu0 := cpuMs()
	// A goroutine per call: calls share the one connection as concurrent
	// streams, so a slow answer never holds back the next call.
	var inflight sync.WaitGroup
	loop.run(ctx, func(k int, due time.Time, measured bool) {
		inflight.Go(func() { call(due, measured) })
	})
	inflight.Wait()
	cpu := cpuMs() - cpu0

	lagMs := lag.percentiles(50, 99)
	stopProgress()
	printResult(queryResult{
		Calls: calls.Load(), OK: ok.Load(), Errors: errs.snapshot(),
		LatencyMs:        lat.percentiles(50, 90, 99, 99.9),
		LagMs:            lagMs,
		NoSample:         noSample.Load(),
		DispatchLagMaxMs: round3(float64(loop.maxLag) / float64(time.Millisecond)),
		GeneratorCPUMs:   cpu,
	})
}
