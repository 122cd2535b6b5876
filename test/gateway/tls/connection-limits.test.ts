// Connections that never speak are closed, and a listener holds a bounded
// number of them: raw TCP and TLS sockets against a real gateway's webhook,
// gRPC port and agent port (the ingest thread).
import assert from 'node:assert/strict';
import * as net from 'node:net';
import * as tls from 'node:tls';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { startTestGateway, type TestGateway } from '../../helpers/gateway.js';
import { getNode, queryClient } from '../../helpers/grpc.js';
import { scrapeMetric } from '../../helpers/metrics.js';
import { waitUntil } from '../../../scripts/harness/wait.js';
import * as grpc from '@grpc/grpc-js';
import { oversellV1 } from '../../../proto/load.js';

const TIMEOUT_MS = 300;
/** Closed within the timeout, give or take a busy event loop. */
const LATE_MS = 1500;

/** A raw TCP connection that sends nothing; resolves with how long until the gateway closed it. */
function silentTcp(port: number): { closed: Promise<number>; socket: net.Socket } {
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.resume();
  const opened = Date.now();
  return { socket, closed: new Promise((resolve) => socket.once('close', () => resolve(Date.now() - opened))) };
}

/** A TLS connection that finishes its handshake (ALPN h2) and sends nothing after it. */
async function silentTls(port: number, ca: string): Promise<{ closed: Promise<number>; socket: tls.TLSSocket }> {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['h2'] });
  socket.on('error', () => {});
  socket.resume(); // reads what the server sends (its SETTINGS), so its close is seen
  const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  await new Promise((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('close', () => reject(new Error('closed before the handshake finished')));
  });
  const opened = Date.now();
  return { socket, closed };
}

const refused = (gw: TestGateway, listener: string, reason: string) =>
  scrapeMetric(gw.ports.metrics, 'oversell_connections_refused_total', `{listener="${listener}",reason="${reason}"}`);

describe('connections that never speak (300 ms timeout)', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      grpcTls: true,
      connections: { grpcMaxConnections: 1000, webhookMaxConnections: 1000, webhookBacklog: 64, handshakeTimeoutMs: TIMEOUT_MS },
    });
  });
  after(() => gw?.close());

  for (const [listener, port] of [['webhook', () => gw.ports.webhook], ['grpc', () => gw.ports.grpc], ['agent', () => gw.ports.agent]] as const) {
    it(`${listener}: a TCP connection that never sends a ClientHello is closed within the timeout, counted`, { timeout: 10_000 }, async () => {
      const { closed } = silentTcp(port());
      const afterMs = await closed;
      assert.ok(afterMs >= TIMEOUT_MS - 50 && afterMs < TIMEOUT_MS + LATE_MS, `closed after ${afterMs} ms`);
      await waitUntil('counted', async () => ((await refused(gw, listener, 'handshake-timeout')) >= 1 ? true : undefined), 3000);
    });
  }

  for (const [listener, port] of [['grpc', () => gw.ports.grpc], ['agent', () => gw.ports.agent]] as const) {
    it(`${listener}: a TLS connection that never sends the HTTP/2 preface is closed within the timeout, counted`, { timeout: 10_000 }, async () => {
      const { closed } = await silentTls(port(), gw.ca);
      const afterMs = await closed;
      assert.ok(afterMs < TIMEOUT_MS + LATE_MS, `closed ${afterMs} ms after the handshake`);
      await waitUntil('counted', async () => ((await refused(gw, listener, 'preface-timeout')) >= 1 ? true : undefined), 3000);
    });
  }

  it('grpc: a client that speaks is served over TLS (certificate checked, ALPN h2) and kept past the timeout', { timeout: 10_000 }, async () => {
    gw.store.attach('n1', 'i', null, 1);
    const client = new (oversellV1().NodeUsage)(`127.0.0.1:${gw.ports.grpc}`, grpc.credentials.createSsl(Buffer.from(gw.ca)), { 'grpc.ssl_target_name_override': 'localhost' });
    try {
      await getNode(client, 'n1').catch((e: grpc.ServiceError) => assert.equal(e.code, grpc.status.NOT_FOUND));
      await new Promise((r) => setTimeout(r, TIMEOUT_MS * 2));
      assert.equal(client.getChannel().getConnectivityState(false), grpc.connectivityState.READY);
    } finally {
      client.close();
    }
  });
});

describe('plaintext gRPC (local mode): a connection that never sends the preface', () => {
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ connections: { grpcMaxConnections: 1000, webhookMaxConnections: 1000, webhookBacklog: 64, handshakeTimeoutMs: TIMEOUT_MS } });
  });
  after(() => gw?.close());

  it('is closed within the timeout, counted; a client that speaks is served', { timeout: 10_000 }, async () => {
    const { closed } = silentTcp(gw.ports.grpc);
    const afterMs = await closed;
    assert.ok(afterMs >= TIMEOUT_MS - 50 && afterMs < TIMEOUT_MS + LATE_MS, `closed after ${afterMs} ms`);
    await waitUntil('counted', async () => ((await refused(gw, 'grpc', 'preface-timeout')) === 1 ? true : undefined), 3000);
    const client = queryClient(gw.ports.grpc);
    try {
      await assert.rejects(getNode(client, 'nope'), (e: grpc.ServiceError) => e.code === grpc.status.NOT_FOUND);
    } finally {
      client.close();
    }
  });
});

describe('connections per listener', () => {
  const CAP = 5;
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({
      grpcTls: true,
      // Long enough that the first CAP connections are still open when the next one comes.
      connections: { grpcMaxConnections: CAP, webhookMaxConnections: CAP, webhookBacklog: 64, handshakeTimeoutMs: 10_000 },
    });
  });
  after(() => gw?.close());

  for (const [listener, port] of [['webhook', () => gw.ports.webhook], ['grpc', () => gw.ports.grpc], ['agent', () => gw.ports.agent]] as const) {
    it(`${listener}: past ${CAP} open connections the next is closed at once, counted; once one closes, a new one is taken`, { timeout: 10_000 }, async () => {
      const held = Array.from({ length: CAP }, () => silentTcp(port()));
      try {
        await Promise.all(held.map((h) => new Promise((r) => h.socket.once('connect', r))));
        await new Promise((r) => setTimeout(r, 100)); // the gateway has accepted them all
        const extra = silentTcp(port());
        const afterMs = await extra.closed;
        assert.ok(afterMs < 1000, `the connection over the cap was closed after ${afterMs} ms`);
        // The agent port's counts cross from the ingest thread with its next batch.
        await waitUntil('counted', async () => ((await refused(gw, listener, 'connection-limit')) === 1 ? true : undefined), 3000);
        held.pop()?.socket.destroy();
        await new Promise((r) => setTimeout(r, 200)); // the gateway sees it close
        const next = silentTcp(port());
        try {
          const outcome = await Promise.race([next.closed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('open'), 500))]);
          assert.equal(outcome, 'open');
        } finally {
          next.socket.destroy();
        }
      } finally {
        for (const h of held) h.socket.destroy();
      }
    });
  }
});

// While the event loop is busy nothing is accepted, and the kernel queues new
// connections only up to the listen backlog (Linux: backlog + 1); the rest
// wait for a SYN retry. Connections are opened by a child process, since this
// test blocks its own thread, the gateway's, to hold the queue full.
describe('the webhook\'s accept queue (--webhook-backlog)', () => {
  const BACKLOG = 4;
  const TRIED = 30;
  let gw: TestGateway;
  before(async () => {
    gw = await startTestGateway({ connections: { grpcMaxConnections: 1000, webhookMaxConnections: 1000, webhookBacklog: BACKLOG, handshakeTimeoutMs: 10_000 } });
  });
  after(() => gw?.close());

  it(`holds at most ${BACKLOG} + 1 connections while the loop does not accept, and takes the rest once it does`, { timeout: 20_000 }, async () => {
    // The child says it runs, waits 100 ms, opens TRIED connections, and after 1.2 s prints how many connected.
    const child = spawn(process.execPath, ['-e', `
      const net = require('node:net');
      let connected = 0;
      process.stdout.write('ready\\n');
      setTimeout(() => {
        for (let i = 0; i < ${TRIED}; i++) net.connect(${gw.ports.webhook}, '127.0.0.1').on('connect', () => connected++).on('error', () => {});
        setTimeout(() => { process.stdout.write('queued ' + connected + '\\n'); }, 1200);
        setTimeout(() => { process.stdout.write('later ' + connected + '\\n'); process.exit(0); }, 6000);
      }, 100);
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await waitUntil('the child runs', async () => (out.includes('ready') ? true : undefined), 10_000, 10);
      // Busy for 2.5 s: the child's connections arrive and its count is taken meanwhile.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2500);
      await waitUntil('the child counted', async () => (/later \d+/.test(out) ? true : undefined), 15_000, 50);
      const queued = Number(/queued (\d+)/.exec(out)?.[1]);
      const later = Number(/later (\d+)/.exec(out)?.[1]);
      assert.ok(queued <= BACKLOG + 1, `${queued} of ${TRIED} connections were queued while nothing was accepted (backlog ${BACKLOG})`);
      assert.ok(queued >= 1, `no connection was queued (${out.trim()})`);
      // SYNs dropped while the queue was full are retried (after 1 s, then 3 s), and accepted once the loop runs.
      assert.equal(later, TRIED, `${later} of ${TRIED} connected once the loop accepted again`);
    } finally {
      child.kill();
    }
  });
});
