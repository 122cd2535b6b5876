// `npm start`: the whole pipeline on this machine. Starts the gateway (with a
// self-signed CA under .oversell/tls) and an agent for this host as separate
// processes, then plays the kubelet: every few seconds it sends the gateway a
// nodes/status AdmissionReview for this node and prints what came back.
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { hostname, totalmem, cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { NodeStatus__Output } from '../proto/gen/oversell/v1/NodeStatus.js';
import { oversellV1 } from '../proto/load.js';
import { formatBytes, formatMilli, parseBytes, parseMilli } from '../lib/quantity.js';
import { gib } from './harness/bytes.js';
import { startProcess, type Child } from './harness/processes.js';
import { waitUntil } from './harness/wait.js';
import { connect } from 'node:net';

const env = (k: string, d: string) => process.env[k] ?? d;
const ports = { webhook: env('OVERSELL_WEBHOOK_PORT', '8443'), grpc: env('OVERSELL_GRPC_PORT', '50051'), agent: env('OVERSELL_AGENT_PORT', '50052'), metrics: env('OVERSELL_METRICS_PORT', '9090') };
const everyMs = Number(env('OVERSELL_REPORT_EVERY_MS', '5000'));
const tlsDir = env('OVERSELL_TLS_DIR', '.oversell/tls');
const podsFile = env('OVERSELL_PODS_FILE', fileURLToPath(new URL('../../examples/local-pods.yaml', import.meta.url)));
const nodeName = env('NODE_NAME', hostname().toLowerCase().replace(/[^a-z0-9.-]/g, '-').replace(/^[-.]+|[-.]+$/g, '') || 'local-node');
const bin = (name: string) => fileURLToPath(new URL(`../${name}/main.js`, import.meta.url));

// What a kubelet with default settings would compute: capacity minus the
// default hard eviction threshold for memory (100Mi) and 100m for system daemons.
const capacity = { cpu: formatMilli(cpus().length * 1000), memory: formatBytes(Math.floor(totalmem() / 1024) * 1024) };
const raw = {
  cpu: formatMilli(parseMilli(capacity.cpu, 'cpu') - 100n),
  memory: formatBytes(((parseBytes(capacity.memory, 'memory') - 100n * 1024n * 1024n) / 1024n) * 1024n),
};

const children: Child[] = [];
function run(name: string, args: string[]): Child {
  const child = startProcess(name, process.execPath, ['--enable-source-maps', bin(name), ...args], {
    // Their logs come out here as they would on their own.
    onLine: (line, stream) => (stream === 'stdout' ? process.stdout : process.stderr).write(`${line}\n`),
    onUnexpectedExit: (code, signal) => {
      if (!stopping) {
        console.error(`\n${name} exited (${signal ?? code}); stopping. Its log above says why.`);
        stop(1);
      }
    },
  });
  children.push(child);
  return child;
}

let stopping = false;
function stop(code = 0) {
  stopping = true;
  for (const c of children) void c.kill('SIGTERM');
  setTimeout(() => process.exit(code), 500).unref();
}
process.on('SIGINT', () => stop(0));
process.on('SIGTERM', () => stop(0));

const logLevel = env('OVERSELL_LOG_LEVEL', 'warn');
run('gateway', ['--bind-address', '127.0.0.1', '--webhook-port', ports.webhook, '--grpc-port', ports.grpc, '--agent-port', ports.agent, '--metrics-port', ports.metrics, '--tls-dir', tlsDir, '--policies', 'flags', '--log-level', logLevel]);
// The agent starts once the gateway takes connections, so its first words are not "gateway stream lost".
const accepting = () => new Promise<true | undefined>((resolve) => {
  const socket = connect(Number(ports.agent), '127.0.0.1', () => { socket.destroy(); resolve(true); });
  socket.on('error', () => resolve(undefined));
});
await waitUntil(`the gateway to listen on 127.0.0.1:${ports.agent}`, accepting, 30_000, 100).catch(() => {
  // Its own log says why; the agent retries with backoff anyway.
});
run('agent', ['--node-name', nodeName, '--gateway', `127.0.0.1:${ports.agent}`, '--pods-file', podsFile, '--metrics-address', `127.0.0.1:${env('OVERSELL_AGENT_METRICS_PORT', '9091')}`, '--log-level', logLevel]);

console.log(`oversell local pipeline for node "${nodeName}"
  webhook   https://127.0.0.1:${ports.webhook}/mutate/nodes   (CA: ${tlsDir}/ca.crt)
  gRPC      127.0.0.1:${ports.grpc}   (oversell.v1.NodeUsage)   agents 127.0.0.1:${ports.agent} (oversell.v1.AgentStream)
  metrics   http://127.0.0.1:${ports.metrics}/metrics   probes /healthz /readyz   (agent: http://127.0.0.1:${env('OVERSELL_AGENT_METRICS_PORT', '9091')}/metrics)
  pods      ${podsFile} (requests of pods "bound" here)
  kubelet   capacity cpu ${capacity.cpu} memory ${capacity.memory}; raw allocatable cpu ${raw.cpu} memory ${raw.memory}
Every ${everyMs / 1000}s: a nodes/status AdmissionReview for this node, and what the gateway grants. Ctrl-C stops.
`);

function review(): object {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: '', version: 'v1', kind: 'Node' },
      resource: { group: '', version: 'v1', resource: 'nodes' },
      subResource: 'status',
      name: nodeName,
      operation: 'UPDATE',
      userInfo: { username: `system:node:${nodeName}`, groups: ['system:nodes', 'system:authenticated'] },
      object: {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName, 'oversell.io/enabled': 'true' } },
        status: { capacity: { ...capacity, pods: '110' }, allocatable: { ...raw, pods: '110' } },
      },
    },
  };
}

function postReview(ca: string): Promise<{ patch: Array<{ path: string; value: unknown }>; ms: number }> {
  const body = JSON.stringify(review());
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: Number(ports.webhook), path: '/mutate/nodes', method: 'POST', ca, servername: 'localhost',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`webhook answered ${res.statusCode}: ${text}`));
          const answer = JSON.parse(text) as { response: { patch?: string } };
          const patch = answer.response.patch ? JSON.parse(Buffer.from(answer.response.patch, 'base64').toString()) : [];
          resolve({ patch, ms: performance.now() - started });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const V1 = oversellV1();
const query = new V1.NodeUsage(`127.0.0.1:${ports.grpc}`, grpc.credentials.createInsecure());
const getNode = () =>
  new Promise<NodeStatus__Output>((resolve, reject) =>
    query.GetNode({ name: nodeName }, (err, res) => (err || !res ? reject(err ?? new Error('empty answer')) : resolve(res))),
  );

const mi = (b: number) => gib(b, 2);
async function report(): Promise<void> {
  let ca: string;
  try {
    ca = readFileSync(`${tlsDir}/ca.crt`, 'utf8');
  } catch {
    console.log('waiting for the gateway to write its CA...');
    return;
  }
  try {
    const { patch, ms } = await postReview(ca);
    const n = await getNode();
    const s = n.latest;
    const set = (p: string) => patch.find((op) => op.path === p)?.value as string | undefined;
    const t = new Date().toISOString().slice(11, 19);
    console.log(`${t}  ${nodeName}  data age ${n.ageMs}ms, ${n.window?.samples ?? 0} samples, webhook answered in ${ms.toFixed(1)}ms`);
    if (s) {
      const r = s.requests;
      console.log(`  cpu     now ${s.cpuUsageMillicores}m, p95 ${n.window?.cpuP95Millicores}m | requested ${r?.cpuMillicores}m | allocatable ${raw.cpu} -> ${set('/status/allocatable/cpu') ?? raw.cpu}`);
      console.log(`  memory  now ${mi(s.memoryWorkingSetBytes)}, max ${mi(n.window?.memoryMaxBytes ?? 0)} | requested ${mi(r?.memoryBytes ?? 0)} | allocatable ${raw.memory} -> ${set('/status/allocatable/memory') ?? raw.memory}`);
      const psi = s.pressure;
      if (psi?.available) console.log(`  PSI     cpu some ${psi.cpuSome?.avg10}%  memory some ${psi.memorySome?.avg10}% (avg10)`);
    }
    console.log(`  why     ${n.decision?.reason ?? 'no decision yet'}\n`);
  } catch (err) {
    const e = err as grpc.ServiceError;
    console.log(`  not yet: ${e.details ?? e.message}`);
  }
}

setTimeout(() => {
  void report();
  setInterval(() => void report(), everyMs);
}, 2500);
