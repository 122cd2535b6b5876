import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { inClusterAccess, kubeconfigAccess } from '../agent/kube/kube-access.js';

const dir = mkdtempSync(join(tmpdir(), 'oversell-kubeconfig-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfig(user: Record<string, unknown>, cluster: Record<string, unknown> = { server: 'https://10.0.0.1:6443', 'certificate-authority-data': b64('CA') }): string {
  const f = join(dir, `kc-${Math.random()}`);
  writeFileSync(f, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
    contexts: [{ name: 'c', context: { cluster: 'k', user: 'u' } }, { name: 'other', context: { cluster: 'x', user: 'x' } }],
    clusters: [{ name: 'k', cluster }], users: [{ name: 'u', user }],
  }));
  return f;
}

describe('agent API access without client-node', () => {
  it('kubeconfig with inline certificate data', () => {
    const a = kubeconfigAccess(kubeconfig({ 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') }));
    assert.equal(a.server.href, 'https://10.0.0.1:6443/');
    assert.equal(a.ca?.toString(), 'CA');
    assert.equal(a.cert?.toString(), 'CERT');
    assert.equal(a.key?.toString(), 'KEY');
    assert.equal(a.token, undefined);
  });

  it('kubeconfig with files relative to it, and a token', () => {
    writeFileSync(join(dir, 'ca.crt'), 'FILE-CA');
    const a = kubeconfigAccess(kubeconfig({ token: 'abc' }, { server: 'https://api:443', 'certificate-authority': 'ca.crt' }));
    assert.equal(a.ca?.toString(), 'FILE-CA');
    assert.equal(a.token?.(), 'abc');
  });

  it('refuses exec plugins and missing clusters with what to do', () => {
    assert.throws(() => kubeconfigAccess(kubeconfig({ exec: { command: 'aws' } })), /exec and auth-provider .* use a certificate or token/);
    assert.throws(() => kubeconfigAccess(join(dir, 'missing')), /cannot read kubeconfig/);
  });

  it('in-cluster: service host and port, CA, and a token re-read on every request', async () => {
    const sa = join(dir, 'sa');
    (await import('node:fs')).mkdirSync(sa);
    writeFileSync(join(sa, 'ca.crt'), 'SA-CA');
    writeFileSync(join(sa, 'token'), 'first\n');
    const a = inClusterAccess({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, sa);
    assert.equal(a.server.hostname, '[fd00::1]');
    assert.equal(a.token?.(), 'first');
    writeFileSync(join(sa, 'token'), 'rotated\n');
    assert.equal(a.token?.(), 'rotated');
    assert.throws(() => inClusterAccess({}, sa), /not in a pod/);
  });
});
