#!/usr/bin/env node
// oversell-agent: one per node. Reads real usage from /proc and the pod cgroups and
// streams it to the gateway.
import { inClusterAccess, kubeconfigAccess, type KubeAccess } from './kube/kube-access.js';
import { parsed, stopOnSignals } from '../lib/cli.js';
import { defineAgentFlags } from './flags.js';
import { parseDuration } from '../lib/duration.js';
import { gatewayConnection } from './stream/gateway-connection.js';
import { createLogger } from '../lib/log.js';
import { startAgent } from './agent.js';
import { watchGatewayEndpoints } from './stream/endpoint-discovery.js';
import { filePodSource, noPodSource, watchPodSource, type PodSource } from './requests/pod-source.js';
import { detectCgroupLayout } from './sample/cgroup-layout.js';
import { readHostFacts } from './sample/host-facts.js';

const cmd = defineAgentFlags();
cmd.parse();
const o = cmd.opts<{
  nodeName: string; gateway: string; gatewayDiscovery?: string; procRoot: string; cgroupRoot: string; interval: number | string;
  podReportEvery: number | string; kubeconfig?: string; podsFile?: string; logLevel: string; metricsAddress: string;
  gatewayCaFile?: string; gatewayServerName?: string; tokenFile?: string;
}>();
const log = createLogger('oversell-agent', o.logLevel);

const inCluster = Boolean(process.env.KUBERNETES_SERVICE_HOST);
function kubeAccess(): KubeAccess | undefined {
  if (o.kubeconfig) return kubeconfigAccess(o.kubeconfig);
  return inCluster ? inClusterAccess() : undefined;
}

async function podSource(kc: KubeAccess | undefined): Promise<PodSource> {
  if (o.podsFile) return filePodSource(o.podsFile, log);
  if (!kc) {
    log.info('no cluster (no --kubeconfig, not in a pod): requests of bound pods are reported as unknown');
    return noPodSource();
  }
  return watchPodSource(kc, o.nodeName, log);
}

try {
  const intervalMs = parsed(o.interval, (s) => parseDuration(s, '--interval'));
  const layout = detectCgroupLayout(o.cgroupRoot);
  const host = await readHostFacts(layout).catch((err: unknown) => {
    log.warn({ err: String(err) }, 'could not read host facts; continuing without them');
    return undefined;
  });
  const kc = kubeAccess();
  const discovery = o.gatewayDiscovery?.split('/');
  if (o.gatewayDiscovery && (discovery?.length !== 2 || !kc)) {
    throw new Error(`--gateway-discovery needs namespace/service and a cluster (in a pod or --kubeconfig), got ${JSON.stringify(o.gatewayDiscovery)}`);
  }
  const agent = startAgent({
    nodeName: o.nodeName,
    gatewayAddresses: discovery ? [] : o.gateway.split(',').map((a) => a.trim()).filter(Boolean),
    procRoot: o.procRoot,
    cgroupRoot: o.cgroupRoot,
    intervalMs,
    podReportEvery: Number(o.podReportEvery),
    pods: await podSource(kc),
    log,
    ...(host && { host }),
    connection: gatewayConnection({
      ...(o.gatewayCaFile && { caFile: o.gatewayCaFile }),
      ...(o.gatewayServerName && { serverName: o.gatewayServerName }),
      ...(o.tokenFile && { tokenFile: o.tokenFile }),
    }),
  });
  const watch = discovery && kc
    ? await watchGatewayEndpoints(kc, discovery[0] ?? '', discovery[1] ?? '', (addresses) => agent.gateways.set(addresses), log)
    : undefined;
  let metricsServer: import('node:http').Server | undefined;
  if (o.metricsAddress) {
    const at = o.metricsAddress.lastIndexOf(':');
    const bound = await agent.metrics.listen(o.metricsAddress.slice(0, at) || '0.0.0.0', Number(o.metricsAddress.slice(at + 1)));
    metricsServer = bound.server;
    log.info({ metrics: `${o.metricsAddress.slice(0, at)}:${bound.port}` }, 'agent metrics serving');
  }
  stopOnSignals(async () => {
    metricsServer?.close();
    await watch?.stop();
    await agent.stop();
  }, log);
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'agent cannot start');
  process.exit(2);
}
