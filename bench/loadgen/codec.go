package main

import (
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// The agents' streams use this codec: 10,000 agents send 10,000 samples a
// second from a generator that shares two cores with the gateway it
// measures, and reflection-marshalling each dynamicpb sample, then decoding
// every ack into one, was a third of the generator's CPU. Samples go out as
// wire bytes made by sampleFrame, acks are dropped undecoded; everything
// else (hello, welcome) goes through grpc's own proto codec.
type agentCodec struct{}

// wireFrame is an already encoded message.
type wireFrame []byte

// discard receives a message nobody reads.
type discard struct{}

var protoCodec = encoding.GetCodecV2(grpcproto.Name)

// Name is the default codec's, so the stream's content-type stays the
// application/grpc+proto the gateway expects.
func (agentCodec) Name() string { return grpcproto.Name }

func (agentCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(wireFrame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f)}, nil
	}
	return protoCodec.Marshal(v)
}

func (agentCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if _, ok := v.(*discard); ok {
		return nil
	}
	return protoCodec.Unmarshal(data, v)
}
