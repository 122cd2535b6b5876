package main

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/dynamicpb"
)

const reportMethod = "/oversell.v1.AgentStream/Report"

var reportDesc = &grpc.StreamDesc{StreamName: "Report", ServerStreams: true, ClientStreams: true}

// welcomeTimeout bounds the wait for Welcome once the stream is open: a
// gateway that takes the hello and never answers would otherwise hold a
// dial slot forever and stall every agent still to connect.
const welcomeTimeout = 30 * time.Second

var errWelcomeTimeout = errors.New("no Welcome within 30 s of the hello")

// agentLoop runs one agent's streams until ctx ends: after a failed stream it
// waits 1 s plus up to 1 s of jitter, as the real agent does, so a gateway
// shedding load is not hit by every refused agent again in the same instant.
func (r *agentsRun) agentLoop(ctx context.Context, a *agent) {
	for {
		err := r.session(ctx, a)
		if ctx.Err() != nil {
			return
		}
		r.streamError(err)
		if a.state.Load() == stateLive {
			a.state.Store(stateRetrying)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second + rand.N(time.Second)):
		}
		r.reconnects.Add(1)
	}
}

// session is one Report stream: hello, welcome, then samples as the
// scheduler hands them over. It returns the stream's end status.
func (r *agentsRun) session(ctx context.Context, a *agent) error {
	first := a.state.Load() == stateNew
	release := func() {}
	if first {
		select {
		case r.dialSem <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		held := true
		release = func() {
			if held {
				held = false
				<-r.dialSem
			}
		}
		defer release()
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.token != "" {
		sctx = metadata.AppendToOutgoingContext(sctx, "authorization", "Bearer "+a.token)
	}
	st, err := a.conn.NewStream(sctx, reportDesc, reportMethod, grpc.ForceCodecV2(agentCodec{}))
	if err != nil {
		return err
	}
	hello, err := r.msgs.hello(a.node)
	if err != nil {
		return err
	}
	if err := st.SendMsg(hello); err != nil {
		return r.endStatus(st, err)
	}
	var timedOut atomic.Bool
	timer := time.AfterFunc(welcomeTimeout, func() {
		timedOut.Store(true)
		cancel()
	})
	in := dynamicpb.NewMessage(r.msgs.gatewayMessage)
	for {
		if err := st.RecvMsg(in); err != nil {
			if timer.Stop() || !timedOut.Load() {
				return err
			}
			return errWelcomeTimeout
		}
		if r.msgs.isWelcome(in) {
			break
		}
	}
	timer.Stop()
	release()
	// The gateway remembers the last seq stored for this instance_id; a rerun
	// against the same gateway must go on from there or its samples would be
	// taken for replays.
	a.seq = max(a.seq, r.msgs.lastSeq(in))
	// As the agent does: to a gateway that takes it, a stream's pod reports
	// go without names but the first and every NamesAgainEvery-th.
	takesNames := r.msgs.takesNamesAsBefore(in)
	reports := 0
	unnamed := func(seq uint64) bool {
		if !r.msgs.hasPods(seq) {
			return false
		}
		reports++
		return takesNames && (reports-1)%NamesAgainEvery != 0
	}
	follow := r.batch == 0
	if follow {
		s, _ := r.msgs.sending(in)
		r.followGateway(a, s, true)
	} else {
		a.batch.Store(int64(r.batch))
	}
	a.short = a.index % int(max(1, a.batch.Load()))
	// One sample in every sent (summaries, shedding): agents' phases spread over the period, as a batch's are.
	a.dues = int64(a.index) % max(1, a.every.Load())
	select {
	case <-a.due: // a hand-off left from before the last stream failed
	default:
	}
	a.state.Store(stateLive)
	r.live.Add(1)
	defer r.live.Add(-1)
	if first {
		if r.welcomed.Add(1) == int64(len(r.agents)) {
			ms := time.Since(r.start).Milliseconds()
			r.connectMs.Store(ms)
			say("ready %d", len(r.agents))
			say("connected-in-ms %d", ms)
		}
	}

	// Acks are read and dropped (following the gateway, Settings change the
	// batch); the reader also learns first when the stream ends.
	ended := make(chan error, 1)
	go func() {
		var m discard
		gm := dynamicpb.NewMessage(r.msgs.gatewayMessage)
		for {
			var err error
			if follow {
				gm.Reset()
				err = st.RecvMsg(gm)
			} else {
				err = st.RecvMsg(&m)
			}
			if err != nil {
				ended <- err
				return
			}
			if follow {
				if s, ok := r.msgs.sending(gm); ok {
					r.settingsReceived.Add(1)
					r.followGateway(a, s, false)
				}
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-ended:
			return err
		case <-a.due:
			// Told to sample less often: only every every-th due sample is taken.
			if a.dues++; a.dues%max(1, a.every.Load()) != 0 {
				continue
			}
			a.seq++
			t0 := time.Now()
			var frame wireFrame
			// Pending samples go as a batch even when the gateway has just
			// said one a message: they were taken under batches.
			if size := int(a.batch.Load()); size > 1 || len(a.pending) > 0 {
				a.pending = append(a.pending, r.msgs.sampleBytes(a.seq, t0.UnixMilli(), unnamed(a.seq)))
				if len(a.pending) < size-a.short {
					continue
				}
				a.short = 0
				frame = r.msgs.batchFrame(a.pending)
			} else {
				frame = r.msgs.sampleFrame(a.seq, t0.UnixMilli(), unnamed(a.seq))
			}
			samples := int64(max(1, len(a.pending)))
			a.pending = a.pending[:0]
			err := st.SendMsg(frame)
			r.sendWaitNs.Add(int64(time.Since(t0)))
			if err != nil {
				if errors.Is(err, io.EOF) {
					// SendMsg only says the stream ended; RecvMsg has the status.
					select {
					case err = <-ended:
					case <-time.After(5 * time.Second):
					}
				}
				return err
			}
			r.sent.Add(samples)
			r.messages.Add(1)
			r.messageBytes.Add(int64(len(frame)))
		}
	}
}

// endStatus: after SendMsg reports io.EOF the stream's real status comes
// from RecvMsg.
func (r *agentsRun) endStatus(st grpc.ClientStream, err error) error {
	if !errors.Is(err, io.EOF) {
		return err
	}
	var m discard
	for {
		if rerr := st.RecvMsg(&m); rerr != nil {
			return rerr
		}
	}
}

func (r *agentsRun) streamError(err error) {
	kind := "EOF" // the gateway ended the stream with OK: still a reconnect
	switch {
	case errors.Is(err, errWelcomeTimeout):
		kind = "WELCOME_TIMEOUT"
	case err != nil && !errors.Is(err, io.EOF):
		kind = codeName(status.Code(err))
	}
	r.errs.add(kind)
	if err == nil {
		return
	}
	// The first few distinct messages of each code: a refusal's reason (a
	// token, a node binding) or why a connection failed is in its text.
	limit := 3
	if code := status.Code(err); code == codes.PermissionDenied || code == codes.Unauthenticated {
		limit = 5
	}
	msg := kind + ": " + status.Convert(err).Message()
	r.deniedMu.Lock()
	show := !r.denied[msg] && r.shown[kind] < limit
	if show {
		r.denied[msg] = true
		r.shown[kind]++
	}
	r.deniedMu.Unlock()
	if show {
		logf("agents: stream ended, %s", msg)
	}
}
