// Faults an agent or a client can cause, each against real listeners: a
// flooding agent, an agent whose clock is minutes off, and slow clients that
// try to hold the webhook's connections.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { AgentMessage } from '../proto/gen/oversell/v1/AgentMessage.js';
import type { GatewayMessage__Output } from '../proto/gen/oversell/v1/GatewayMessage.js';
import { oversellV1 } from '../proto/load.js';
import { eventually, getNode, queryClient } from './helpers/grpc.js';
import { getHttp, postHttps, startTestGateway, type TestGateway } from './helpers/gateway.js';

const fixture = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');
const NODE = 'ip-10-0-17-42.eu-west-1.compute.internal';

function stream(port: number) {
  const client = new (oversellV1().AgentStream)(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const call = client.Report() as unknown as grpc.ClientDuplexStream<AgentMessage, GatewayMessage__Output>;
  const messages: GatewayMessage__Output[] = [];
  call.on('data', (m: GatewayMessage__Output) => messages.push(m));
  call.on('error', () => {});
  return { call, messages, close: () => { call.cancel(); client.close(); } };
}

const sample = (seq: number, timestampMs: number) => ({
  sample: {
    seq, timestampMs, cpuUsageMillicores: 300, memoryWorkingSetBytes: 2 ** 31, capacity: { cpuMillicores: 8000, memoryBytes: 2 ** 35 },
    requests: { cpuMillicores: 6000, memoryBytes: 2 ** 34, podCount: 10, known: true },
  },
});

describe('faults', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway();
  });
  after(() => gw.close());

  it('an agent flooding samples is rate-limited per stream: the excess is dropped and counted, the stream lives on', async () => {
    /** Samples received so far, by what became of them. */
    const received = async () => {
      const counts = new Map<string, number>();
      for (const m of (await getHttp(gw.ports.metrics, '/metrics')).body.matchAll(/^oversell_samples_received_total\{result="([^"]+)"\} (\d+)$/gm)) counts.set(m[1]!, Number(m[2]));
      return counts;
    };
    const s = stream(gw.ports.agent);
    try {
      const started = Date.now();
      s.call.write({ hello: { nodeName: 'flooder', instanceId: 'f1' } });
      await eventually(() => s.messages[0]?.welcome, 3000, 'welcome');
      for (let i = 1; i <= 2000; i++) s.call.write(sample(i, Date.now()));
      // Every sample accounted for, however long the 2000 took to arrive (a busy machine spreads them out).
      const counts = await eventually(async () => {
        const c = await received();
        return [...c.values()].reduce((a, b) => a + b, 0) >= 2000 ? c : undefined;
      }, 10_000, 'all 2000 samples counted');
      const elapsedS = (Date.now() - started) / 1000;
      const stored = counts.get('stored') ?? 0;
      // The stream's bucket: a burst of 200 (replays), then 10 samples/s.
      assert.ok(stored <= 200 + Math.ceil(10 * elapsedS), `${stored} of 2000 stored in ${elapsedS} s`);
      assert.equal(counts.get('rate-limited'), 2000 - stored, JSON.stringify([...counts]));
      assert.ok(gw.store.get('flooder')?.latest, 'the first samples were stored');
      // The bucket refills at 10/s: after a second a sample is taken again, on the same stream.
      await new Promise((r) => setTimeout(r, 1100));
      s.call.write(sample(5000, Date.now()));
      await eventually(() => (gw.store.get('flooder')?.lastSeq === 5000 ? true : undefined), 3000, 'a sample at the normal rate is stored again');
    } finally {
      s.close();
    }
  });

  for (const skewMin of [-10, 10]) {
    it(`an agent whose clock is ${skewMin} minutes off: age is measured on the gateway's clock, data counts as fresh`, async () => {
      const name = `skewed${skewMin < 0 ? 'behind' : 'ahead'}`;
      const s = stream(gw.ports.agent);
      s.call.write({ hello: { nodeName: name, instanceId: 'k1' } });
      await eventually(() => s.messages[0]?.welcome, 3000, 'welcome');
      for (let i = 1; i <= 3; i++) s.call.write(sample(i, Date.now() + skewMin * 60_000 + i * 1000));
      const n = await eventually(async () => {
        const got = await getNode(queryClient(gw.ports.grpc), name).catch(() => undefined);
        return got?.window?.samples === 3 ? got : undefined;
      }, 3000, 'three samples');
      assert.ok(n.ageMs < 2000, `age ${n.ageMs} ms`);
      // The review for this node is inflated: skewed timestamps are not stale data.
      const review = fixture.replaceAll(NODE, name);
      const res = await postHttps(gw, '/mutate/nodes', review);
      const answer = res.json() as { response: { patch?: string } };
      const ops = JSON.parse(Buffer.from(answer.response.patch ?? '', 'base64').toString() || '[]') as Array<{ path: string; value: string }>;
      assert.equal(ops.find((o) => o.path === '/status/allocatable/cpu')?.value, '15820m');
      s.close();
    });
  }

  it('slow clients cannot hold the webhook: dribbled headers are cut off, real requests keep being answered', async () => {
    const sockets: TLSSocket[] = [];
    for (let i = 0; i < 100; i++) {
      const sock = tlsConnect({ host: '127.0.0.1', port: gw.ports.webhook, servername: 'localhost', ca: gw.ca });
      sock.on('error', () => {});
      sock.write('POST /mutate/nodes HTTP/1.1\r\nHost: x\r\n');
      sockets.push(sock);
    }
    const drip = setInterval(() => {
      for (const s of sockets) if (!s.destroyed) s.write('X-Slow: 1\r\n');
    }, 1000);
    try {
      const started = performance.now();
      const ok = await postHttps(gw, '/mutate/nodes', fixture);
      assert.equal(ok.status, 200);
      assert.ok(performance.now() - started < 2000, 'a real request is not starved by 100 slow ones');
      await eventually(() => (sockets.every((s) => s.destroyed || s.readableEnded) ? true : undefined), 12_000, 'the slow connections to be closed by the server');
    } finally {
      clearInterval(drip);
      for (const s of sockets) s.destroy();
    }
  });
});
