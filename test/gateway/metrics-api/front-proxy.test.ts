// The front-proxy trust of the metrics API (gateway/metrics-api/front-proxy.ts),
// as pure functions: the ConfigMap's requestheader-* keys, the certificate
// check, and the identity read from the proxy's headers. Over HTTPS:
// metrics-api-server.test.ts.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { authenticate, requestHeaderConfig, signedByFrontProxy, Unauthorized, type RequestHeaderConfig } from '../../../gateway/metrics-api/front-proxy.js';
import { generateCa, issueServingCertificate, type CertificateAuthority } from '../../../gateway/tls/self-signed.js';

const DAY = 86_400_000;
const der = (pem: string) => new X509Certificate(pem).raw;

describe('requestHeaderConfig: the extension-apiserver-authentication ConfigMap', () => {
  let ca: CertificateAuthority;
  before(async () => (ca = await generateCa()));
  it('reads the lists kube-apiserver writes (JSON)', () => {
    const c = requestHeaderConfig({
      'requestheader-client-ca-file': ca.cert, 'requestheader-allowed-names': '["front-proxy-client"]', 'requestheader-username-headers': '["X-Remote-User"]',
      'requestheader-group-headers': '["X-Remote-Group"]', 'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]', 'requestheader-uid-headers': '["X-Remote-Uid"]',
    });
    assert.deepEqual([c.allowedNames, c.usernameHeaders, c.groupHeaders, c.extraHeaderPrefixes, c.uidHeaders, c.cas.length], [['front-proxy-client'], ['X-Remote-User'], ['X-Remote-Group'], ['X-Remote-Extra-'], ['X-Remote-Uid'], 1]);
  });
  const refused: Array<[string, Record<string, string>, RegExp]> = [
    ['no requestheader-client-ca-file (no aggregation layer)', { 'client-ca-file': 'x' }, /--requestheader-client-ca-file/],
    ['no PEM in it', { 'requestheader-client-ca-file': 'garbage', 'requestheader-username-headers': '["X-Remote-User"]' }, /no PEM certificate/],
  ];
  for (const [what, data, message] of refused) it(`refused: ${what}`, () => assert.throws(() => requestHeaderConfig(data), message));
  it('refused: no username header', () => assert.throws(() => requestHeaderConfig({ 'requestheader-client-ca-file': ca.cert }), /requestheader-username-headers is empty/));
  it('refused: a list that is not JSON', () => assert.throws(() => requestHeaderConfig({ 'requestheader-client-ca-file': ca.cert, 'requestheader-username-headers': 'X-Remote-User' }), /not a JSON list/));
});

describe('the proxy\'s certificate and headers', () => {
  let ca: CertificateAuthority;
  let config: RequestHeaderConfig;
  let proxy: { cert: string; key: string };
  const now = Date.now();
  before(async () => {
    ca = await generateCa();
    proxy = await issueServingCertificate(ca, ['front-proxy-client'], new Date(), 30, 'clientAuth');
    config = requestHeaderConfig({
      'requestheader-client-ca-file': ca.cert, 'requestheader-allowed-names': '[]', 'requestheader-username-headers': '["X-Remote-User"]',
      'requestheader-group-headers': '["X-Remote-Group"]', 'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
    });
  });

  it('a certificate of the front-proxy CA for client authentication passes', () => assert.equal(signedByFrontProxy(der(proxy.cert), config, now), undefined));
  it('an expired one is refused', async () => {
    const old = await issueServingCertificate(ca, ['front-proxy-client'], new Date(now - 10 * DAY), 1, 'clientAuth');
    assert.match(String(signedByFrontProxy(der(old.cert), config, now)), /expired/);
  });
  it('a serving-only certificate of the same CA is refused', async () => {
    const serving = await issueServingCertificate(ca, ['front-proxy-client'], new Date(), 30, 'serverAuth');
    assert.match(String(signedByFrontProxy(der(serving.cert), config, now)), /not for client authentication/);
  });
  it('another CA\'s is refused', async () => {
    const other = await issueServingCertificate(await generateCa(), ['front-proxy-client'], new Date(), 30, 'clientAuth');
    assert.match(String(signedByFrontProxy(der(other.cert), config, now)), /not signed by the front-proxy CA/);
  });

  it('an empty allowed-names list takes any CN the CA signed', () => {
    const c = authenticate(config, { raw: der(proxy.cert), commonName: 'anyone' }, ['X-Remote-User', 'bob'], now);
    assert.equal(c.username, 'bob');
  });
  it('the first non-empty username header, every group header apart, extra keys unescaped and lower-cased', () => {
    const c = authenticate(config, { raw: der(proxy.cert), commonName: 'front-proxy-client' }, [
      'x-remote-user', '', 'X-Remote-User', 'alice', 'X-Remote-Group', 'a, b', 'x-remote-group', 'c', 'X-Remote-Extra-Acme.com%2FProject', 'p1', 'Host', 'x',
    ], now);
    assert.deepEqual(c, { username: 'alice', uid: '', groups: ['a, b', 'c'], extra: { 'acme.com/project': ['p1'] } });
  });
  it('without a config (ConfigMap not read) everyone is refused', () => {
    assert.throws(() => authenticate(undefined, { raw: der(proxy.cert), commonName: 'front-proxy-client' }, ['X-Remote-User', 'alice'], now), Unauthorized);
  });
});
