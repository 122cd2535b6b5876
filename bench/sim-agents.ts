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
const CHANNELS = Math.min(64, Math.max(1, Math.ceil(count / 200)));
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

// Spread each second's samples over the second, as independent agents would be.
const slice = 50;
let cursor = 0;
setInterval(() => {
  const batch = Math.ceil(count / (1000 / slice));
  for (let k = 0; k < batch; k++) {
    const s = streams[cursor];
    cursor = (cursor + 1) % count;
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
}, slice);
setInterval(() => process.stdout.write(`sent ${sent}\n`), 5000);
process.on('SIGTERM', () => {
  process.stdout.write(`sent ${sent}\n`); // the final count, for comparing with what the gateway stored
  process.exit(0);
});
