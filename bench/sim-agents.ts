// Many simulated agents in one process: each a real AgentStream.Report stream
// (hello, then one sample a second), spread over several HTTP/2 connections
// the way separate agent pods would be. Run as a child process so its CPU is
// not the gateway's:  node --import tsx bench/sim-agents.ts <address> <count> [prefix]
// Prints "ready <n>" once every stream is welcomed, then "sent <n>" every 5 s
// and once more on SIGTERM.
import * as grpc from '@grpc/grpc-js';
import type { GatewayMessage__Output } from '../proto/gen/oversell/v1/GatewayMessage.js';
import { oversellV1 } from '../proto/load.js';

const [address = '127.0.0.1:50051', countText = '100', prefix = 'sim'] = process.argv.slice(2);
const count = Number(countText);
// At most 100 streams a connection: the gateway allows 100 concurrent streams (GRPC_SERVER_OPTIONS), and a stream past that waits unwelcomed.
const CHANNELS = Math.max(1, Math.ceil(count / 100));
const V1 = oversellV1();
const clients = Array.from({ length: CHANNELS }, (_, i) =>
  // A distinct option per channel keeps grpc-js from sharing one connection.
  new V1.AgentStream(address, grpc.credentials.createInsecure(), { 'grpc.primary_user_agent': `sim-${i}`, 'grpc.max_concurrent_streams': 1000 }),
);

let welcomed = 0;
let sent = 0;
const streams: Array<{ call: grpc.ClientDuplexStream<unknown, GatewayMessage__Output>; seq: number; name: string }> = [];
for (let i = 0; i < count; i++) {
  const client = clients[i % CHANNELS]!;
  const call = client.Report() as grpc.ClientDuplexStream<unknown, GatewayMessage__Output>;
  const name = `${prefix}-${i}`;
  call.on('data', (m: GatewayMessage__Output) => {
    if (m.welcome) {
      welcomed += 1;
      if (welcomed === count) process.stdout.write(`ready ${count}\n`);
    }
  });
  call.on('error', (e: grpc.ServiceError) => process.stderr.write(`stream ${name}: ${e.details}\n`));
  call.write({ hello: { nodeName: name, instanceId: `${name}-1`, agentVersion: 'sim' } });
  streams.push({ call, seq: 0, name });
}

// Real agents tick on their own 1 s timers with unrelated phases, so their
// samples reach the gateway as a near-even stream, a few at a time. Sending
// each second's samples in 20 bursts (500 every 50 ms at 10,000 agents) made
// the gateway work through ~20 ms of samples at once, 20 times a second, and
// any query arriving meanwhile waited behind a burst: a queue no fleet of
// independent agents builds. Here agent i sends at i/count of each second:
// every couple of milliseconds the samples that have come due by elapsed time.
// It costs the gateway more (measured at 10,000: ~450 -> ~700 millicores):
// a burst reached it as a few large reads per connection, an even stream as
// one small read per sample, which is what agents on their own connections
// send; the old figure was the optimistic one.
const TICK_MS = 2;
const start = performance.now();
let due = 0;
setInterval(() => {
  const target = Math.floor(((performance.now() - start) * count) / 1000);
  for (; due < target; due++) {
    const s = streams[due % count];
    if (!s) continue;
    s.seq += 1;
    s.call.write({
      sample: {
        seq: s.seq, timestampMs: Date.now(), cpuUsageMillicores: 500 + (s.seq % 7) * 100, memoryWorkingSetBytes: 4 * 2 ** 30,
        capacity: { cpuMillicores: 8000, memoryBytes: 32 * 2 ** 30 },
        pressure: { available: true, cpuSome: { avg10: 1, avg60: 1 }, cpuFull: { avg10: 0, avg60: 0 }, memorySome: { avg10: 0, avg60: 0 }, memoryFull: { avg10: 0, avg60: 0 } },
        requests: { cpuMillicores: 6000, memoryBytes: 20 * 2 ** 30, podCount: 30, known: true },
      },
    });
    sent += 1;
  }
}, TICK_MS);
setInterval(() => process.stdout.write(`sent ${sent}\n`), 5000);
process.on('SIGTERM', () => {
  process.stdout.write(`sent ${sent}\n`); // the final count, for comparing with what the gateway stored
  process.exit(0);
});
