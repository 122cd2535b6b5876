// The agent's configuration as one typed value, read from argv and an
// environment without starting anything (test/config.test.ts); main.ts carries it out.
import type { OutputConfiguration } from 'commander';
import { parseArgs, parsed, type Env } from '../lib/cli.js';
import { parseDuration } from '../lib/duration.js';
import { defineAgentFlags } from './flags.js';
import type { GatewayConnectionOptions } from './stream/gateway-connection.js';

export interface AgentConfig {
  nodeName: string;
  procRoot: string;
  cgroupRoot: string;
  /** The kubelet's root directory (its CPU manager checkpoint); undefined: not read. */
  kubeletRootDir?: string;
  intervalMs: number;
  podReportEvery: number;
  logLevel: string;
  /** Where /metrics and /healthz listen (host '' is every interface); undefined: off. */
  metrics?: { host: string; port: number };
  /** Undefined: no cluster (no --kubeconfig, not in a pod). */
  kube?: { kind: 'in-cluster' } | { kind: 'kubeconfig'; file: string };
  gateways: { kind: 'addresses'; addresses: string[] } | { kind: 'discovery'; namespace: string; service: string };
  /** Requests of the pods bound to the node: from a file, a watch, or unknown. */
  pods: { source: 'file'; file: string } | { source: 'watch' } | { source: 'none' };
  connection: GatewayConnectionOptions;
}

/** A value or combination the agent refuses; the message says what to change. */
export class AgentConfigError extends Error {
  override name = 'AgentConfigError';
  logLevel = 'info';
}

/** Throws AgentConfigError for a refused value or combination, CommanderError for what commander refuses or --help. */
export function loadAgentConfig(argv: readonly string[], env: Env, output?: OutputConfiguration): AgentConfig {
  const { values: o } = parseArgs(defineAgentFlags, argv, env, output);
  try {
    return build(o, env);
  } catch (err) {
    const refusal = err instanceof AgentConfigError ? err : new AgentConfigError((err as Error).message, { cause: err });
    refusal.logLevel = String(o.logLevel);
    throw refusal;
  }
}

function build(o: Record<string, unknown>, env: Env): AgentConfig {
  const kube: AgentConfig['kube'] = o.kubeconfig ? { kind: 'kubeconfig', file: String(o.kubeconfig) } : env.KUBERNETES_SERVICE_HOST ? { kind: 'in-cluster' } : undefined;
  let gateways: AgentConfig['gateways'];
  if (o.gatewayDiscovery) {
    // --gateway next to it is not refused: the manifests set both on purpose (docs/install.md), discovery wins.
    const discovery = String(o.gatewayDiscovery).split('/');
    const [namespace, service] = discovery;
    if (discovery.length !== 2 || !namespace || !service || !kube) {
      throw new AgentConfigError(`--gateway-discovery needs namespace/service and a cluster (in a pod or --kubeconfig), got ${JSON.stringify(o.gatewayDiscovery)}`);
    }
    gateways = { kind: 'discovery', namespace, service };
  } else {
    gateways = { kind: 'addresses', addresses: String(o.gateway).split(',').map((a) => a.trim()).filter(Boolean) };
  }
  if (o.gatewayServerName && !o.gatewayCaFile) {
    throw new AgentConfigError('--gateway-server-name is ignored without --gateway-ca-file: gRPC is plaintext and no certificate is checked; pass --gateway-ca-file too, or drop it');
  }
  const address = String(o.metricsAddress ?? '');
  const metrics = address ? listenAddress(address, '--metrics-address') : undefined;
  return {
    nodeName: String(o.nodeName),
    procRoot: String(o.procRoot),
    cgroupRoot: String(o.cgroupRoot),
    ...(o.kubeletRootDir ? { kubeletRootDir: String(o.kubeletRootDir) } : {}),
    intervalMs: parsed(o.interval, (s) => parseDuration(s, '--interval')),
    podReportEvery: Number(o.podReportEvery),
    logLevel: String(o.logLevel),
    ...(metrics && { metrics }),
    ...(kube && { kube }),
    gateways,
    pods: o.podsFile ? { source: 'file', file: String(o.podsFile) } : kube ? { source: 'watch' } : { source: 'none' },
    connection: {
      ...(o.gatewayCaFile ? { caFile: String(o.gatewayCaFile) } : {}),
      ...(o.gatewayServerName ? { serverName: String(o.gatewayServerName) } : {}),
      ...(o.tokenFile ? { tokenFile: String(o.tokenFile) } : {}),
    },
  };
}

/**
 * host:port, [ipv6]:port or :port (every interface, IPv4 and IPv6: a pod may
 * have either address, and the PodMonitor scrapes the pod IP of both
 * families). Host '' is every interface.
 */
export function listenAddress(address: string, flag: string): { host: string; port: number } {
  const m = /^(?:\[([0-9A-Fa-f:.]+(?:%[\w.-]+)?)\]|([^:[\]]*)):(\d{1,5})$/.exec(address);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) {
    throw new AgentConfigError(`${flag} must be host:port, [ipv6]:port or :port (every interface), got ${JSON.stringify(address)}`);
  }
  return { host: m[1] ?? m[2] ?? '', port };
}
