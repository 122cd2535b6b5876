// oversell-agent: one per node. Reads real usage from /proc and the pod cgroups and
// streams it to the gateway. The flags are in flags.ts, what they mean together in config.ts.
// The entry point is main.ts, which loads this module (see there why).
import { CommanderError } from 'commander';
import { inClusterAccess, kubeconfigAccess, type KubeAccess } from './kube/kube-access.js';
import { stopOnSignals } from '../lib/cli.js';
import { gatewayConnection } from './stream/gateway-connection.js';
import { createLogger, type Logger } from '../lib/log.js';
import { startAgent } from './agent.js';
import { watchGatewayEndpoints } from './stream/endpoint-discovery.js';
import { filePodSource, noPodSource, watchPodSource, type PodSource } from './requests/pod-source.js';
import { detectCgroupLayout } from './sample/cgroup-layout.js';
import { readHostFacts } from './sample/host-facts.js';
import { AgentConfigError, loadAgentConfig, type AgentConfig } from './config.js';
import { Lifecycle } from '../lib/lifecycle.js';

let config: AgentConfig;
try {
  config = loadAgentConfig(process.argv.slice(2), process.env);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  createLogger('oversell-agent', err instanceof AgentConfigError ? err.logLevel : 'info').fatal({ err: (err as Error).message }, 'agent cannot start');
  process.exit(2);
}
const log = createLogger('oversell-agent', config.logLevel);

function kubeAccess(kube: AgentConfig['kube']): KubeAccess | undefined {
  if (!kube) return undefined;
  return kube.kind === 'kubeconfig' ? kubeconfigAccess(kube.file) : inClusterAccess();
}

async function podSource(pods: AgentConfig['pods'], kc: KubeAccess | undefined, nodeName: string, log: Logger): Promise<PodSource> {
  if (pods.source === 'file') return filePodSource(pods.file, log);
  if (pods.source === 'none' || !kc) {
    log.info('no cluster (no --kubeconfig, not in a pod): requests of bound pods are reported as unknown');
    return noPodSource();
  }
  return watchPodSource(kc, nodeName, log);
}

// Each part is registered where it is built and closed in reverse (lib/lifecycle.ts): a start that fails half way closes what it built.
const life = new Lifecycle((part, err) => log.warn({ part, err: err.message }, 'an agent part did not close cleanly; closing the rest'));
try {
  const layout = detectCgroupLayout(config.cgroupRoot);
  const host = await readHostFacts(layout).catch((err: unknown) => {
    log.warn({ err: String(err) }, 'could not read host facts; continuing without them');
    return undefined;
  });
  const kc = kubeAccess(config.kube);
  const { gateways } = config;
  const agent = startAgent({
    nodeName: config.nodeName,
    gatewayAddresses: gateways.kind === 'addresses' ? gateways.addresses : [],
    procRoot: config.procRoot,
    cgroupRoot: config.cgroupRoot,
    kubeletRootDir: config.kubeletRootDir,
    intervalMs: config.intervalMs,
    podReportEvery: config.podReportEvery,
    pods: await podSource(config.pods, kc, config.nodeName, log),
    log,
    ...(host && { host }),
    connection: gatewayConnection(config.connection),
  });
  life.add({ name: 'agent (sampling and streams)', close: () => agent.stop() });
  if (gateways.kind === 'discovery' && kc) {
    const watch = await watchGatewayEndpoints(kc, gateways.namespace, gateways.service, (addresses) => agent.gateways.set(addresses), log);
    life.add({ name: 'gateway discovery', close: () => watch.stop() });
  }
  if (config.metrics) {
    const bound = await agent.metrics.listen(config.metrics.host, config.metrics.port);
    life.add({ name: 'metrics server', close: () => new Promise<void>((done) => bound.server.close(() => done())) });
    log.info({ metrics: `${bound.host}:${bound.port}` }, 'agent metrics serving');
  }
  await life.start();
  stopOnSignals(() => life.close(), log);
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'agent cannot start');
  await life.close();
  process.exit(2);
}
