// The agent's pod watch against a real HTTPS server playing the API server:
// the install grants agents no pod read by default, so a 403 on the first list
// must leave the agent running with requests reported as unknown, said once,
// and never retried into a stream of errors; other refusals still fail loudly.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { watchPodSource } from '../../../agent/requests/pod-source.js';
import type { KubeAccess } from '../../../agent/kube/kube-access.js';
import { generateCa, issueServingCertificate } from '../../../gateway/tls/self-signed.js';

const NODE = 'node-a';
const POD = {
  metadata: { uid: 'u1', name: 'p', namespace: 'default', resourceVersion: '5' },
  spec: { nodeName: NODE, containers: [{ name: 'c', resources: { requests: { cpu: '250m', memory: '64Mi' } } }] },
  status: { phase: 'Running' },
};

describe('agent pod source: without pod read', () => {
  let server: Server;
  let access: KubeAccess;
  /** What the server answers a pod list with, per test. */
  let answer: { status: number; body: object } = { status: 200, body: {} };
  const requests: string[] = [];

  before(async () => {
    const authority = await generateCa();
    const serving = await issueServingCertificate(authority, ['127.0.0.1']);
    server = createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
      requests.push(req.url ?? '');
      res.statusCode = req.url?.includes('watch=1') ? 200 : answer.status;
      res.setHeader('content-type', 'application/json');
      // A watch is held open without events; the list gets the test's answer.
      if (req.url?.includes('watch=1')) res.write('');
      else res.end(JSON.stringify(answer.body));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    access = { server: new URL(`https://127.0.0.1:${(server.address() as AddressInfo).port}`), ca: Buffer.from(authority.cert), token: () => 'agent-token' };
  });
  after(() => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const logger = () => {
    const lines: Array<{ level: number; msg: string }> = [];
    return { lines, log: pino({ level: 'info' }, { write: (s: string) => lines.push(JSON.parse(s) as { level: number; msg: string }) }) };
  };

  it('403 on the list: the agent runs on, reports requests as unknown, says so once and does not retry', async () => {
    answer = { status: 403, body: { kind: 'Status', code: 403, reason: 'Forbidden', message: 'pods is forbidden: User "system:serviceaccount:oversell:oversell-agent" cannot list resource "pods"' } };
    requests.length = 0;
    const { lines, log } = logger();
    const source = await watchPodSource(access, NODE, log);
    try {
      assert.deepEqual(source.requests(), { cpuMillicores: 0, memoryBytes: 0, podCount: 0, known: false });
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(requests.length, 1, `one list, no retries and no watch: ${requests.join(' ')}`);
      const said = lines.filter((l) => /no permission to list pods/.test(l.msg));
      assert.equal(said.length, 1);
      assert.equal(said[0]?.level, 30, 'info, not an error: no pod read is the default install');
      assert.equal(lines.filter((l) => l.level >= 40).length, 0, 'no warnings or errors');
    } finally {
      await source.stop();
    }
  });

  it('with pod read (200): the pods of the node are summed', async () => {
    answer = { status: 200, body: { kind: 'PodList', metadata: { resourceVersion: '5' }, items: [POD] } };
    const { log } = logger();
    const source = await watchPodSource(access, NODE, log);
    try {
      assert.deepEqual(source.requests(), { cpuMillicores: 250, memoryBytes: 64 * 1024 * 1024, podCount: 1, known: true });
      assert.match(requests.at(-2) ?? requests.at(-1) ?? '', /fieldSelector=spec\.nodeName%3Dnode-a/);
    } finally {
      await source.stop();
    }
  });

  it('any other refusal (401: a bad token) still fails the start, with what to check', async () => {
    answer = { status: 401, body: { kind: 'Status', code: 401, reason: 'Unauthorized' } };
    const { log } = logger();
    await assert.rejects(watchPodSource(access, NODE, log), /cannot list the pods of node node-a: .*HTTP 401.*check the agent's RBAC/);
  });
});
