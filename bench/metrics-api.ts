// The metrics API at 10,000 nodes and 100,000 pods (issue 33, item 5): what
// the pod directory adds to the gateway's memory, and how long a list takes
// over real HTTPS (front-proxy client certificate, access allowed from the
// cache), beside metrics-server's published sizing of 1 millicore and 2 MiB
// per node. In-process: the server and the client share this process's CPU.
import { Agent, request } from 'node:https';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { NodeStore } from '../gateway/store/node-store.js';
import { directoryPod, PodDirectory, type DirectoryPod } from '../gateway/store/pod-directory.js';
import { buildMetricsApiServer } from '../gateway/metrics-api/metrics-api-server.js';
import { requestHeaderConfig } from '../gateway/metrics-api/front-proxy.js';
import { cachedAccessReview } from '../gateway/metrics-api/access-review.js';
import { generateCa, generateServingCertificate, issueServingCertificate } from '../gateway/tls/self-signed.js';
import { createLogger } from '../lib/log.js';
import { storeSample } from '../test/helpers/store-sample.js';
import { percentile, round, runIfMain, type BenchResult } from './result.js';

const hex = (n: number, width = 64) => n.toString(16).padStart(width, '0');

async function settle(): Promise<void> {
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((r) => setTimeout(r, 100));
  gc?.();
}
const heap = () => process.memoryUsage().heapUsed;

/** Pod i: namespace ns-(i % namespaces), three labels as a Deployment's pods have, two containers and the sandbox. */
function podObject(i: number, nodes: number, namespaces: number) {
  return {
    metadata: { uid: hex(i, 32), namespace: `ns-${i % namespaces}`, name: `app-${Math.floor(i / namespaces)}-7d9f8c6b5-${hex(i, 5)}`, labels: { app: `app-${i % 50}`, 'pod-template-hash': '7d9f8c6b5', tier: 'web' } },
    spec: { nodeName: `node-${i % nodes}`, containers: [] },
    status: { phase: 'Running', containerStatuses: [{ name: 'app', containerID: `containerd://${hex(2 * i)}` }, { name: 'proxy', containerID: `containerd://${hex(2 * i + 1)}` }] },
  };
}

export async function run(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const nodes = options.quick ? 1000 : 10_000;
  const pods = nodes * 10;
  const namespaces = pods / 100;
  const log = createLogger('bench-metrics-api', 'silent');

  // The directory alone: what watching pods for the metrics API keeps.
  await settle();
  const before = heap();
  const directory = new PodDirectory();
  const all: DirectoryPod[] = [];
  for (let i = 0; i < pods; i++) all.push(directoryPod(podObject(i, nodes, namespaces) as never)!);
  directory.replaceAll(all);
  all.length = 0;
  await settle();
  const directoryBytes = heap() - before;

  const store = new NodeStore({ retainMs: 60_000, forgetAfterMs: 600_000 });
  const now = Date.now();
  for (let n = 0; n < nodes; n++) {
    store.attach(`node-${n}`, `agent-${n}`, null, n + 1);
    for (const [seq, at] of [[1, now - 11_000], [2, now - 1000]] as const) {
      const report = [];
      for (let i = n; i < pods; i += nodes) {
        report.push({
          uid: hex(i, 32), qosClass: 'burstable', cpuUsageMillicores: 130, memoryWorkingSetBytes: 96 * 2 ** 20, cpuThrottledMicros: 0,
          containers: [
            { containerId: hex(2 * i), cpuUsageMillicores: 120, memoryWorkingSetBytes: 80 * 2 ** 20 },
            { containerId: hex(2 * i + 1), cpuUsageMillicores: 9, memoryWorkingSetBytes: 15 * 2 ** 20 },
            { containerId: hex(10 * pods + i), cpuUsageMillicores: 1, memoryWorkingSetBytes: 2 ** 20 },
          ],
        });
      }
      storeSample(store, `node-${n}`, n + 1, {
        seq, timestampMs: at, cpuUsageMillicores: 1500, memoryWorkingSetBytes: 6 * 2 ** 30, rootCgroupMemoryWorkingSetBytes: 0, cpuManager: null, capacity: { cpuMillicores: 8000, memoryBytes: 32 * 2 ** 30 }, pressure: null,
        requests: { cpuMillicores: 6000, memoryBytes: 20 * 2 ** 30, podCount: 10, known: true }, summaries: [], onBeat: false, podNamesAsBefore: false, podsIncluded: true, pods: report,
      }, at);
    }
  }

  const proxyCa = await generateCa();
  const proxy = await issueServingCertificate(proxyCa, ['front-proxy-client'], new Date(), 30, 'clientAuth');
  const serving = await generateServingCertificate(['localhost', '127.0.0.1']);
  const config = requestHeaderConfig({ 'requestheader-client-ca-file': proxyCa.cert, 'requestheader-allowed-names': '["front-proxy-client"]', 'requestheader-username-headers': '["X-Remote-User"]' });
  const server = await buildMetricsApiServer({
    bindAddress: '127.0.0.1', port: 0, tls: serving, handshakeTimeoutMs: 10_000,
    routes: {
      store, directory, staleAfterMs: () => 40_000, trust: () => config,
      review: cachedAccessReview(async () => ({ allowed: true, reason: '' })),
      notReady: () => undefined, now: Date.now, log,
    },
  });
  await server.start();
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const get = (path: string) => new Promise<{ ms: number; cpuMs: number; bytes: number; status: number }>((resolve, reject) => {
    const t = process.hrtime.bigint();
    const cpu = process.cpuUsage();
    const req = request({ host: '127.0.0.1', port: server.port, path, ca: serving.ca, servername: 'localhost', ...proxy, agent, headers: { 'X-Remote-User': 'system:serviceaccount:kube-system:horizontal-pod-autoscaler' } }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => {
        const used = process.cpuUsage(cpu);
        resolve({ ms: Number(process.hrtime.bigint() - t) / 1e6, cpuMs: (used.user + used.system) / 1000, bytes, status: res.statusCode ?? 0 });
      });
    });
    req.on('error', reject);
    req.end();
  });
  const measure = async (path: string, times: number) => {
    await get(path); // warm: the connection and the access decision
    const runs = [];
    for (let i = 0; i < times; i++) {
      const r = await get(path);
      if (r.status !== 200) throw new Error(`${path}: HTTP ${r.status}`);
      runs.push(r);
    }
    const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
    return { p50: percentile(ms, 50), max: ms[ms.length - 1] ?? NaN, cpuMs: runs.reduce((s, r) => s + r.cpuMs, 0) / runs.length, bytes: runs[0]?.bytes ?? 0 };
  };
  try {
    const nodeList = await measure('/apis/metrics.k8s.io/v1beta1/nodes', options.quick ? 3 : 5);
    // The main thread also answers reviews: how long it is held at once while it lists every pod.
    const loop = monitorEventLoopDelay({ resolution: 5 });
    loop.enable();
    const podList = await measure('/apis/metrics.k8s.io/v1beta1/pods', options.quick ? 3 : 5);
    loop.disable();
    const stallMs = loop.max / 1e6;
    console.log(`  metrics-api: longest event-loop stall while listing every pod: ${round(stallMs, 1)} ms`);
    // What the HPA controller asks every 15 s per HorizontalPodAutoscaler: one namespace, its Deployment's labels.
    const hpaList = await measure('/apis/metrics.k8s.io/v1beta1/namespaces/ns-7/pods?labelSelector=app%3Dapp-7', options.quick ? 10 : 30);
    const podGet = await measure(`/apis/metrics.k8s.io/v1beta1/namespaces/ns-7/pods/app-0-7d9f8c6b5-${hex(7, 5)}`, options.quick ? 20 : 100);
    const line = (what: string, r: typeof nodeList) => console.log(`  metrics-api: ${what}: p50 ${round(r.p50, 1)} ms, max ${round(r.max, 1)} ms, ${round(r.cpuMs, 1)} ms CPU, ${round(r.bytes / 2 ** 20, 2)} MiB`);
    line(`${nodes} nodes`, nodeList);
    line(`${pods} pods`, podList);
    line('one namespace by label (HPA)', hpaList);
    line('one pod', podGet);
    const bytesPerPod = directoryBytes / pods;
    console.log(`  metrics-api: pod directory ${round(directoryBytes / 2 ** 20, 1)} MiB for ${pods} pods (${Math.round(bytesPerPod)} bytes a pod, ${round(directoryBytes / nodes / 1024, 1)} KiB a node at 10 pods a node)`);
    const directoryKibPerNode = directoryBytes / nodes / 1024;
    return {
      name: 'metrics-api',
      summary: `${nodes} nodes listed in ${round(nodeList.p50, 0)} ms, ${pods} pods in ${round(podList.p50, 0)} ms (p50); an HPA's namespace list ${round(hpaList.p50, 1)} ms; the pod directory ${round(directoryKibPerNode, 1)} KiB a node (10 pods), against metrics-server's 2 MiB`,
      figures: {
        nodes, pods,
        nodes_list_p50_ms: round(nodeList.p50, 1), nodes_list_max_ms: round(nodeList.max, 1), nodes_list_cpu_ms: round(nodeList.cpuMs, 1), nodes_list_mib: round(nodeList.bytes / 2 ** 20, 2),
        pods_list_longest_loop_stall_ms: round(stallMs, 1),
        pods_list_p50_ms: round(podList.p50, 1), pods_list_max_ms: round(podList.max, 1), pods_list_cpu_ms: round(podList.cpuMs, 1), pods_list_mib: round(podList.bytes / 2 ** 20, 2),
        hpa_namespace_list_p50_ms: round(hpaList.p50, 2), hpa_namespace_list_cpu_ms: round(hpaList.cpuMs, 2),
        pod_get_p50_ms: round(podGet.p50, 2), pod_get_cpu_ms: round(podGet.cpuMs, 2),
        directory_mib: round(directoryBytes / 2 ** 20, 1), directory_bytes_per_pod: Math.round(bytesPerPod), directory_kib_per_node: round(directoryKibPerNode, 1),
      },
      reference: {
        metrics_server_memory_per_node_mib: 2,
        metrics_server_cpu_per_node_millicores: 1,
        metrics_server_at_these_nodes: `${nodes} millicores, ${round((2 * nodes) / 1024, 1)} GiB`,
      },
      targets: [
        { name: `${pods} pods listed in under 5 s (p50)`, measured: `${round(podList.p50, 0)} ms`, met: podList.p50 < 5000 },
        { name: `the main thread (reviews) held at most 250 ms at once while ${pods} pods are listed`, measured: `${round(stallMs, 0)} ms`, met: stallMs < 250 },
        { name: `${nodes} nodes listed in under 1 s (p50)`, measured: `${round(nodeList.p50, 0)} ms`, met: nodeList.p50 < 1000 },
        { name: 'the pod directory under 10 % of metrics-server\'s 2 MiB a node', measured: `${round(directoryKibPerNode, 1)} KiB a node`, met: directoryKibPerNode < 204.8 },
      ],
      notes: [
        `in-process over real HTTPS (keep-alive, front-proxy client certificate, access allowed from the cache): ${nodes} nodes each with 10 pods of two containers and the sandbox, two pod reports each; latency is the client's wall time to the last byte, CPU the whole process's (server and client) per request`,
        'memory is what the pod directory (--metrics-api on) adds to the V8 heap after a full GC (--expose-gc); the per-container usage in the store is there with or without the metrics API (the agent sends it) and is not counted',
        'metrics-server\'s sizing is from its README (1 millicore and 2 MiB per node, for its scrapes every 15 s): oversell\'s CPU for the data is the ingest already paid for the allocatable decisions; what the API adds is the CPU per request above, times what is asked (the HPA controller lists each HPA\'s pods every 15 s)',
      ],
    };
  } finally {
    agent.destroy();
    await server.close();
  }
}

runIfMain(import.meta.url, run);
