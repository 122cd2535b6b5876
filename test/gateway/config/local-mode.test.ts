// Local mode only on purpose (issue 19, invariant 12): no authentication and
// plaintext gRPC are the defaults only where no kubeconfig is in use, and then
// the gateway binds the loopback.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chooseTransport } from '../../../gateway/config/local-mode.js';

describe('local mode only on purpose', () => {
  it('with a kubeconfig in use (in a pod or --kubeconfig): authentication, TLS and all interfaces by default', () => {
    assert.deepEqual(chooseTransport(true, {}), { auth: 'kubernetes', grpcTls: true, bindAddress: '0.0.0.0' });
  });

  it('without one: local mode, bound to the loopback', () => {
    assert.deepEqual(chooseTransport(false, {}), { auth: 'none', grpcTls: false, bindAddress: '127.0.0.1' });
  });

  it('local-mode settings next to a kubeconfig are honoured, with a warning that says what is open', () => {
    const t = chooseTransport(true, { auth: 'none', grpcTls: false });
    assert.equal(t.auth, 'none');
    assert.equal(t.grpcTls, false);
    assert.match(t.warning ?? '', /not authenticated \(--auth none\) and gRPC is plaintext \(--grpc-tls off\)/);
    assert.equal(chooseTransport(true, { grpcTls: false }).auth, 'kubernetes');
    assert.match(chooseTransport(true, { grpcTls: false }).warning ?? '', /plaintext/);
  });

  it('an explicit bind address wins; an unknown --auth is refused', () => {
    assert.equal(chooseTransport(false, { bindAddress: '0.0.0.0' }).bindAddress, '0.0.0.0');
    assert.throws(() => chooseTransport(false, { auth: 'token' }), /--auth must be "kubernetes" or "none"/);
  });
});
