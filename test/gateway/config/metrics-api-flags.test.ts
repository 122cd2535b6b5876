// --metrics-api and --metrics-api-port (gateway/config/): off by default, on
// only with a cluster, the port refused when the API is off.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../../gateway/config/config.js';

const silent = { writeOut: () => {}, writeErr: () => {}, outputError: () => {} };
const KUBECONFIG = ['--kubeconfig', '/home/me/.kube/config'];
const load = (argv: string[], env: Record<string, string> = {}) => loadConfig(argv, env, silent);

describe('--metrics-api', () => {
  it('off by default', () => {
    const c = load(KUBECONFIG);
    assert.equal(c.mode === 'cluster' && c.metricsApi, undefined);
  });
  it('on with a cluster: port 4443 unless told', () => {
    const c = load([...KUBECONFIG, '--metrics-api', 'on']);
    assert.deepEqual(c.mode === 'cluster' && c.metricsApi, { port: 4443 });
    const d = load(KUBECONFIG, { OVERSELL_METRICS_API: 'on', OVERSELL_METRICS_API_PORT: '10250' });
    assert.deepEqual(d.mode === 'cluster' && d.metricsApi, { port: 10250 });
  });
  it('refused in local mode, saying it needs a cluster', () => {
    assert.throws(() => load(['--metrics-api', 'on']), (e: unknown) => e instanceof ConfigError && /needs a cluster/.test(e.message));
  });
  it('--metrics-api-port without --metrics-api on would be ignored: refused', () => {
    assert.throws(() => load([...KUBECONFIG, '--metrics-api-port', '4443']), (e: unknown) => e instanceof ConfigError && /--metrics-api-port is ignored without --metrics-api on/.test(e.message));
  });
  it('a value that is not on or off is refused', () => {
    assert.throws(() => load([...KUBECONFIG, '--metrics-api', 'yes']), (e: unknown) => e instanceof ConfigError && /--metrics-api must be on or off/.test(e.message));
  });
});
