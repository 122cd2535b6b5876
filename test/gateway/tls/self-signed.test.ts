// Self-managed serving certificates (gateway/tls/self-signed.ts): written to a
// directory, reused while valid, re-issued when the hosts change.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ensureServingCertificate } from '../../../gateway/tls/self-signed.js';

const work = mkdtempSync(join(tmpdir(), 'oversell-certs-'));
after(() => rmSync(work, { recursive: true, force: true }));

describe('self-managed certificates', () => {
  it('creates once, reuses while valid, re-issues when the hosts change', async () => {
    const dir = join(work, 'certs');
    const a = await ensureServingCertificate(dir, ['localhost', '127.0.0.1', 'oversell-gateway.oversell.svc']);
    assert.equal(a.created, true);
    const leaf = new X509Certificate(a.cert);
    assert.match(leaf.subjectAltName ?? '', /DNS:oversell-gateway\.oversell\.svc/);
    assert.match(leaf.subjectAltName ?? '', /IP Address:127\.0\.0\.1/);
    const b = await ensureServingCertificate(dir, ['localhost', '127.0.0.1', 'oversell-gateway.oversell.svc']);
    assert.equal(b.created, false);
    assert.equal(b.cert, a.cert);
    const c = await ensureServingCertificate(dir, ['localhost', 'other.example']);
    assert.equal(c.created, true);
    assert.notEqual(c.cert, a.cert);
  });
});
