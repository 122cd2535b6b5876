// LeaderLease (gateway/act/leader-lease.ts) against a real HTTP server that
// speaks the coordination.k8s.io Lease API and can stop answering, as an API
// server behind a broken connection does.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeConfigFor } from '../../helpers/fake-kube-api.js';
import { LeaderLease } from '../../../gateway/act/leader-lease.js';
import { createLogger } from '../../../lib/log.js';
import { eventually } from '../../helpers/grpc.js';

/** One Lease kept in memory; `hang` makes every request wait for ever (until the server closes). */
function leaseServer(): { server: Server; kubeConfig: () => KubeConfig; hang: (on: boolean) => void; requests: () => number } {
  let lease: Record<string, unknown> | undefined;
  let version = 0;
  let hanging = false;
  let count = 0;
  const held: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    count += 1;
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      if (hanging) {
        held.push(res);
        return;
      }
      res.setHeader('content-type', 'application/json');
      if (req.method === 'GET') {
        if (!lease) {
          res.statusCode = 404;
          res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
          return;
        }
        res.end(JSON.stringify(lease));
        return;
      }
      const sent = JSON.parse(body) as Record<string, unknown> & { metadata: Record<string, unknown> };
      version += 1;
      lease = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', ...sent, metadata: { ...sent.metadata, resourceVersion: String(version) } };
      res.statusCode = req.method === 'POST' ? 201 : 200;
      res.end(JSON.stringify(lease));
    });
  });
  server.on('close', () => {
    for (const r of held) r.destroy();
  });
  return {
    server,
    kubeConfig: () => kubeConfigFor(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    hang: (on) => {
      hanging = on;
    },
    requests: () => count,
  };
}

describe('LeaderLease', () => {
  const api = leaseServer();
  const leases: LeaderLease[] = [];
  after(async () => {
    for (const l of leases) await l.stop();
    api.server.closeAllConnections();
    await new Promise((resolve) => api.server.close(resolve));
  });

  it('a renew that never answers ends the lead within the renew deadline, before the lease could expire elsewhere', async () => {
    await new Promise<void>((resolve) => api.server.listen(0, '127.0.0.1', resolve));
    const changes: Array<{ leader: boolean; atMs: number }> = [];
    const lease = new LeaderLease(api.kubeConfig(), {
      namespace: 'ns', name: 'l', identity: 'a', leaseDurationSeconds: 3, renewEveryMs: 100, renewDeadlineMs: 800, log: createLogger('test', 'silent'),
    });
    leases.push(lease);
    lease.onChange((leader) => changes.push({ leader, atMs: performance.now() }));
    lease.start();
    await eventually(async () => (lease.isLeader ? true : undefined), 5_000, 'leading');
    // Let it renew a few times, then the API server stops answering.
    const before = api.requests();
    await eventually(async () => (api.requests() >= before + 4 ? true : undefined), 5_000, 'renewing');
    const hungAt = performance.now();
    api.hang(true);
    await eventually(async () => (!lease.isLeader ? true : undefined), 5_000, 'stepped down');
    const stepDown = changes.at(-1)!;
    assert.equal(stepDown.leader, false);
    // The last successful round started at most renewEveryMs plus one round trip before the hang: the lead ends
    // within the deadline of it, well before the 3 s after which another replica may take the lease.
    assert.ok(stepDown.atMs - hungAt <= 800 + 100, `stepped down ${Math.round(stepDown.atMs - hungAt)} ms after the hang`);
    // Answers again: leads again.
    api.hang(false);
    await eventually(async () => (lease.isLeader ? true : undefined), 5_000, 'leading again');
  });

  it('refuses a renew deadline not shorter than the lease', () => {
    assert.throws(
      () => new LeaderLease(api.kubeConfig(), { namespace: 'ns', name: 'l', identity: 'b', leaseDurationSeconds: 2, renewDeadlineMs: 2000, log: createLogger('test', 'silent') }),
      /must be shorter than the lease duration/,
    );
  });
});
