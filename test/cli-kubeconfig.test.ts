// The CLI through a kubeconfig, as against a real cluster: an API server
// (here a fake one over HTTPS that answers the Service, pod list and CA
// ConfigMap reads and bridges the port-forward WebSocket to a real gateway)
// and the user's credentials as @kubernetes/client-node produces them: an
// exec credential plugin's token reaches the gateway, over TLS only.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { connect as connectTcp, type AddressInfo, type Socket } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { dumpYaml } from '@kubernetes/client-node';
import { queryAuthorizer } from '../gateway/auth/query-authorizer.js';
import { AuthError, type Identity } from '../gateway/auth/identity.js';
import { generateServingCertificate } from '../gateway/tls/self-signed.js';
import { startTestGateway, type TestGateway } from './helpers/gateway.js';

// ws is what client-node speaks WebSocket with; it ships no types.
interface WsSocket {
  send(data: Buffer): void;
  close(): void;
  on(event: 'message', listener: (data: Buffer) => void): void;
  on(event: 'close', listener: () => void): void;
}
interface WsServer {
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, done: (ws: WsSocket) => void): void;
  close(): void;
}
const { WebSocketServer } = createRequire(import.meta.url)('ws') as { WebSocketServer: new (o: { noServer: true; handleProtocols: (protocols: Set<string>) => string | false }) => WsServer };

const NS = 'oversell';
const POD = 'oversell-gateway-0';
const TOKEN = 'exec-plugin-token-7f3a';

/** A Kubernetes API server that knows one gateway Service and pod, and records who called. */
async function fakeApiServer(gatewayPort: () => number, gatewayCa: () => string | undefined): Promise<{ server: Server; url: string; ca: string; cert: { cert: string; key: string }; authorizations: string[]; upgrades: () => number }> {
  const tls = await generateServingCertificate(['localhost', '127.0.0.1']);
  const authorizations: string[] = [];
  let upgrades = 0;
  const json = (res: ServerResponse, status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    authorizations.push(req.headers.authorization ?? '');
    const url = new URL(req.url ?? '/', 'https://x');
    if (url.pathname === `/api/v1/namespaces/${NS}/services/oversell-gateway`) {
      return json(res, 200, { apiVersion: 'v1', kind: 'Service', metadata: { name: 'oversell-gateway', namespace: NS }, spec: { selector: { app: 'oversell-gateway' }, ports: [{ name: 'grpc', port: 50051, targetPort: 50051 }] } });
    }
    if (url.pathname === `/api/v1/namespaces/${NS}/pods` && url.searchParams.get('labelSelector') === 'app=oversell-gateway') {
      return json(res, 200, { apiVersion: 'v1', kind: 'PodList', metadata: {}, items: [{ metadata: { name: POD, namespace: NS }, status: { conditions: [{ type: 'Ready', status: 'True' }] } }] });
    }
    const ca = gatewayCa();
    if (url.pathname === `/api/v1/namespaces/${NS}/configmaps/oversell-gateway-ca` && ca) {
      return json(res, 200, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'oversell-gateway-ca', namespace: NS }, data: { 'ca.crt': ca } });
    }
    return json(res, 404, { apiVersion: 'v1', kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404, message: `${url.pathname} not found` });
  });
  // kubectl's port-forward protocol (v4.channel.k8s.io): channel 0 carries the data, each channel opens with the port.
  const wss = new WebSocketServer({ noServer: true, handleProtocols: (p) => (p.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false) });
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    authorizations.push(req.headers.authorization ?? '');
    upgrades += 1;
    if (!req.url?.startsWith(`/api/v1/namespaces/${NS}/pods/${POD}/portforward?ports=50051`)) return socket.destroy();
    wss.handleUpgrade(req, socket, head, (ws) => {
      const upstream: Socket = connectTcp(gatewayPort(), '127.0.0.1');
      const port = Buffer.from([50051 & 0xff, 50051 >> 8]);
      ws.send(Buffer.concat([Buffer.from([0]), port]));
      ws.send(Buffer.concat([Buffer.from([1]), port]));
      upstream.on('data', (d: Buffer) => ws.send(Buffer.concat([Buffer.from([0]), d])));
      upstream.on('close', () => ws.close());
      upstream.on('error', () => ws.close());
      ws.on('message', (m: Buffer) => {
        if (m[0] === 0) upstream.write(m.subarray(1));
      });
      ws.on('close', () => upstream.destroy());
    });
  });
  server.on('close', () => wss.close());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = await generateServingCertificate(['alice']);
  return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, ca: tls.ca, cert: { cert: client.cert, key: client.key }, authorizations, upgrades: () => upgrades };
}

describe('the CLI through a kubeconfig (exec credential plugin, port-forward)', () => {
  const main = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
  const work = mkdtempSync(join(tmpdir(), 'oversell-cli-kube-'));
  const home = join(work, 'home');
  const plugin = join(work, 'credential-plugin.mjs');
  const pluginRuns = join(work, 'plugin-runs');
  let gw: TestGateway;
  let api: Awaited<ReturnType<typeof fakeApiServer>>;
  let publishCa = true;
  const reviewed: string[] = [];

  const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    new Promise<{ status: number; stdout: string; stderr: string }>((resolve) => {
      const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(KUBECONFIG|KUBERNETES_SERVICE_HOST|OVERSELL_.*)$/.test(k)));
      execFile(process.execPath, ['--import', 'tsx', main, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...base, HOME: home, ...env } }, (err, stdout, stderr) =>
        resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  /** A kubeconfig for the fake API server with the given user. */
  const kubeconfig = (name: string, user: Record<string, unknown>) => {
    const file = join(work, `${name}.yaml`);
    writeFileSync(
      file,
      dumpYaml({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'test', cluster: { server: api.url, 'certificate-authority-data': Buffer.from(api.ca).toString('base64') } }],
        users: [{ name, user }],
        contexts: [{ name: 'test', context: { cluster: 'test', user: name } }],
        'current-context': 'test',
      }),
    );
    return file;
  };
  const execUser = (args: string[]) => ({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args, interactiveMode: 'Never' } });

  before(async () => {
    mkdirSync(home);
    writeFileSync(
      plugin,
      `// An exec credential plugin, as aws eks get-token or gke-gcloud-auth-plugin: an ExecCredential on stdout.
import { appendFileSync } from 'node:fs';
appendFileSync(process.argv[2], 'run\\n');
if (process.argv[3] === 'fail') {
  process.stderr.write('error: the SSO session has expired; run aws sso login\\n');
  process.exit(1);
}
process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: ${JSON.stringify(TOKEN)}, expirationTimestamp: new Date(Date.now() + 3600000).toISOString() } }));
`,
    );
    const alice: Identity = { username: 'alice', uid: 'a', groups: [], extra: {}, expiresAtMs: undefined };
    gw = await startTestGateway({
      grpcTls: true,
      auth: {
        query: queryAuthorizer(
          {
            review: async (token) => {
              reviewed.push(token);
              if (token !== TOKEN) throw new AuthError('unauthenticated', 'token not accepted');
              return alice;
            },
          },
          async () => ({ allowed: true, reason: '' }),
        ),
      },
    });
    gw.store.attach('n1', 'i', null, 1);
    api = await fakeApiServer(() => gw.ports.grpc, () => (publishCa ? gw.ca : undefined));
  });
  after(async () => {
    await gw?.close();
    api?.server.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('sends the token the exec plugin prints, to the gateway over TLS and to the API server', async () => {
    const file = kubeconfig('exec-user', execUser([plugin, pluginRuns]));
    const r = await run(['--kubeconfig', file, '--server-name', 'localhost', 'get', 'policies']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^flags\s+0\s+Enforce\s/m);
    assert.ok(readFileSync(pluginRuns, 'utf8').length > 0, 'the plugin ran');
    assert.ok(reviewed.includes(TOKEN), `the gateway reviewed the plugin's token (got ${JSON.stringify(reviewed)})`);
    assert.ok(api.authorizations.length >= 4 && api.authorizations.every((a) => a === `Bearer ${TOKEN}`), `the API server saw the token on every call: ${JSON.stringify(api.authorizations)}`);
  });

  it('$KUBECONFIG as a list is merged, the first file\'s context winning', async () => {
    const first = kubeconfig('exec-user', execUser([plugin, pluginRuns]));
    const second = join(work, 'other.yaml');
    writeFileSync(second, dumpYaml({ apiVersion: 'v1', kind: 'Config', clusters: [], users: [], contexts: [], 'current-context': 'elsewhere' }));
    reviewed.length = 0;
    const r = await run(['--server-name', 'localhost', 'get', 'policies'], { KUBECONFIG: [first, second].join(':') });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual([...new Set(reviewed)], [TOKEN]);
  });

  it('without the gateway\'s CA, refuses to send the plugin\'s token in plain text, before any port-forward', async () => {
    publishCa = false;
    const upgrades = api.upgrades();
    try {
      const r = await run(['--kubeconfig', kubeconfig('exec-user', execUser([plugin, pluginRuns])), 'get', 'policies']);
      assert.equal(r.status, 1);
      assert.match(r.stderr, /^error: refusing to send the kubeconfig user's token to pod oversell\/oversell-gateway-0 \(port-forward\) in plain text: pass --ca-file/);
      assert.equal(api.upgrades(), upgrades, 'no port-forward was opened');
    } finally {
      publishCa = true;
    }
  });

  it('a plugin that fails: the error names the plugin and passes on what it said', async () => {
    const r = await run(['--kubeconfig', kubeconfig('expired', execUser([plugin, pluginRuns, 'fail'])), 'get', 'policies']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^error: cannot get a token for kubeconfig user "expired" from its credential plugin \(.*node.*\): error: the SSO session has expired; run aws sso login/);
  });

  it('a client-certificate user: the gateway refuses, and the error says why and to pass --token', async () => {
    const file = kubeconfig('cert-user', { 'client-certificate-data': Buffer.from(api.cert.cert).toString('base64'), 'client-key-data': Buffer.from(api.cert.key).toString('base64') });
    const r = await run(['--kubeconfig', file, '--server-name', 'localhost', 'get', 'policies']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /refused the call: .*bearer token.*; the kubeconfig user "cert-user" has a client certificate, no bearer token, and the gateway takes only tokens: pass --token/);
  });
});

describe('the CLI with no kubeconfig at all', () => {
  it('says there is none and names --address, rather than an HTTP error from a guessed localhost:8080', async () => {
    const main = fileURLToPath(new URL('../cli/main.ts', import.meta.url));
    const home = mkdtempSync(join(tmpdir(), 'oversell-cli-home-'));
    try {
      const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(KUBECONFIG|KUBERNETES_SERVICE_HOST|OVERSELL_.*)$/.test(k)));
      const r = await new Promise<{ status: number; stderr: string }>((resolve) =>
        execFile(process.execPath, ['--import', 'tsx', main, 'top'], { encoding: 'utf8', timeout: 30_000, env: { ...env, HOME: home } }, (err, _stdout, stderr) => resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stderr })),
      );
      assert.equal(r.status, 1);
      assert.match(r.stderr, /^error: no kubeconfig to find the gateway through \(\$KUBECONFIG is not set, .*\/\.kube\/config does not exist, and this is not a pod in a cluster\): pass --address host:port/);
      assert.doesNotMatch(r.stderr, /HTTP protocol/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
