package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

type reviewsResult struct {
	Sent      int64              `json:"sent"`
	Answered  int64              `json:"answered"`
	OK        int64              `json:"ok"`
	Errors    map[string]int64   `json:"errors"`
	Rate      float64            `json:"rate"`
	LatencyMs map[string]float64 `json:"latencyMs"`
	// The generator's own health: how late it dispatched at worst, and its CPU.
	DispatchLagMaxMs float64 `json:"dispatchLagMaxMs"`
	GeneratorCPUMs   int64   `json:"generatorCpuMs"`
}

func runReviews(args []string) {
	fs := newFlags("reviews")
	url := fs.String("url", "", "webhook URL, e.g. https://127.0.0.1:8443/mutate/nodes")
	ca := fs.String("ca", "", "PEM CA to trust (only this one)")
	insecureTLS := fs.Bool("insecure", false, "do not verify the server certificate")
	templatePath := fs.String("template", "", "AdmissionReview JSON body with the node placeholder")
	placeholder := fs.String("placeholder", "bench-node-placeholder", "string replaced by a node name everywhere in the template")
	uidPlaceholder := fs.String("uid-placeholder", "bench-uid-placeholder", "string replaced by a fresh uid per request; absent from the template: its request.uid value is replaced")
	prefix, count, rate, duration, warmup, timeout := loadFlags(fs, 1000, 5*time.Second, "requests")
	connections := fs.Int("connections", 64, "most keep-alive connections")
	checkUID := fs.Bool("check-uid", true, "require response.uid to equal the request's uid (false for reference servers with a fixed answer)")
	fs.Parse(args)

	if *url == "" || *templatePath == "" {
		fatalf("reviews: --url and --template are required")
	}
	if u, err := neturl.Parse(*url); err != nil || u.Scheme != "https" || u.Host == "" {
		fatalf("reviews: --url %q: want https://host:port/path (webhooks are served over TLS)", *url)
	}
	if *count < 1 || *rate <= 0 || *connections < 1 {
		fatalf("reviews: --count, --rate and --connections must be positive")
	}
	if *ca == "" && !*insecureTLS {
		fatalf("reviews: pass --ca <gateway CA PEM> (or --insecure)")
	}
	tmpl, err := loadTemplate(*templatePath, *placeholder, *uidPlaceholder)
	if err != nil {
		fatalf("reviews: %v", err)
	}
	var pool *x509.CertPool
	if !*insecureTLS {
		if pool, err = caPool(*ca); err != nil {
			fatalf("reviews: %v", err)
		}
	}
	u, _ := neturl.Parse(*url)
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	// HTTP/1.1 keep-alive, as the API server speaks to webhooks.
	tlsConf := &tls.Config{RootCAs: pool, InsecureSkipVerify: *insecureTLS, ServerName: u.Hostname(),
		MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	conns := newH1Pool(addr, u.Host, u.RequestURI(), tlsConf, *connections)

	nodes := names(*prefix, *count)
	stride := coprimeStride(*count)
	var runID [8]byte
	rand.Read(runID[:])
	uidBase := fmt.Sprintf("%08x-%04x-4%03x", binary.BigEndian.Uint32(runID[:4]), binary.BigEndian.Uint16(runID[4:6]), binary.BigEndian.Uint16(runID[6:])&0xfff)

	var sent, answered, ok atomic.Int64
	var errs counts
	var lat latencies
	var lastAnswer atomic.Int64
	loop := &openLoop{rate: *rate, warmup: *warmup, duration: *duration}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	stopProgress := progress(func() string {
		return fmt.Sprintf("sent %d, answered %d, ok %d, errors %s", sent.Load(), answered.Load(), ok.Load(), fmtCounts(errs.snapshot()))
	})

	logf("reviews: %.0f/s to %s for %s after %s warm-up, %d nodes, stride %d", *rate, *url, *duration, *warmup, *count, stride)
	cpu0 := cpuMs()
	loop.run(ctx, func(k int, due time.Time, measured bool) {
		if measured {
			sent.Add(1)
		}
		conns.submit(func(c *h1Conn) {
			uid := fmt.Sprintf("%s-8%03x-%012x", uidBase, k>>48&0xfff, k&0xffffffffffff)
			kind, gotAnswer := review(c, tmpl, nodes[(k*stride)%*count], uid, due.Add(*timeout), *checkUID)
			took := time.Since(due)
			if !measured {
				return
			}
			if gotAnswer {
				answered.Add(1)
				lat.add(took)
			}
			if kind == "" {
				ok.Add(1)
				lastAnswer.Store(time.Now().UnixNano())
				return
			}
			if errs.add(kind) == 1 {
				logf("reviews: first %q error", kind)
			}
		})
	})
	conns.wait()
	cpu := cpuMs() - cpu0

	// Achieved rate: answers that passed per second of the window as it
	// actually ran (to the last good answer), not the rate asked for.
	achieved := 0.0
	if span := time.Duration(lastAnswer.Load() - loop.measuredStart.UnixNano()); span > 0 {
		achieved = float64(ok.Load()) / span.Seconds()
	}
	stopProgress()
	printResult(reviewsResult{
		Sent: sent.Load(), Answered: answered.Load(), OK: ok.Load(), Errors: errs.snapshot(),
		Rate:             round3(achieved),
		LatencyMs:        lat.percentiles(50, 90, 99, 99.9),
		DispatchLagMaxMs: round3(float64(loop.maxLag) / float64(time.Millisecond)),
		GeneratorCPUMs:   cpu,
	})
}

// review sends one AdmissionReview and returns "" if the answer is a 200
// that allows this very request, else the error kind; answered: a whole HTTP
// answer came back (whatever its status), so its latency means something.
func review(c *h1Conn, t *reviewTemplate, node, uid string, deadline time.Time, checkUID bool) (kind string, answered bool) {
	if !time.Now().Before(deadline) {
		// Queued behind busy connections past the timeout: the API server
		// would have given up on it too.
		return "timeout", false
	}
	c.req = t.appendTo(c.request(t.renderedLen(node, uid)), node, uid)
	status, answer, err := c.roundTrip(c.req, deadline)
	if err != nil {
		return transportKind(err), false
	}
	if status != http.StatusOK {
		return "status-" + strconv.Itoa(status), true
	}
	var got struct {
		Response *struct {
			UID     string `json:"uid"`
			Allowed bool   `json:"allowed"`
		} `json:"response"`
	}
	if json.Unmarshal(answer, &got) != nil || got.Response == nil {
		return "bad-json", true
	}
	if checkUID && got.Response.UID != uid {
		return "uid-mismatch", true
	}
	if !got.Response.Allowed {
		return "not-allowed", true
	}
	return "", true
}

func transportKind(err error) string {
	var dialErr dialError
	var certErr *tls.CertificateVerificationError
	var alert tls.AlertError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return "timeout"
	case errors.As(err, &certErr):
		return "tls-verify"
	case errors.As(err, &alert):
		return "tls"
	case errors.As(err, &dialErr):
		return "connect"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "eof"
	}
	return "transport"
}

func names(prefix string, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(i)
	}
	return out
}

// coprimeStride walks every node once per count requests with consecutive
// requests far apart (k*stride mod count is a permutation when gcd is 1):
// each node is named equally often and never twice in a row.
func coprimeStride(count int) int {
	if count <= 2 {
		return 1
	}
	for s := int(float64(count) * 0.618); ; s++ {
		if gcd(s, count) == 1 {
			return s
		}
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
