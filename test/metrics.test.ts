// A scrape of each binary parses as Prometheus text and has every named series.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, cpSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startAgent } from '../agent/agent.js';
import { noPodSource } from '../agent/requests/pod-source.js';
import { createLogger } from '../lib/log.js';
import { eventually } from './helpers/grpc.js';
import { getHttp, postHttps, startTestGateway } from './helpers/gateway.js';
import { AGENT_SERIES, GATEWAY_SERIES } from './helpers/metric-names.js';
import { parseExposition } from './helpers/metrics.js';

const log = createLogger('test', 'silent');
const fixtures = fileURLToPath(new URL('./fixtures', import.meta.url));

describe('metrics scrapes', () => {
  const work = mkdtempSync(join(tmpdir(), 'oversell-metrics-'));
  after(() => rmSync(work, { recursive: true, force: true }));

  it('gateway and agent: every named series, conventional units and types', async () => {
    const gw = await startTestGateway();
    cpSync(join(fixtures, 'proc', 'vm-2cpu'), join(work, 'proc'), { recursive: true });
    const agent = startAgent({
      nodeName: 'ip-10-0-17-42.eu-west-1.compute.internal', gatewayAddresses: [`127.0.0.1:${gw.ports.agent}`],
      procRoot: join(work, 'proc'), cgroupRoot: join(fixtures, 'cgroup', 'v2-systemd'), intervalMs: 50, podReportEvery: 5, pods: noPodSource(), log,
    });
    const served = await agent.metrics.listen('127.0.0.1', 0);
    try {
      await eventually(() => (gw.store.get('ip-10-0-17-42.eu-west-1.compute.internal')?.latest ? true : undefined), 5000, 'a sample');
      await postHttps(gw, '/mutate/nodes', (await import('node:fs')).readFileSync(join(fixtures, 'admission', 'node-status-update.json'), 'utf8'));
      const g = parseExposition((await getHttp(gw.ports.metrics, '/metrics')).body);
      for (const name of GATEWAY_SERIES) assert.ok(g.has(name), `gateway lacks ${name}`);
      assert.equal(g.get('oversell_webhook_request_duration_seconds'), 'histogram');
      assert.equal(g.get('oversell_decisions_total'), 'counter');
      const a = parseExposition((await getHttp(served.port, '/metrics')).body);
      for (const name of AGENT_SERIES) assert.ok(a.has(name), `agent lacks ${name}`);
      assert.equal(a.get('oversell_agent_sampling_duration_seconds'), 'histogram');
      assert.equal(a.get('oversell_agent_stream_reconnects_total'), 'counter');
      for (const [name, type] of [...g, ...a]) {
        if (type === 'counter') assert.match(name, /_total$/, `${name} is a counter without _total`);
      }
      const body = (await getHttp(served.port, '/metrics')).body;
      assert.match(body, /oversell_agent_gateways_connected 1/);
      assert.equal((await getHttp(served.port, '/healthz')).status, 200);
    } finally {
      served.server.close();
      await agent.stop();
      await gw.close();
    }
  });

  it('the agent\'s default address (:9091, host empty) serves every interface of both families, as docs/metrics.md scrapes the pod IP', async () => {
    const agent = startAgent({
      nodeName: 'both-families', gatewayAddresses: ['127.0.0.1:1'], procRoot: join(fixtures, 'proc', 'vm-2cpu'), cgroupRoot: join(fixtures, 'cgroup', 'v2-systemd'),
      intervalMs: 1000, podReportEvery: 5, pods: noPodSource(), log,
    });
    const served = await agent.metrics.listen('', 0);
    try {
      for (const host of ['127.0.0.1', '[::1]']) {
        const res = await fetch(`http://${host}:${served.port}/healthz`);
        assert.equal(res.status, 200, `not served on ${host}`);
      }
    } finally {
      served.server.close();
      await agent.stop();
    }
  });

  it('the parser is strict: garbage fails', () => {
    assert.throws(() => parseExposition('oversell_x{a="b" 1\n'));
    assert.throws(() => parseExposition('hello world\n'));
  });
});
