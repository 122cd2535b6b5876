package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
)

type agentsResult struct {
	Agents int `json:"agents"`
	// Welcomed: agents welcomed at least once; connectedAtEnd: on a live stream at the end.
	Welcomed       int64 `json:"welcomed"`
	ConnectedAtEnd int64 `json:"connectedAtEnd"`
	Sent           int64 `json:"sent"`
	// Messages: what carried the samples sent (fewer with --batch).
	Messages int64 `json:"messages"`
	// MessageBytes: the protobuf bytes of those messages (no gRPC, HTTP/2 or TLS framing).
	MessageBytes int64            `json:"messageBytes"`
	StreamErrors map[string]int64 `json:"streamErrors"`
	Reconnects   int64            `json:"reconnects"`
	// ConnectMs: start to the last agent's first welcome; -1 if some never were.
	ConnectMs int64 `json:"connectMs"`
	// Samples that fell due while the agent's previous one was still inside
	// SendMsg (its stream would not take it): skipped, not queued.
	SamplesSkippedBusy int64 `json:"samplesSkippedBusy"`
	// Samples that fell due while the agent was reconnecting.
	SamplesSkippedDisconnected int64 `json:"samplesSkippedDisconnected"`
	// Wall time inside SendMsg over all samples: flow-control and socket
	// waits, and on a busy machine the CPU queueing of the sending goroutine.
	SendMsgWallMs  int64 `json:"sendMsgWallMs"`
	GeneratorCPUMs int64 `json:"generatorCpuMs"`
	// With --batch 0: Settings messages received after the welcome (the
	// gateway's load shedder changing the send interval), and how many
	// agents sent how many samples a message at the end.
	SettingsReceived int64            `json:"settingsReceived"`
	BatchAtEnd       map[string]int64 `json:"batchAtEnd"`
}

// An agent is never welcomed (new), on a welcomed stream (live), or between
// streams after one failed (retrying).
const (
	stateNew int32 = iota
	stateLive
	stateRetrying
)

type agent struct {
	node, token string
	conn        *grpc.ClientConn
	// due hands the agent its next sample; capacity 1 so the scheduler never
	// blocks on it.
	due   chan struct{}
	state atomic.Int32
	seq   uint64 // this agent's goroutine only
	// pending: samples taken and not yet sent, with --batch (this agent's goroutine only).
	pending [][]byte
	// batch: samples a message now, from --batch or what the gateway said.
	batch atomic.Int64
	// every: one due sample in every is taken (the load shedder's
	// min_sample_interval_ms over the sampling interval; 1: each); dues
	// counts them (this agent's goroutine only).
	every atomic.Int64
	dues  int64
	// index: this agent's place in the run; short: how many samples its
	// first batch of a stream lacks (index mod the batch), so batches leave
	// spread over the batch period as independent agents' do, not all in the
	// same second because the agents connected together (which hid a
	// per-message cost: docs/performance-log.md, 2026-12-06).
	index, short int
}

type agentsRun struct {
	msgs     *agentMessages
	agents   []*agent
	interval time.Duration
	// batch: samples per message; above 1 they go as one SampleBatch; 0:
	// as the gateway says (followGateway).
	batch int
	start time.Time
	// dialSem bounds first connections in flight: 10,000 simultaneous TLS
	// handshakes would measure the thundering herd, not steady state.
	dialSem chan struct{}

	welcomed, live, sent, messages, messageBytes, reconnects atomic.Int64
	skippedBusy, skippedDown, sendWaitNs, settingsReceived   atomic.Int64
	connectMs                                                atomic.Int64
	errs                                                     counts
	deniedMu                                                 sync.Mutex
	denied                                                   map[string]bool // messages already shown
	shown                                                    map[string]int  // per code
}

func runAgents(args []string) {
	fs := newFlags("agents")
	var target grpcTarget
	target.register(fs)
	protoPath := fs.String("proto", "", "path to proto/oversell/v1/oversell.proto")
	tokensPath := fs.String("tokens", "", `file with one line per agent: "<nodeName> <bearer token>" ("-": no authorization)`)
	interval := fs.Duration("interval", time.Second, "sample interval of each agent")
	dialConcurrency := fs.Int("dial-concurrency", 64, "first connections (TCP+TLS+hello) in flight at once")
	batch := fs.Int("batch", 1, "samples per message: above 1, each agent sends its last N samples as one SampleBatch every N intervals, as a steady agent does under the gateway's send_every_ms (--interval 1s --batch 5: one message per 5 s); 0: as the gateway says in its welcome and later Settings (the load shedder's interval), as the agent does")
	summaries := fs.Int("summaries", 0, "window summaries each sample carries (Sample.summaries), as an agent sends them to a gateway with --agent-summaries on; with --batch 0 and a gateway naming plans, one sample is sent every send_every_ms")
	pods := fs.Int("pods", 0, "pods in each pod report (Sample.pods, 2 containers each), as a real agent reports its node's pods")
	podEvery := fs.Int("pod-report-every", 10, "with --pods: every Nth sample carries the pod report (the agent's --pod-report-every; with summaries it reports once per message: 1)")
	fs.Parse(args)

	if *interval <= 0 || *dialConcurrency < 1 || *batch < 0 || *pods < 0 || *podEvery < 1 {
		fatalf("agents: --interval, --dial-concurrency and --pod-report-every must be positive, --batch and --pods 0 or more")
	}
	msgs, err := newAgentMessages(mustContract(*protoPath), *summaries, *pods, *podEvery)
	if err != nil {
		fatalf("agents: %v", err)
	}
	addr, creds, err := target.dialOptions()
	if err != nil {
		fatalf("agents: %v", err)
	}
	tokens, err := readTokens(*tokensPath)
	if err != nil {
		fatalf("agents: %v", err)
	}
	r := &agentsRun{msgs: msgs, interval: *interval, batch: *batch, dialSem: make(chan struct{}, *dialConcurrency), denied: map[string]bool{}, shown: map[string]int{}}
	r.connectMs.Store(-1)
	for _, t := range tokens {
		// Each agent its own ClientConn (own TCP connection and TLS session),
		// as deployed agents have. Small buffers and a shared write buffer
		// keep 10,000 of them within a few GB: an agent sends ~150 bytes a
		// second and reads fewer.
		conn, err := grpc.NewClient(addr, creds,
			grpc.WithNoProxy(),
			grpc.WithUserAgent("oversell-loadgen"),
			grpc.WithReadBufferSize(8<<10),
			grpc.WithWriteBufferSize(8<<10),
			grpc.WithSharedWriteBuffer(true),
			grpc.WithInitialWindowSize(64<<10),
			grpc.WithInitialConnWindowSize(64<<10),
		)
		if err != nil {
			fatalf("agents: --address %s: %v", target.address, err)
		}
		r.agents = append(r.agents, &agent{node: t[0], token: t[1], conn: conn, due: make(chan struct{}, 1), index: len(r.agents)})
	}

	// Agents run until the process exits: a signal only ends the run, so the
	// counts printed are those of the streams as they were, not as they closed.
	ctx := context.Background()
	stopped, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	n := len(r.agents)
	perMessage := fmt.Sprint(*batch)
	if *batch == 0 {
		perMessage = "as the gateway says"
	}
	logf("agents: %d agents to %s, one sample each per %s, %s a message", n, target.address, *interval, perMessage)
	cpu0 := cpuMs()
	r.start = time.Now()
	for _, a := range r.agents {
		go r.agentLoop(ctx, a)
	}
	go r.schedule(ctx)
	stopProgress := progress(func() string {
		return fmt.Sprintf("connected %d/%d, sent %d, errors %s", r.live.Load(), n, r.sent.Load(), fmtCounts(r.errs.snapshot()))
	})
	// Every second on stdout, for a harness that needs the counts at a
	// moment of its own (the replicas benchmark's kill), not only at the end.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for range t.C {
			status, _ := json.Marshal(map[string]any{"live": r.live.Load(), "reconnects": r.reconnects.Load(), "streamErrors": r.errs.snapshot(), "messages": r.messages.Load()})
			say("status %s", status)
		}
	}()
	<-stopped.Done()
	// Exit without closing 10,000 connections one by one: the harness wants
	// the result now, and the kernel closes them as fast.
	stopProgress()
	printResult(agentsResult{
		Agents: n, Welcomed: r.welcomed.Load(), ConnectedAtEnd: r.live.Load(), Sent: r.sent.Load(), Messages: r.messages.Load(), MessageBytes: r.messageBytes.Load(),
		StreamErrors: r.errs.snapshot(), Reconnects: r.reconnects.Load(), ConnectMs: r.connectMs.Load(),
		SamplesSkippedBusy: r.skippedBusy.Load(), SamplesSkippedDisconnected: r.skippedDown.Load(),
		SendMsgWallMs: r.sendWaitNs.Load() / int64(time.Millisecond), GeneratorCPUMs: cpuMs() - cpu0,
		SettingsReceived: r.settingsReceived.Load(), BatchAtEnd: r.batchAtEnd(),
	})
	os.Exit(0)
}

// followGateway sets the agent's samples a message from what the gateway
// said, as the agent's ReportStream does: a batch goes when its oldest
// sample is send_every_ms old (so one more sample than fits the interval),
// at most max_batch_samples; a max_batch_samples of 0 or 1 (a gateway before
// batches) means one sample a message. A later Settings without batches
// keeps the current value, as the agent does. A gateway naming summary
// plans takes one sample every send_every_ms (the agent keeps the rest in its
// own window): one due sample in send_every_ms / --interval is sent, alone.
func (r *agentsRun) followGateway(a *agent, s sendingSettings, welcome bool) {
	iv := uint64(r.interval.Milliseconds())
	every := max(1, (s.minSampleMs+iv-1)/iv)
	if s.plans > 0 {
		every = max(every, s.sendEveryMs/iv)
		a.batch.Store(1)
		a.every.Store(int64(every))
		return
	}
	a.every.Store(int64(every))
	sendEveryMs, maxBatch := s.sendEveryMs, s.maxBatch
	if maxBatch <= 1 {
		if welcome {
			a.batch.Store(1)
		}
		return
	}
	a.batch.Store(int64(min(maxBatch, sendEveryMs/(iv*every)+1)))
}

func (r *agentsRun) batchAtEnd() map[string]int64 {
	out := map[string]int64{}
	for _, a := range r.agents {
		out[fmt.Sprint(a.batch.Load())]++
	}
	return out
}

// schedule gives agent i its sample at offset i/N of every interval, so N
// agents make one even stream of samples as independent agents do. One
// goroutine on a 2 ms tick instead of N timers; the hand-off is
// non-blocking, so an agent stuck in SendMsg (flow control, a slow gateway)
// loses its own sample, counted, and never delays anyone else's.
func (r *agentsRun) schedule(ctx context.Context) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	n, iv := int64(len(r.agents)), int64(r.interval)
	dueAt := func(slot int64) int64 { return slot/n*iv + slot%n*iv/n }
	var slot int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		elapsed := int64(time.Since(r.start))
		for ; dueAt(slot) <= elapsed; slot++ {
			a := r.agents[slot%n]
			switch a.state.Load() {
			case stateLive:
				select {
				case a.due <- struct{}{}:
				default:
					r.skippedBusy.Add(1)
				}
			case stateRetrying:
				r.skippedDown.Add(1)
			}
		}
	}
}

func readTokens(path string) ([][2]string, error) {
	if path == "" {
		return nil, fmt.Errorf("--tokens is required: one line per agent, \"<nodeName> <token>\" (token - for none)")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--tokens: %v", err)
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20) // service-account tokens are long
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		parts := strings.Fields(text)
		if len(parts) != 2 {
			return nil, fmt.Errorf("--tokens %s line %d: want \"<nodeName> <token>\", got %d fields", path, line, len(parts))
		}
		if parts[1] == "-" {
			parts[1] = ""
		}
		out = append(out, [2]string{parts[0], parts[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--tokens %s: %v", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--tokens %s lists no agent", path)
	}
	return out, nil
}
