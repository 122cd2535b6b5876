// Flags the chosen mode would ignore. A flag the operator set (on the command
// line or through its environment variable) that changes nothing is a mistake
// waiting to bite: a --max-ratio-cpu cap that OversellPolicies overrule, a
// --tls-hosts list a mounted certificate does not have. The gateway refuses
// to start and says which flag, why, and what to do instead. Defaults never
// count: only what was given.
import type { Args } from '../../lib/cli.js';
import type { GatewayConfig } from './types.js';

interface Rule {
  /** commander attribute names: maxRatioCpu for --max-ratio-cpu. */
  keys: readonly string[];
  /** Why these flags change nothing in this config, and what to do; undefined: they are used. */
  ignoredWhen(config: GatewayConfig, args: Args): string | undefined;
}

const NO_CLUSTER = 'without a cluster (local mode: no --kubeconfig, not in a pod): pass --kubeconfig, or drop it';

/** In order: a flag ignored for several reasons is reported for the first. */
export const RULES: readonly Rule[] = [
  {
    keys: ['maxRatioCpu', 'maxRatioMemory', 'targetCpu', 'targetMemory', 'staleAfter', 'window', 'calmPeriod', 'hysteresis', 'startupGrace'],
    ignoredWhen: (c) => (c.policies.source === 'crd'
      ? 'with --policies crd (the default with a cluster): policies come from OversellPolicy objects; set it in an OversellPolicy (docs/policy.md), or pass --policies flags for one policy from flags'
      : undefined),
  },
  {
    keys: ['identity', 'statusWritesPerSecond', 'historySnapshotEvery', 'watchBoundPods', 'optInSelector', 'caConfigmap', 'proofKeySecret', 'shardCopies', 'shardService'],
    ignoredWhen: (c) => (c.mode === 'local' ? NO_CLUSTER : undefined),
  },
  {
    // Without a cluster it names only the namespace sidecars are never injected into.
    keys: ['leaseNamespace'],
    ignoredWhen: (c) => (c.mode === 'local' && c.sidecars.source === 'none' ? NO_CLUSTER : undefined),
  },
  {
    keys: ['agentAudience', 'agentServiceAccounts', 'tokenReviewsPerSecond', 'tokenReviewsInFlight'],
    ignoredWhen: (c) => (c.auth.mode === 'none'
      ? `with --auth none${c.mode === 'local' ? ' (the default in local mode)' : ''}: nobody is authenticated; pass --auth kubernetes, or drop it`
      : undefined),
  },
  {
    keys: ['tlsSecret', 'tlsHosts'],
    ignoredWhen: (c) => (c.tls.source === 'files'
      ? 'with --tls-cert-file and --tls-key-file: the serving certificate comes from those files; drop it, or drop the files for a certificate the gateway manages'
      : undefined),
  },
  {
    keys: ['webhookConfiguration'],
    ignoredWhen: (c) => (c.tls.source !== 'secret'
      ? 'without --tls-secret: it names the MutatingWebhookConfiguration that gets the CA kept in that Secret; pass --tls-secret too, or drop it'
      : undefined),
  },
  {
    // The directory holds the self-managed certificate, and in local mode the proof key unless --proof-key-file.
    keys: ['tlsDir'],
    ignoredWhen: (c, a) => (c.tls.source !== 'self-managed' && !(c.mode === 'local' && !a.given('proofKeyFile'))
      ? `with the serving certificate from ${c.tls.source === 'files' ? '--tls-cert-file' : '--tls-secret'} and the proof key from ${c.proofKey.source === 'file' ? '--proof-key-file' : 'a Secret'}: nothing is kept there; drop it`
      : undefined),
  },
  {
    keys: ['proofKeySecret'],
    ignoredWhen: (c) => (c.proofKey.source === 'file' ? 'with --proof-key-file: the key comes from that file; pass one of them' : undefined),
  },
  {
    keys: ['sidecarTemplatesFile'],
    ignoredWhen: (c) => (c.sidecars.source !== 'file'
      ? `with --sidecars ${c.sidecars.source}: templates come ${c.sidecars.source === 'none' ? 'from nowhere' : 'from ConfigMaps'}; pass --sidecars file, or drop it`
      : undefined),
  },
  {
    keys: ['shedMaxSendEvery'],
    ignoredWhen: (c) => (c.agentSending.maxBatchSamples === 0
      ? 'with --agent-batch-samples 0: agents send every sample at once and cannot be slowed (queries are still refused when overloaded); drop it, or let agents batch'
      : undefined),
  },
  {
    keys: ['shardService'],
    ignoredWhen: (c) => (c.mode === 'cluster' && !c.cluster.shard ? 'without --shard-copies above 0: agents stream to every replica, which then holds the data of every node itself; pass --shard-copies, or drop it' : undefined),
  },
  {
    keys: ['metricsApiPort'],
    ignoredWhen: (c) => (c.mode !== 'cluster' || !c.metricsApi ? 'without --metrics-api on: the metrics API is not served; pass --metrics-api on, or drop it' : undefined),
  },
  {
    keys: ['sidecarNamespace'],
    ignoredWhen: (c) => (c.sidecars.source === 'none' ? 'with --sidecars none: no templates are read and no pod is injected; drop it' : undefined),
  },
];

/** One line per flag the operator set that this config ignores: "--x is ignored with ...". */
export function ignoredFlags(config: GatewayConfig, args: Args): string[] {
  const reported = new Set<string>();
  const out: string[] = [];
  for (const rule of RULES) {
    const why = rule.ignoredWhen(config, args);
    if (why === undefined) continue;
    for (const key of rule.keys) {
      if (!args.given(key) || reported.has(key)) continue;
      reported.add(key);
      out.push(`${args.named(key)} is ignored ${why}`);
    }
  }
  return out;
}
