// The gateway's configuration as one typed value, read from argv and an
// environment without starting anything (table-tested in test/config.test.ts).
// main.ts loads it and hands it to startFromConfig (gateway/start.ts).
//
// Local mode is a gateway with no kubeconfig in use (not in a pod, no
// --kubeconfig): it can only take its policy from flags, its certificate from
// files or its own CA, and cannot authenticate anyone. The types say so.
import type { OutputConfiguration } from 'commander';
import { join } from 'node:path';
import { parseArgs, parsed, type Args, type Env } from '../../lib/cli.js';
import { containerMemoryLimit } from '../../lib/container-memory.js';
import { parseDuration } from '../../lib/duration.js';
import { parseLabelSelector } from '../../lib/label-selector.js';
import { DEFAULT_POLICY, type Policy, type RiskBudget } from '../decide/policy.js';
import { RISK_BUDGET_BOUNDS, riskBudgetConflict } from '../policies/policy-spec.js';
import { chooseTransport } from './local-mode.js';
import { defineGatewayFlags } from './flags.js';
import { ignoredFlags } from './ignored-flags.js';
import type { AuthConfig, CommonConfig, GatewayConfig, KubeSource, PoliciesConfig, SidecarsConfig, TlsConfig } from './types.js';
import { AGENT_SENDING, GATEWAY_DEFAULTS, SUMMARY_SEND_EVERY_MS } from './defaults.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
  /** The --log-level asked for, to say this at (loadConfig sets it). */
  logLevel = 'info';
}

const str = (v: unknown): string | undefined => (v === undefined ? undefined : String(v));

/**
 * Memory an agent's connection holds in the gateway (its TLS session, HTTP/2
 * session and stream, its store entry), with margin: 10,000 agents measured at
 * 1121 MiB RSS peak, about 95 KiB each over an idle gateway's 170 MiB
 * (docs/benchmarks.md, cluster).
 */
export const MEMORY_PER_CONNECTION_BYTES = 128 * 1024;
/** What the gateway holds besides its connections: an idle one, its store of nodes and the review load's garbage. */
const MEMORY_BEFORE_CONNECTIONS_BYTES = 256 * 2 ** 20;

/**
 * --max-connections when unset: what the container's memory limit holds, so
 * that agents past it are refused (and retry) instead of the gateway being
 * OOM-killed with every agent's data (20,000 agents in 1536 MiB were); the
 * built-in default where there is no limit.
 */
export function defaultMaxConnections(memoryLimitBytes: number | undefined): number {
  const fallback = GATEWAY_DEFAULTS.connections.grpcMaxConnections;
  if (memoryLimitBytes === undefined) return fallback;
  return Math.max(100, Math.min(fallback, Math.floor((memoryLimitBytes - MEMORY_BEFORE_CONNECTIONS_BYTES) / MEMORY_PER_CONNECTION_BYTES)));
}

function maxConnections(v: unknown): number {
  if (v === undefined) return defaultMaxConnections(containerMemoryLimit());
  return Number(v);
}

/** --shutdown-drain: the pod's default grace period (30 s) must leave the 10 s a close may take after it. */
function shutdownDrain(v: unknown): number {
  const ms = parsed(v, (s) => parseDuration(s, '--shutdown-drain'));
  if (ms > 20_000) throw new ConfigError(`--shutdown-drain ${ms / 1000}s: the kubelet kills the pod 30 s after SIGTERM by default, and closing may take 10 s after the drain; use 20s or less`);
  return ms;
}

function fraction(v: unknown, name: string): number {
  const n = Number(v);
  if (!(n > 0 && n <= 1)) throw new ConfigError(`${name} must be in (0, 1], got ${v}`);
  return n;
}

export function onOff(v: unknown, name: string, dflt: boolean): boolean {
  if (v === undefined) return dflt;
  if (['on', 'true', '1'].includes(String(v))) return true;
  if (['off', 'false', '0'].includes(String(v))) return false;
  throw new ConfigError(`${name} must be on or off, got ${JSON.stringify(v)}`);
}

function namespacedName(v: string, name: string): { namespace: string; name: string } {
  const [namespace, n] = v.split('/');
  if (!namespace || !n) throw new ConfigError(`${name} must be namespace/name, got ${JSON.stringify(v)}`);
  return { namespace, name: n };
}

const list = (v: string) => v.split(',').map((s) => s.trim()).filter(Boolean);

function learningFlag(v: unknown): 'Targets' | 'Floor' {
  const s = String(v ?? 'Targets');
  if (s !== 'Targets' && s !== 'Floor') throw new ConfigError(`--history-learning must be Targets or Floor, got ${JSON.stringify(s)}`);
  return s;
}

function budgetFlags(o: Record<string, unknown>, resource: 'cpu' | 'memory'): RiskBudget {
  const on = String(o.riskBudget ?? 'on');
  if (on !== 'on' && on !== 'off') throw new ConfigError(`--risk-budget must be on or off, got ${JSON.stringify(on)}`);
  const Resource = resource === 'cpu' ? 'Cpu' : 'Memory';
  const overShare = Number(o[`budget${Resource}OverShare`]);
  const margin = Number(o[`budget${Resource}Margin`]);
  const maxOver = RISK_BUDGET_BOUNDS.maxOverShare[resource];
  const maxMargin = RISK_BUDGET_BOUNDS.maxMargin;
  if (!(overShare >= 0 && overShare <= maxOver)) throw new ConfigError(`--budget-${resource}-over-share must be in [0, ${maxOver}], got ${overShare}`);
  if (!(margin >= 0 && margin <= maxMargin)) throw new ConfigError(`--budget-${resource}-margin must be in [0, ${maxMargin}], got ${margin}`);
  const budget = { enabled: on === 'on', overShare, margin };
  const conflict = riskBudgetConflict(resource, budget);
  if (conflict) throw new ConfigError(`--budget-${resource}-over-share ${overShare} with --budget-${resource}-margin ${margin}: ${conflict}`);
  return budget;
}

function flagsPolicy(o: Record<string, unknown>): Policy {
  const p = DEFAULT_POLICY;
  return {
    ...p,
    cpu: { ...p.cpu, maxRatio: Number(o.maxRatioCpu), targetUtilization: fraction(o.targetCpu, '--target-cpu'), riskBudget: budgetFlags(o, 'cpu') },
    memory: { ...p.memory, maxRatio: Number(o.maxRatioMemory), targetUtilization: fraction(o.targetMemory, '--target-memory'), riskBudget: budgetFlags(o, 'memory') },
    history: {
      minSpanMs: parsed(o.historyMinSpan, (s) => parseDuration(s, '--history-min-span')),
      learning: learningFlag(o.historyLearning),
      learningMaxRatio: { cpu: Number(o.historyLearningMaxRatioCpu), memory: Number(o.historyLearningMaxRatioMemory) },
    },
    staleAfterMs: parsed(o.staleAfter, (s) => parseDuration(s, '--stale-after')),
    windowMs: parsed(o.window, (s) => parseDuration(s, '--window')),
    calmPeriodMs: parsed(o.calmPeriod, (s) => parseDuration(s, '--calm-period')),
    hysteresis: Number(o.hysteresis),
    startupGraceMs: parsed(o.startupGrace, (s) => parseDuration(s, '--startup-grace')),
  };
}

/** A steady node's newest data is up to one send interval old: with flags' policy, a default leaves half of --stale-after as margin. */
const flagsStaleAfterMs = (policies: PoliciesConfig) => (policies.source === 'flags' ? policies.policy.staleAfterMs : undefined);

function agentSendingFlags(o: Record<string, unknown>, policies: PoliciesConfig): CommonConfig['agentSending'] {
  const summaries = onOff(o.agentSummaries, '--agent-summaries', true);
  const staleAfterMs = flagsStaleAfterMs(policies);
  const sendEveryMs = o.agentSendEvery !== undefined
    ? parsed(o.agentSendEvery, (s) => parseDuration(s, '--agent-send-every'))
    : summaries ? Math.min(SUMMARY_SEND_EVERY_MS, staleAfterMs === undefined ? Infinity : staleAfterMs / 2) : AGENT_SENDING.sendEveryMs;
  if (summaries && staleAfterMs !== undefined && sendEveryMs >= staleAfterMs) {
    throw new ConfigError(`--agent-send-every ${sendEveryMs / 1000}s is not under --stale-after ${staleAfterMs / 1000}s: with summaries a steady node's agent sends only that often, and its allocatable would fall back to raw between messages; lower it (half of --stale-after leaves room for one lost message)`);
  }
  return { maxBatchSamples: Number(o.agentBatchSamples), sendEveryMs, summaries };
}

function sheddingFlags(o: Record<string, unknown>, policies: PoliciesConfig, args: Args, sendEveryMs: number): CommonConfig['shedding'] {
  const loopDelayMs = parsed(o.shedLoopDelay, (s) => parseDuration(s, '--shed-loop-delay'));
  let maxSendEveryMs = parsed(o.shedMaxSendEvery, (s) => parseDuration(s, '--shed-max-send-every'));
  const maxSampleEveryMs = parsed(o.shedMaxSampleEvery, (s) => parseDuration(s, '--shed-max-sample-every'));
  if (maxSampleEveryMs !== 0 && maxSampleEveryMs < 2000) {
    throw new ConfigError(`--shed-max-sample-every ${maxSampleEveryMs}ms: shedding samples starts at every other sample (2s); use 2s or more, or 0 to never shed samples`);
  }
  // A steady node's newest data is up to one interval old: past staleAfter, shedding would turn its oversell off.
  const staleAfterMs = flagsStaleAfterMs(policies);
  if (!args.given('shedMaxSendEvery')) {
    // The default leaves half of a short --stale-after as margin, and never asks agents to send more often.
    if (staleAfterMs !== undefined) maxSendEveryMs = Math.min(maxSendEveryMs, staleAfterMs / 2);
    return { loopDelayMs, maxSendEveryMs: Math.max(maxSendEveryMs, sendEveryMs), maxSampleEveryMs };
  }
  if (maxSendEveryMs < sendEveryMs) {
    throw new ConfigError(`${args.named('shedMaxSendEvery')} ${maxSendEveryMs / 1000}s is below --agent-send-every ${sendEveryMs / 1000}s: shedding only makes agents send less often; raise it to at least --agent-send-every`);
  }
  if (staleAfterMs !== undefined && maxSendEveryMs >= staleAfterMs) {
    throw new ConfigError(`${args.named('shedMaxSendEvery')} ${maxSendEveryMs / 1000}s is not under --stale-after ${staleAfterMs / 1000}s: a steady node's data would go stale while agents are slowed, and its allocatable fall back to raw; lower it (half of --stale-after leaves room) or raise --stale-after`);
  }
  return { loopDelayMs, maxSendEveryMs, maxSampleEveryMs };
}

function historySnapshotEvery(value: unknown): number {
  const ms = parsed(value, (s) => parseDuration(s, '--history-snapshot-every'));
  if (ms !== 0 && ms < 10_000) {
    throw new ConfigError(`--history-snapshot-every ${ms}ms: each snapshot rewrites every node's history (about 1 KiB a node) to the API server; use 10s or more (the default 5m loses at most 5 minutes of a day's history on a restart), or 0 for none`);
  }
  return ms;
}

function tlsConfig(o: Record<string, unknown>, clusterInUse: boolean): TlsConfig {
  const hosts = list(String(o.tlsHosts));
  if (o.tlsCertFile || o.tlsKeyFile) {
    if (!o.tlsCertFile || !o.tlsKeyFile) throw new ConfigError('--tls-cert-file and --tls-key-file go together: pass both, or neither for a self-managed certificate');
    return { source: 'files', certFile: String(o.tlsCertFile), keyFile: String(o.tlsKeyFile) };
  }
  if (o.tlsSecret) {
    const at = namespacedName(String(o.tlsSecret), '--tls-secret');
    if (!clusterInUse) throw new ConfigError('--tls-secret needs a cluster: run in a pod or pass --kubeconfig');
    return { source: 'secret', ...at, hosts, webhookConfiguration: String(o.webhookConfiguration ?? '') };
  }
  return { source: 'self-managed', dir: String(o.tlsDir), hosts };
}

/**
 * Reads the gateway's flags from argv (without node and the script) and env
 * (standing for process.env), checks every value and combination, and returns
 * the configuration; starts nothing and reads no file. Throws ConfigError for a
 * refused value or combination, and commander's CommanderError for a flag
 * commander refuses or --help (after writing its text to output).
 */
export function loadConfig(argv: readonly string[], env: Env, output?: OutputConfiguration): GatewayConfig {
  const args = parseArgs(defineGatewayFlags, argv, env, output);
  const o = args.values;
  try {
    const config = build(o, env, args);
    const refused = ignoredFlags(config, args);
    if (refused.length > 0) {
      throw new ConfigError(refused.length === 1 ? String(refused[0]) : `${refused.length} flags would be ignored:\n- ${refused.join('\n- ')}`);
    }
    return config;
  } catch (err) {
    const refusal = err instanceof ConfigError ? err : new ConfigError((err as Error).message, { cause: err });
    refusal.logLevel = String(o.logLevel);
    throw refusal;
  }
}

function build(o: Record<string, unknown>, env: Env, args: Args): GatewayConfig {
  parseLabelSelector(String(o.optInSelector)); // a bad selector is refused whatever the mode
  const kubeconfig = str(o.kubeconfig);
  const kube: KubeSource | undefined = kubeconfig ? { kind: 'kubeconfig', file: kubeconfig } : env.KUBERNETES_SERVICE_HOST ? { kind: 'in-cluster' } : undefined;

  const policySource = str(o.policies) ?? (kube ? 'crd' : 'flags');
  if (policySource !== 'crd' && policySource !== 'flags') throw new ConfigError(`--policies must be "crd" or "flags", got ${JSON.stringify(policySource)}`);
  if (policySource === 'crd' && !kube) throw new ConfigError('--policies crd needs a cluster: run in a pod or pass --kubeconfig (or --policies flags)');
  const policies: PoliciesConfig = policySource === 'flags' ? { source: 'flags', policy: flagsPolicy(o) } : { source: 'crd' };

  const leaseNamespace = String(o.leaseNamespace);
  const sidecarSource = str(o.sidecars) ?? (o.sidecarTemplatesFile ? 'file' : kube ? 'configmap' : 'none');
  const sidecarNamespace = String(o.sidecarNamespace ?? leaseNamespace);
  const excludedNamespaces = [sidecarNamespace, leaseNamespace];
  let sidecars: SidecarsConfig;
  if (sidecarSource === 'none') sidecars = { source: 'none', excludedNamespaces };
  else if (sidecarSource === 'file' && o.sidecarTemplatesFile) sidecars = { source: 'file', file: String(o.sidecarTemplatesFile), excludedNamespaces };
  else if (sidecarSource === 'configmap' && kube) sidecars = { source: 'configmap', namespace: sidecarNamespace, excludedNamespaces };
  else throw new ConfigError(`--sidecars must be "configmap" (needs a cluster), "file" (needs --sidecar-templates-file) or "none", got ${JSON.stringify(sidecarSource)}`);

  const tls = tlsConfig(o, kube !== undefined);
  const transport = chooseTransport(kube !== undefined, {
    auth: str(o.auth),
    grpcTls: o.grpcTls === undefined ? undefined : onOff(o.grpcTls, '--grpc-tls', false),
    bindAddress: str(o.bindAddress),
  }, GATEWAY_DEFAULTS.bindAddress);
  if (transport.auth === 'kubernetes' && !kube) {
    throw new ConfigError('--auth kubernetes needs a cluster: run in a pod or pass --kubeconfig (or --auth none for local mode)');
  }
  const agentSending = agentSendingFlags(o, policies);
  const common: CommonConfig = {
    logLevel: String(o.logLevel),
    bindAddress: transport.bindAddress,
    webhookPort: Number(o.webhookPort),
    grpcPort: Number(o.grpcPort),
    agentPort: Number(o.agentPort),
    metricsPort: Number(o.metricsPort),
    grpcTls: transport.grpcTls,
    ...(o.webhookClientCaFile ? { webhookClientCaFile: String(o.webhookClientCaFile) } : {}),
    warmupMs: parsed(o.warmup, (s) => parseDuration(s, '--warmup')),
    shutdownDrainMs: o.shutdownDrain === undefined ? (kube ? GATEWAY_DEFAULTS.shutdownDrainMs : 0) : shutdownDrain(o.shutdownDrain),
    connections: {
      grpcMaxConnections: maxConnections(o.maxConnections),
      webhookMaxConnections: Number(o.webhookMaxConnections),
      webhookBacklog: Number(o.webhookBacklog),
      handshakeTimeoutMs: parsed(o.handshakeTimeout, (s) => parseDuration(s, '--handshake-timeout')),
    },
    agentSending,
    shedding: sheddingFlags(o, policies, args, agentSending.sendEveryMs),
    queryLimits: {
      watchesPerCaller: Number(o.queryWatchesPerCaller),
      watches: Number(o.queryWatches),
      listsInFlight: Number(o.queryListsInFlight),
      watchStallMs: parsed(o.queryWatchStall, (s) => parseDuration(s, '--query-watch-stall')),
    },
    grpcStreams: {
      perConnection: Number(o.grpcStreamsPerConnection),
      total: Number(o.grpcStreams),
      stallMs: parsed(o.grpcStreamStall, (s) => parseDuration(s, '--grpc-stream-stall')),
    },
    warnings: [
      ...(transport.warning ? [transport.warning] : []),
      // Removed: one ingest thread serves the agent port (docs/performance-log.md, 2026-12-05). Still accepted, so a rollout that sets it does not stop.
      ...(o.ingestThreads !== undefined ? ['--ingest-threads (OVERSELL_INGEST_THREADS) no longer does anything: one ingest thread serves the agent port; remove it'] : []),
    ],
  };
  const proofKeyFile = str(o.proofKeyFile);

  if (!kube) {
    if (onOff(o.metricsApi, '--metrics-api', false)) {
      throw new ConfigError('--metrics-api on needs a cluster: the metrics API names pods from the API server and serves it through its aggregation layer; run in a pod or pass --kubeconfig');
    }
    // Refused above: crd policies, a Secret for TLS, configmap sidecars, kubernetes auth.
    if (policies.source !== 'flags' || tls.source === 'secret' || sidecars.source === 'configmap') throw new Error('bug: a cluster-only source in local mode got past the checks');
    return {
      ...common,
      mode: 'local',
      policies,
      tls,
      proofKey: { source: 'file', file: proofKeyFile ?? join(String(o.tlsDir), 'proof.key') },
      auth: { mode: 'none' },
      sidecars,
    };
  }
  const auth: AuthConfig = transport.auth === 'none'
    ? { mode: 'none' }
    : {
      mode: 'kubernetes',
      audience: String(o.agentAudience),
      serviceAccounts: list(String(o.agentServiceAccounts ?? `${leaseNamespace}/oversell-agent`)),
      tokenReviewsPerSecond: Number(o.tokenReviewsPerSecond),
      tokenReviewsInFlight: Number(o.tokenReviewsInFlight),
    };
  const caConfigMap = String(o.caConfigmap ?? '');
  const shardCopies = Number(o.shardCopies);
  if (shardCopies > 0 && o.webhookClientCaFile) {
    throw new ConfigError('--shard-copies cannot be used with --webhook-client-ca-file: replicas call each other on the webhook port (node inputs, queries) with the serving certificate, not one from the API server\'s client CA');
  }
  const metricsApi = onOff(o.metricsApi, '--metrics-api', false);
  return {
    ...common,
    mode: 'cluster',
    kube,
    cluster: {
      leaseNamespace,
      identity: String(o.identity),
      statusWritesPerSecond: Number(o.statusWritesPerSecond),
      historySnapshotEveryMs: historySnapshotEvery(o.historySnapshotEvery),
      optInSelector: String(o.optInSelector),
      watchBoundPods: onOff(o.watchBoundPods, '--watch-bound-pods', true),
      ...(shardCopies > 0 && { shard: { copies: shardCopies, service: namespacedName(String(o.shardService ?? `${leaseNamespace}/oversell-gateway-agents`), '--shard-service') } }),
    },
    ...(caConfigMap && { caConfigMap }),
    ...(metricsApi && { metricsApi: { port: Number(o.metricsApiPort) } }),
    policies,
    tls,
    proofKey: proofKeyFile
      ? { source: 'file', file: proofKeyFile }
      : { source: 'secret', ...namespacedName(String(o.proofKeySecret ?? `${leaseNamespace}/oversell-gateway-proof-key`), '--proof-key-secret') },
    auth,
    sidecars,
  };
}
