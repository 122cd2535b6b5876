// What a report of a node's decision inputs costs between two replicas of a
// sharded gateway (gateway/shard/node-inputs-sender.ts): the sender's part
// (summaries and history digest from the record, JSON) and the receiver's
// (parse, check, keep), over real HTTPS on loopback, in one process so both
// ends' CPU is read together; and the receiver's part alone. The 100,000-node
// plan (bench/capacity.ts) costs every report every replica receives with it.
import { NodeStore } from '../gateway/store/node-store.js';
import { PeerInputs } from '../gateway/store/peer-inputs.js';
import { NodeInputsSender, nodeReport, reportShape } from '../gateway/shard/node-inputs-sender.js';
import { peerInputsFromWire } from '../gateway/shard/node-inputs-wire.js';
import { PeerClient } from '../gateway/shard/peer-client.js';
import { peerPlugin } from '../gateway/shard/peer-plugin.js';
import { ShardView } from '../gateway/shard/shard-view.js';
import { LocalNodes } from '../gateway/query/local-nodes.js';
import { flagsPolicySource } from '../gateway/policies/policy-source.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';
import { generateServingCertificate } from '../gateway/tls/self-signed.js';
import { LoadHistory } from '../gateway/decide/load-history.js';
import { planId } from '../lib/usage/summary-plan.js';
import { createLogger } from '../lib/log.js';
import { storeSample } from '../test/helpers/store-sample.js';
import { nodeSample } from '../test/helpers/node-reviews.js';
import { round, runIfMain, type BenchResult } from './result.js';
import Fastify from 'fastify';

const cpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const nodes = options.quick ? 1000 : 5000;
  const rounds = options.quick ? 5 : 20;
  const store = new NodeStore({ retainMs: 600_000, forgetAfterMs: 600_000 });
  const now = Date.now();
  const plan = planId(DEFAULT_POLICY);
  for (let i = 0; i < nodes; i++) {
    const name = `node-${i}`;
    store.attach(name, `agent-${i}`, null, i + 1);
    const history = new LoadHistory(86_400_000);
    for (let t = 0; t < 600; t++) history.record(now - (600 - t) * 10_000, 0.3 + (t % 17) / 100, 0.5 + (t % 13) / 100);
    store.seedHistory(name, history);
    storeSample(store, name, i + 1, nodeSample(now, { seq: 1, summaries: [{ planId: plan, samples: 600, spanMs: 600_000, cpuMillicores: 700, memoryBytes: 6 * 2 ** 30, cpuPressure: false, memoryPressure: false }] }), now);
  }
  const serving = await generateServingCertificate(['localhost', '127.0.0.1']);
  const kept = new PeerInputs(600_000);
  const receiver = Fastify({ https: { cert: serving.cert, key: serving.key, requestCert: true, rejectUnauthorized: false }, bodyLimit: 4 * 1024 * 1024 });
  let bodyBytes = 0;
  receiver.addHook('onRequest', async (request) => {
    bodyBytes += Number(request.headers['content-length'] ?? 0);
  });
  await receiver.register(peerPlugin, {
    local: new LocalNodes(store, flagsPolicySource(DEFAULT_POLICY), () => Date.now()),
    certificate: () => serving.cert,
    watch: { streams: () => true, onMembersChange: () => () => {}, stallMs: 30_000 },
    inputs: { keep: (n) => kept.put(n, Date.now()), refused: (why) => { throw new Error(`refused: ${why}`); } },
  });
  await receiver.listen({ host: '127.0.0.1', port: 0 });
  const client = new PeerClient(() => serving);
  const view = new ShardView(2, (key) => key === 'self');
  view.set([{ key: 'self', webhook: 'unused' }, { key: 'peer', webhook: `127.0.0.1:${(receiver.server.address() as { port: number }).port}` }]);
  const policies = flagsPolicySource(DEFAULT_POLICY);
  const sender = new NodeInputsSender({ store, policies: () => policies.entries(), view, client, identity: 'bench', now: Date.now, log: createLogger('bench', 'silent'), onFailed: () => { throw new Error('send failed'); } });
  // Every node changed, as at a steady 20 s send interval over a batch: reported in batches of a quarter second's worth at 10,000 agents.
  const batch = 125;
  const names = [...Array(nodes).keys()].map((i) => `node-${i}`);
  const mark = (from: number) => {
    for (let i = from; i < from + batch; i++) store.emit('updated', store.get(names[i % nodes]!)!);
  };
  try {
    sender.start();
    // Warm up: every node once.
    for (let i = 0; i < nodes; i += batch) {
      mark(i);
      await sender.flush();
    }
    if (kept.size !== nodes) throw new Error(`${kept.size} of ${nodes} nodes kept`);
    const reports = rounds * nodes;
    bodyBytes = 0;
    const before = cpuUs();
    const started = performance.now();
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < nodes; i += batch) {
        mark(i);
        await sender.flush();
      }
    }
    const bothUs = (cpuUs() - before) / reports;
    const wallUs = ((performance.now() - started) * 1000) / reports;
    const bytesPerReport = bodyBytes / reports;
    // The sender's part alone, once per changed node whatever the replicas (the sender shares it among them):
    // the summaries and the history digest from the record, as JSON. And the receiver's alone on those bodies.
    const shape = reportShape(policies.entries());
    const build = (name: string) => nodeReport(store, name, shape, now)!;
    const bodies: string[] = [];
    const buildBefore = cpuUs();
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < nodes; i += batch) {
        const body = `{"nodes":[${names.slice(i, i + batch).map(build).join(',')}]}`;
        if (r === 0) bodies.push(body);
      }
    }
    const buildUs = (cpuUs() - buildBefore) / reports;
    const receiveBefore = cpuUs();
    for (let r = 0; r < rounds; r++) {
      for (const body of bodies) {
        const read = peerInputsFromWire(JSON.parse(body));
        if (typeof read === 'string') throw new Error(read);
        kept.put(read, Date.now());
      }
    }
    const receiveUs = (cpuUs() - receiveBefore) / reports;
    console.log(`  peer-inputs: ${round(bothUs, 1)} µs CPU a report, both ends over HTTPS (${round(wallUs, 1)} µs wall), ${Math.round(bytesPerReport)} bytes; building alone ${round(buildUs, 1)} µs, receiving alone ${round(receiveUs, 1)} µs`);
    return {
      name: 'peer-inputs',
      summary: `a node's report between replicas: ${round(bothUs, 1)} µs CPU both ends over HTTPS, of which building it ${round(buildUs, 1)} µs (once for every replica it goes to) and receiving it ${round(receiveUs, 1)} µs; ${Math.round(bytesPerReport)} bytes`,
      figures: { report_us_both_ends: round(bothUs, 1), build_us_per_report: round(buildUs, 1), receive_us_per_report: round(receiveUs, 1), bytes_per_report: Math.round(bytesPerReport), batch_reports: batch, nodes, rounds },
      targets: [{ name: 'every report kept (none refused or failed)', measured: `${kept.size} of ${nodes} nodes`, met: kept.size === nodes }],
      notes: [`in-process: ${nodes} nodes with a sample, an agent summary under the default policy's plan and a load history of 600 points; the sender reports ${batch} changed nodes a request (a quarter second of 10,000 agents sending every 20 s) to a peer plugin on loopback HTTPS with the gateway's serving certificate, ${rounds} rounds of every node; CPU of the whole process (both ends) per report; building alone: the summaries, the history digest and the JSON of each report, as the sender makes them once per change for every replica; receiving alone: JSON.parse, the checks and the keep, without HTTP`],
    };
  } finally {
    sender.stop();
    client.close();
    await receiver.close();
  }
}

runIfMain(import.meta.url, run);
