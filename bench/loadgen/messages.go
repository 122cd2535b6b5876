package main

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

const gib = 1 << 30

// agentMessages builds what a simulated agent sends, from the contract by
// field name. Everything is resolved once at start so a contract change
// stops the run before the first connection.
type agentMessages struct {
	agentMessage, gatewayMessage, sample protoreflect.MessageDescriptor
	fHello, fSample, fWelcome, fLastSeq  protoreflect.FieldDescriptor
	// fBatch: AgentMessage.batch; fBatchSamples: SampleBatch.samples.
	fBatch, fBatchSamples protoreflect.FieldDescriptor
	// What the gateway says about sending: GatewayMessage.settings,
	// Welcome.settings, Settings.send_every_ms and max_batch_samples.
	fSettings, fWelcomeSettings, fSendEvery, fMaxBatch, fMinSample protoreflect.FieldDescriptor
	// fPlans: Settings.summary_plans (a gateway with --agent-summaries on names them).
	fPlans protoreflect.FieldDescriptor
	// fTakesNames: Settings.takes_pod_names_as_before.
	fTakesNames protoreflect.FieldDescriptor
	fSeq, fTimestamp, fCPU                                         protoreflect.FieldDescriptor
	// constant holds the fields every sample shares; constantWire is its
	// encoding, to which each sample appends its own seq, time and CPU.
	constant     *dynamicpb.Message
	constantWire []byte
	// withPods: constant and a pod report of the given pods (pods_included,
	// each pod with a sandbox and an app container); podWire its encoding.
	// Sample seq carries it when podEvery > 0 and seq % podEvery == 1 (or
	// every sample at podEvery 1), as the agent's --pod-report-every does.
	withPods *dynamicpb.Message
	podWire  []byte
	podEvery uint64
	// unnamedPods: withPods without the pods' names (pod_names_as_before),
	// what an agent sends a gateway that takes it between named reports
	// (NamesAgainEvery); unnamedWire its encoding.
	unnamedPods *dynamicpb.Message
	unnamedWire []byte
}

// NamesAgainEvery is the agent's NAMES_AGAIN_EVERY (agent/stream/report-stream.ts):
// to a gateway that takes reports without names, the first pod report of a
// stream and every 15th after it name the pods.
const NamesAgainEvery = 15

func newAgentMessages(c *contract, summaries, pods, podEvery int) (*agentMessages, error) {
	m := &agentMessages{podEvery: uint64(podEvery)}
	var err error
	for _, step := range []func() error{
		func() (e error) { m.agentMessage, e = c.message("AgentMessage"); return },
		func() (e error) { m.gatewayMessage, e = c.message("GatewayMessage"); return },
		func() (e error) { m.sample, e = c.message("Sample"); return },
		func() (e error) { m.fHello, e = field(m.agentMessage, "hello"); return },
		func() (e error) { m.fSample, e = field(m.agentMessage, "sample"); return },
		func() (e error) { m.fBatch, e = field(m.agentMessage, "batch"); return },
		func() (e error) { m.fBatchSamples, e = field(m.fBatch.Message(), "samples"); return },
		func() (e error) { m.fWelcome, e = field(m.gatewayMessage, "welcome"); return },
		func() (e error) { m.fLastSeq, e = field(m.fWelcome.Message(), "last_seq"); return },
		func() (e error) { m.fSettings, e = field(m.gatewayMessage, "settings"); return },
		func() (e error) { m.fWelcomeSettings, e = field(m.fWelcome.Message(), "settings"); return },
		func() (e error) { m.fSendEvery, e = field(m.fSettings.Message(), "send_every_ms"); return },
		func() (e error) { m.fMaxBatch, e = field(m.fSettings.Message(), "max_batch_samples"); return },
		func() (e error) { m.fMinSample, e = field(m.fSettings.Message(), "min_sample_interval_ms"); return },
		func() (e error) { m.fPlans, e = field(m.fSettings.Message(), "summary_plans"); return },
		func() (e error) { m.fTakesNames, e = field(m.fSettings.Message(), "takes_pod_names_as_before"); return },
		func() (e error) { m.fSeq, e = field(m.sample, "seq"); return },
		func() (e error) { m.fTimestamp, e = field(m.sample, "timestamp_ms"); return },
		func() (e error) { m.fCPU, e = field(m.sample, "cpu_usage_millicores"); return },
		func() (e error) {
			m.constant, e = newMessage(m.sample, fields{
				"memory_working_set_bytes": 4 * gib,
				"capacity":                 fields{"cpu_millicores": 8000, "memory_bytes": 32 * gib},
				"pressure": fields{
					"available":   true,
					"cpu_some":    fields{"avg10": 1.0, "avg60": 1.0},
					"cpu_full":    fields{"avg10": 0.0, "avg60": 0.0},
					"memory_some": fields{"avg10": 0.0, "avg60": 0.0},
					"memory_full": fields{"avg10": 0.0, "avg60": 0.0},
				},
				"requests": fields{"cpu_millicores": 6000, "memory_bytes": 20 * gib, "pod_count": 30, "known": true},
			})
			return
		},
		// Summaries of a steady 5-minute window: the same in every sample (what they cost the gateway is the question, not their figures).
		func() error {
			if summaries == 0 {
				return nil
			}
			fd, e := field(m.sample, "summaries")
			if e != nil {
				return e
			}
			list := m.constant.Mutable(fd).List()
			for i := 0; i < summaries; i++ {
				el := list.NewElement()
				if e := fill(el.Message(), fields{"plan_id": i + 1, "samples": 300, "cpu_millicores": 1000, "memory_bytes": 4 * gib}); e != nil {
					return e
				}
				list.Append(el)
			}
			// Every message goes on the beat (the loadgen sends no rises): the gateway may hold it before its store has it.
			return fill(m.constant, fields{"on_beat": true})
		},
		// A pod report of a node's pods: what a real agent adds to every
		// --pod-report-every-th sample (30 pods, 2 containers each, ~5 KB).
		func() error {
			if pods == 0 || podEvery == 0 {
				return nil
			}
			m.withPods = m.constant.New().Interface().(*dynamicpb.Message)
			m.constant.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
				m.withPods.Set(fd, v)
				return true
			})
			fIncluded, e := field(m.sample, "pods_included")
			if e != nil {
				return e
			}
			fPods, e := field(m.sample, "pods")
			if e != nil {
				return e
			}
			m.withPods.Set(fIncluded, protoreflect.ValueOfBool(true))
			list := m.withPods.Mutable(fPods).List()
			for i := 0; i < pods; i++ {
				el := list.NewElement()
				if e := fill(el.Message(), fields{
					"uid": fmt.Sprintf("00000000-0000-4000-8000-%012d", i), "qos_class": "burstable",
					"cpu_usage_millicores": 100 + i, "memory_working_set_bytes": 128 << 20, "cpu_throttled_micros": 0,
				}); e != nil {
					return e
				}
				fContainers, e := field(el.Message().Descriptor(), "containers")
				if e != nil {
					return e
				}
				containers := el.Message().Mutable(fContainers).List()
				for j, cpu := range []int{1, 99 + i} {
					c := containers.NewElement()
					if e := fill(c.Message(), fields{"container_id": fmt.Sprintf("%062x%02x", i, j), "cpu_usage_millicores": cpu, "memory_working_set_bytes": 64 << 20}); e != nil {
						return e
					}
					containers.Append(c)
				}
				list.Append(el)
			}
			return m.buildUnnamed(fPods)
		},
		// The varying fields too, once, so their kinds are checked at start.
		func() error {
			_, e := newMessage(m.sample, fields{"seq": 1, "timestamp_ms": 1, "cpu_usage_millicores": 1})
			return e
		},
		func() error { _, e := m.hello("n"); return e },
		m.checkFrame,
	} {
		if err = step(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// buildUnnamed makes unnamedPods from withPods: every uid, qos_class and
// container_id cleared, pod_names_as_before set.
func (m *agentMessages) buildUnnamed(fPods protoreflect.FieldDescriptor) error {
	m.unnamedPods = proto.Clone(m.withPods).(*dynamicpb.Message)
	list := m.unnamedPods.Mutable(fPods).List()
	for i := 0; i < list.Len(); i++ {
		pod := list.Get(i).Message()
		for _, name := range []string{"uid", "qos_class"} {
			fd, e := field(pod.Descriptor(), name)
			if e != nil {
				return e
			}
			pod.Clear(fd)
		}
		fContainers, e := field(pod.Descriptor(), "containers")
		if e != nil {
			return e
		}
		containers := pod.Mutable(fContainers).List()
		for j := 0; j < containers.Len(); j++ {
			c := containers.Get(j).Message()
			fd, e := field(c.Descriptor(), "container_id")
			if e != nil {
				return e
			}
			c.Clear(fd)
		}
	}
	return fill(m.unnamedPods, fields{"pod_names_as_before": true})
}

func (m *agentMessages) hello(node string) (*dynamicpb.Message, error) {
	return newMessage(m.agentMessage, fields{"hello": fields{
		"node_name": node, "instance_id": node + "-1", "agent_version": "loadgen",
		// As the agent does: it is acknowledged at the interval its settings say.
		"reads_summary_ack_every": true,
	}})
}

// sampleMessage is AgentMessage{sample} built by reflection: the reference
// sampleFrame is checked against at start.
func (m *agentMessages) sampleMessage(seq uint64, nowMs int64, unnamed bool) *dynamicpb.Message {
	s := dynamicpb.NewMessage(m.sample)
	constant := m.constant
	if m.hasPods(seq) {
		constant = m.withPods
		if unnamed {
			constant = m.unnamedPods
		}
	}
	constant.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		s.Set(fd, v)
		return true
	})
	s.Set(m.fSeq, protoreflect.ValueOfUint64(seq))
	s.Set(m.fTimestamp, protoreflect.ValueOfInt64(nowMs))
	s.Set(m.fCPU, protoreflect.ValueOfInt64(cpuFor(seq)))
	am := dynamicpb.NewMessage(m.agentMessage)
	am.Set(m.fSample, protoreflect.ValueOfMessage(s))
	return am
}

func cpuFor(seq uint64) int64 { return int64(500 + (seq%7)*100) }

// hasPods: whether sample seq carries the pod report.
func (m *agentMessages) hasPods(seq uint64) bool {
	return m.withPods != nil && (m.podEvery == 1 || seq%m.podEvery == 1)
}

// sampleFrame encodes AgentMessage{sample} without reflection: the constant
// fields' bytes, then seq, timestamp and CPU as varints under the field
// numbers the contract gives them (proto fields may come in any order).
// unnamed: a pod report goes without its names (pod_names_as_before).
func (m *agentMessages) sampleFrame(seq uint64, nowMs int64, unnamed bool) wireFrame {
	inner := m.sampleBytes(seq, nowMs, unnamed)
	out := make([]byte, 0, len(inner)+8)
	out = protowire.AppendTag(out, m.fSample.Number(), protowire.BytesType)
	return protowire.AppendBytes(out, inner)
}

// sampleBytes is one Sample's encoding, as sampleFrame and batchFrame carry it.
func (m *agentMessages) sampleBytes(seq uint64, nowMs int64, unnamed bool) []byte {
	constant := m.constantWire
	if m.hasPods(seq) {
		constant = m.podWire
		if unnamed {
			constant = m.unnamedWire
		}
	}
	inner := make([]byte, 0, len(constant)+40)
	inner = append(inner, constant...)
	inner = protowire.AppendTag(inner, m.fSeq.Number(), protowire.VarintType)
	inner = protowire.AppendVarint(inner, seq)
	inner = protowire.AppendTag(inner, m.fTimestamp.Number(), protowire.VarintType)
	inner = protowire.AppendVarint(inner, uint64(nowMs))
	inner = protowire.AppendTag(inner, m.fCPU.Number(), protowire.VarintType)
	return protowire.AppendVarint(inner, uint64(cpuFor(seq)))
}

// batchFrame encodes AgentMessage{batch: SampleBatch{samples}} from samples
// encoded by sampleBytes: what a steady agent sends every send_every_ms.
func (m *agentMessages) batchFrame(samples [][]byte) wireFrame {
	var batch []byte
	for _, s := range samples {
		batch = protowire.AppendTag(batch, m.fBatchSamples.Number(), protowire.BytesType)
		batch = protowire.AppendBytes(batch, s)
	}
	out := make([]byte, 0, len(batch)+8)
	out = protowire.AppendTag(out, m.fBatch.Number(), protowire.BytesType)
	return protowire.AppendBytes(out, batch)
}

// checkFrame makes sure at start that sampleFrame's bytes decode to exactly
// the message built by field name, so the fast path cannot drift from the
// contract (a field turned sint64 or fixed64 would fail here).
func (m *agentMessages) checkFrame() error {
	for _, f := range []protoreflect.FieldDescriptor{m.fSeq, m.fTimestamp, m.fCPU} {
		switch f.Kind() {
		case protoreflect.Uint64Kind, protoreflect.Int64Kind:
		default:
			return fmt.Errorf("field %s is %s; loadgen encodes it as a varint int64/uint64: update sampleFrame", f.FullName(), f.Kind())
		}
	}
	var err error
	if m.constantWire, err = proto.Marshal(m.constant); err != nil {
		return err
	}
	if m.withPods != nil {
		if m.podWire, err = proto.Marshal(m.withPods); err != nil {
			return err
		}
		if m.unnamedWire, err = proto.Marshal(m.unnamedPods); err != nil {
			return err
		}
		// A sample with the pod report, named or not, decodes to the message built by field name too.
		for _, unnamed := range []bool{false, true} {
			want := m.sampleMessage(1, 1_790_000_000_000, unnamed)
			got := dynamicpb.NewMessage(m.agentMessage)
			if err := proto.Unmarshal(m.sampleFrame(1, 1_790_000_000_000, unnamed), got); err != nil || !proto.Equal(want, got) {
				return fmt.Errorf("a sample with pods (unnamed %v) encodes %v, the contract's message is %v (%v)", unnamed, got, want, err)
			}
		}
	}
	want := m.sampleMessage(12345, 1_790_000_000_000, false)
	got := dynamicpb.NewMessage(m.agentMessage)
	if err := proto.Unmarshal(m.sampleFrame(12345, 1_790_000_000_000, false), got); err != nil {
		return fmt.Errorf("sampleFrame does not decode: %v", err)
	}
	if !proto.Equal(want, got) {
		return fmt.Errorf("sampleFrame encodes %v, the contract's message is %v", got, want)
	}
	// A batch of two decodes to the same samples, in order, under AgentMessage.batch.
	batch := dynamicpb.NewMessage(m.agentMessage)
	if err := proto.Unmarshal(m.batchFrame([][]byte{m.sampleBytes(1, 1_790_000_000_000, false), m.sampleBytes(2, 1_790_000_001_000, false)}), batch); err != nil {
		return fmt.Errorf("batchFrame does not decode: %v", err)
	}
	list := batch.Get(m.fBatch).Message().Get(m.fBatchSamples).List()
	if list.Len() != 2 || list.Get(1).Message().Get(m.fSeq).Uint() != 2 || !proto.Equal(list.Get(0).Message().Interface(), m.sampleMessage(1, 1_790_000_000_000, false).Get(m.fSample).Message().Interface()) {
		return fmt.Errorf("batchFrame encodes %v, not the two samples given", batch)
	}
	return nil
}

// lastSeq reads Welcome.last_seq of a GatewayMessage holding a welcome.
func (m *agentMessages) lastSeq(gm *dynamicpb.Message) uint64 {
	return gm.Get(m.fWelcome).Message().Get(m.fLastSeq).Uint()
}

func (m *agentMessages) isWelcome(gm *dynamicpb.Message) bool { return gm.Has(m.fWelcome) }

// takesNamesAsBefore reads Settings.takes_pod_names_as_before of a welcome.
func (m *agentMessages) takesNamesAsBefore(gm *dynamicpb.Message) bool {
	w := gm.Get(m.fWelcome).Message()
	return w.Has(m.fWelcomeSettings) && w.Get(m.fWelcomeSettings).Message().Get(m.fTakesNames).Bool()
}

// sending reads what a GatewayMessage says about batches, from its welcome's
// settings or a Settings message (the load shedder's change); ok is false
// when it says nothing. A max_batch_samples of 0 or 1 means no batches;
// minSampleMs above 0: the load shedder's least sampling interval; plans
// above 0: the gateway takes summaries (one sample every sendEveryMs).
func (m *agentMessages) sending(gm *dynamicpb.Message) (s sendingSettings, ok bool) {
	var st protoreflect.Message
	switch {
	case gm.Has(m.fSettings):
		st = gm.Get(m.fSettings).Message()
	case gm.Has(m.fWelcome) && gm.Get(m.fWelcome).Message().Has(m.fWelcomeSettings):
		st = gm.Get(m.fWelcome).Message().Get(m.fWelcomeSettings).Message()
	default:
		return sendingSettings{}, false
	}
	return sendingSettings{sendEveryMs: st.Get(m.fSendEvery).Uint(), maxBatch: st.Get(m.fMaxBatch).Uint(), minSampleMs: st.Get(m.fMinSample).Uint(), plans: st.Get(m.fPlans).List().Len()}, true
}

type sendingSettings struct {
	sendEveryMs, maxBatch, minSampleMs uint64
	plans                              int
}
