// loadConfig (gateway/config/config.ts) as a table: argv and an environment in,
// a typed config or a refusal out, nothing started (issue 20, item 4).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CommanderError } from 'commander';
import { loadAllYaml, type V1DaemonSet, type V1Deployment, type V1EnvVar } from '@kubernetes/client-node';
import { AgentConfigError, loadAgentConfig } from '../agent/config.js';
import { ConfigError, loadConfig } from '../gateway/config/config.js';
import type { GatewayConfig } from '../gateway/config/types.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';

const silent = { writeOut: () => {}, writeErr: () => {}, outputError: () => {} };
const load = (argv: string[], env: Record<string, string> = {}) => loadConfig(argv, env, silent);
/** What a pod sees: the API server, and the downward API of deploy/base/gateway.yaml. */
const POD = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443', POD_NAMESPACE: 'oversell', POD_NAME: 'oversell-gateway-0' };
const KUBECONFIG = ['--kubeconfig', '/home/me/.kube/config'];

/** A partial match: every key given must equal (deeply) the config's. */
function like(actual: unknown, expected: unknown, path = 'config'): void {
  if (expected !== null && typeof expected === 'object' && !Array.isArray(expected)) {
    assert.ok(actual !== null && typeof actual === 'object', `${path}: expected an object, got ${JSON.stringify(actual)}`);
    for (const [k, v] of Object.entries(expected)) like((actual as Record<string, unknown>)[k], v, `${path}.${k}`);
    return;
  }
  assert.deepEqual(actual, expected, path);
}

interface Accepted { name: string; argv?: string[]; env?: Record<string, string>; expect: Partial<Record<keyof GatewayConfig, unknown>> & Record<string, unknown> }

const ACCEPTED: Accepted[] = [
  {
    name: 'local mode: no kubeconfig, not in a pod',
    expect: {
      mode: 'local', bindAddress: '127.0.0.1', webhookPort: 8443, grpcPort: 50051, metricsPort: 9090, agentPort: 50052, grpcTls: false,
      policies: { source: 'flags', policy: DEFAULT_POLICY },
      tls: { source: 'self-managed', dir: '.oversell/tls' },
      proofKey: { source: 'file', file: '.oversell/tls/proof.key' },
      auth: { mode: 'none' }, sidecars: { source: 'none' }, warnings: [], warmupMs: 0, shutdownDrainMs: 0, logLevel: 'info',
    },
  },
  {
    name: 'in a pod: crd policies, kubernetes auth, TLS on every port, the proof key and templates from the cluster',
    env: POD,
    expect: {
      mode: 'cluster', kube: { kind: 'in-cluster' }, bindAddress: '0.0.0.0', grpcTls: true,
      policies: { source: 'crd' },
      auth: { mode: 'kubernetes', audience: 'oversell-gateway', serviceAccounts: ['oversell/oversell-agent'], tokenReviewsPerSecond: 100, tokenReviewsInFlight: 20 },
      proofKey: { source: 'secret', namespace: 'oversell', name: 'oversell-gateway-proof-key' },
      sidecars: { source: 'configmap', namespace: 'oversell', excludedNamespaces: ['oversell', 'oversell'] },
      cluster: { leaseNamespace: 'oversell', identity: 'oversell-gateway-0', statusWritesPerSecond: 10, historySnapshotEveryMs: 300_000, optInSelector: 'oversell.io/enabled=true', watchBoundPods: true },
      caConfigMap: 'oversell-gateway-ca', warnings: [], shutdownDrainMs: 5000,
    },
  },
  { name: '--shutdown-drain given', argv: ['--shutdown-drain', '12s'], env: POD, expect: { shutdownDrainMs: 12_000 } },
  { name: '--shard-copies: the members from the agents\' Service by default', argv: ['--shard-copies', '2'], env: POD, expect: { cluster: { shard: { copies: 2, service: { namespace: 'oversell', name: 'oversell-gateway-agents' } } } } },
  { name: '--shard-copies with --shard-service', argv: ['--shard-copies', '3', '--shard-service', 'gw/agents'], env: POD, expect: { cluster: { shard: { copies: 3, service: { namespace: 'gw', name: 'agents' } } } } },
  {
    name: 'a kubeconfig file (KUBECONFIG) is cluster mode too',
    env: { KUBECONFIG: '/home/me/.kube/config' },
    expect: { mode: 'cluster', kube: { kind: 'kubeconfig', file: '/home/me/.kube/config' }, policies: { source: 'crd' }, auth: { mode: 'kubernetes' } },
  },
  {
    name: 'policies from flags in a cluster, every policy flag read',
    argv: ['--policies', 'flags', '--max-ratio-cpu', '3', '--max-ratio-memory', '1.5', '--target-cpu', '0.7', '--target-memory', '0.9',
      '--stale-after', '6s', '--window', '10s', '--calm-period', '30s', '--hysteresis', '0.1'],
    env: POD,
    expect: {
      mode: 'cluster',
      policies: {
        source: 'flags',
        policy: { ...DEFAULT_POLICY, cpu: { ...DEFAULT_POLICY.cpu, maxRatio: 3, targetUtilization: 0.7 }, memory: { ...DEFAULT_POLICY.memory, maxRatio: 1.5, targetUtilization: 0.9 }, staleAfterMs: 6000, windowMs: 10_000, calmPeriodMs: 30_000, hysteresis: 0.1 },
      },
    },
  },
  {
    name: 'policy flags from the environment, in local mode',
    env: { OVERSELL_MAX_RATIO_CPU: '1.5', OVERSELL_WINDOW: '2m' },
    expect: { mode: 'local', policies: { source: 'flags', policy: { cpu: { maxRatio: 1.5 }, windowMs: 120_000 } } },
  },
  {
    name: 'TLS from files (cert-manager), in a pod',
    env: { ...POD, OVERSELL_TLS_CERT_FILE: '/etc/oversell/tls/tls.crt', OVERSELL_TLS_KEY_FILE: '/etc/oversell/tls/tls.key' },
    expect: { tls: { source: 'files', certFile: '/etc/oversell/tls/tls.crt', keyFile: '/etc/oversell/tls/tls.key' } },
  },
  {
    name: 'TLS from files in local mode: the proof key still lives in --tls-dir',
    argv: ['--tls-cert-file', 'c.pem', '--tls-key-file', 'k.pem', '--tls-dir', '/tmp/t'],
    expect: { mode: 'local', tls: { source: 'files' }, proofKey: { source: 'file', file: '/tmp/t/proof.key' } },
  },
  {
    name: 'TLS kept in a Secret, CA injected into the named webhook configuration',
    argv: ['--tls-secret', 'oversell/oversell-gateway-tls', '--tls-hosts', 'a.svc, 10.0.0.1'],
    env: POD,
    expect: { tls: { source: 'secret', namespace: 'oversell', name: 'oversell-gateway-tls', hosts: ['a.svc', '10.0.0.1'], webhookConfiguration: 'oversell' } },
  },
  {
    name: 'TLS in a Secret, CA injected nowhere (--webhook-configuration "")',
    argv: ['--tls-secret', 'ns/s', '--webhook-configuration', ''],
    env: POD,
    expect: { tls: { source: 'secret', webhookConfiguration: '' } },
  },
  {
    name: 'self-managed TLS with its own hosts and directory',
    argv: ['--tls-dir', '/var/tls', '--tls-hosts', 'x,y'],
    expect: { tls: { source: 'self-managed', dir: '/var/tls', hosts: ['x', 'y'] }, proofKey: { file: '/var/tls/proof.key' } },
  },
  {
    name: 'local-mode transport next to a kubeconfig: honoured, with the warning',
    argv: [...KUBECONFIG, '--auth', 'none', '--grpc-tls', 'off'],
    expect: { mode: 'cluster', auth: { mode: 'none' }, grpcTls: false, warnings: ['a kubeconfig is in use but agents and query callers are not authenticated (--auth none) and gRPC is plaintext (--grpc-tls off): use this only on a private test cluster'] },
  },
  {
    name: 'gRPC TLS in local mode, on every interface',
    argv: ['--grpc-tls', 'on', '--bind-address', '0.0.0.0'],
    expect: { mode: 'local', grpcTls: true, bindAddress: '0.0.0.0', auth: { mode: 'none' } },
  },
  {
    name: 'agent auth settings',
    argv: ['--agent-audience', 'aud', '--agent-service-accounts', 'a/b, c/d', '--token-reviews-per-second', '50', '--token-reviews-in-flight', '5'],
    env: POD,
    expect: { auth: { mode: 'kubernetes', audience: 'aud', serviceAccounts: ['a/b', 'c/d'], tokenReviewsPerSecond: 50, tokenReviewsInFlight: 5 } },
  },
  {
    name: 'the proof key from a file in a cluster',
    argv: ['--proof-key-file', '/keys/proof.key'],
    env: POD,
    expect: { proofKey: { source: 'file', file: '/keys/proof.key' } },
  },
  {
    name: 'the proof key from another Secret',
    argv: ['--proof-key-secret', 'keys/proof'],
    env: POD,
    expect: { proofKey: { source: 'secret', namespace: 'keys', name: 'proof' } },
  },
  {
    name: 'sidecar templates from a file in local mode, never into the lease namespace',
    argv: ['--sidecar-templates-file', 't.yaml', '--lease-namespace', 'mine'],
    expect: { mode: 'local', sidecars: { source: 'file', file: 't.yaml', excludedNamespaces: ['mine', 'mine'] } },
  },
  {
    name: 'sidecar ConfigMaps in their own namespace',
    argv: ['--sidecar-namespace', 'templates'],
    env: POD,
    expect: { sidecars: { source: 'configmap', namespace: 'templates', excludedNamespaces: ['templates', 'oversell'] } },
  },
  {
    name: 'cluster switches: no CA ConfigMap, no bound-pod watch, a selector, a rate',
    argv: ['--ca-configmap', '', '--watch-bound-pods', 'off', '--opt-in-selector', 'pool in (a,b)', '--status-writes-per-second', '2'],
    env: POD,
    expect: { caConfigMap: undefined, cluster: { watchBoundPods: false, optInSelector: 'pool in (a,b)', statusWritesPerSecond: 2 } },
  },
  { name: 'load history snapshots every minute', argv: ['--history-snapshot-every', '1m'], env: POD, expect: { cluster: { historySnapshotEveryMs: 60_000 } } },
  { name: 'load history snapshots off', env: { ...POD, OVERSELL_HISTORY_SNAPSHOT_EVERY: '0' }, expect: { cluster: { historySnapshotEveryMs: 0 } } },
  {
    name: 'ports, the agent thread, the client CA, warmup and log level',
    argv: ['--webhook-port', '0', '--grpc-port', '1', '--agent-port', '2', '--metrics-port', '3', '--webhook-client-ca-file', 'ca.pem', '--warmup', '15s', '--log-level', 'warn'],
    expect: { webhookPort: 0, grpcPort: 1, agentPort: 2, metricsPort: 3, webhookClientCaFile: 'ca.pem', warmupMs: 15_000, logLevel: 'warn' },
  },
  {
    name: 'load shedding: 50ms of loop delay, agents slowed to at most 20s (half the default staleAfter)',
    expect: { shedding: { loopDelayMs: 50, maxSendEveryMs: 20_000 } },
  },
  {
    name: 'load shedding under a short --stale-after: the default max is half of it, never under --agent-send-every',
    argv: ['--stale-after', '30s'],
    expect: { shedding: { loopDelayMs: 50, maxSendEveryMs: 15_000 } },
  },
  {
    name: 'load shedding where --stale-after leaves no room: agents are never slowed',
    argv: ['--stale-after', '6s', '--agent-summaries', 'off'],
    expect: { agentSending: { sendEveryMs: 5000, summaries: false }, shedding: { loopDelayMs: 50, maxSendEveryMs: 5000 } },
  },
  {
    name: 'summaries by default, every 20 s: one lost message of margin under the default --stale-after (40 s)',
    argv: [],
    expect: { agentSending: { maxBatchSamples: 10, sendEveryMs: 20_000, summaries: true }, shedding: { maxSendEveryMs: 20_000 } },
  },
  {
    name: 'summaries under a short --stale-after: sent every half of it',
    argv: ['--stale-after', '6s'],
    expect: { agentSending: { sendEveryMs: 3000, summaries: true }, shedding: { maxSendEveryMs: 3000 } },
  },
  {
    name: 'batches: every 5 s unless told',
    argv: ['--agent-summaries', 'off'],
    expect: { agentSending: { sendEveryMs: 5000, summaries: false }, shedding: { maxSendEveryMs: 20_000 } },
  },
  {
    name: '--agent-send-every as given, with summaries',
    argv: ['--agent-send-every', '10s'],
    expect: { agentSending: { sendEveryMs: 10_000, summaries: true } },
  },
  {
    name: 'load shedding flags, and off',
    argv: ['--shed-loop-delay', '0', '--shed-max-send-every', '30s'],
    expect: { shedding: { loopDelayMs: 0, maxSendEveryMs: 30_000 } },
  },
  {
    name: 'a flag wins over its environment variable',
    argv: ['--grpc-port', '7000'],
    env: { OVERSELL_GRPC_PORT: '6000', OVERSELL_WEBHOOK_PORT: '6443' },
    expect: { grpcPort: 7000, webhookPort: 6443 },
  },
];

interface Refused { name: string; argv?: string[]; env?: Record<string, string>; error: RegExp }

const REFUSED: Refused[] = [
  // Flags the chosen mode would ignore.
  { name: 'a policy flag under crd policies (the default in a pod)', argv: ['--max-ratio-cpu', '3'], env: POD, error: /^--max-ratio-cpu is ignored with --policies crd \(the default with a cluster\): policies come from OversellPolicy objects; set it in an OversellPolicy \(docs\/policy\.md\), or pass --policies flags/ },
  { name: 'a policy flag from its variable under --policies crd', argv: ['--policies', 'crd', ...KUBECONFIG], env: { OVERSELL_STALE_AFTER: '6s' }, error: /^--stale-after \(from OVERSELL_STALE_AFTER\) is ignored with --policies crd/ },
  ...['--max-ratio-memory', '--target-cpu', '--target-memory', '--window', '--calm-period', '--hysteresis'].map((flag) => ({
    name: `${flag} under crd policies`, argv: [...KUBECONFIG, flag, flag === '--window' || flag === '--calm-period' ? '30s' : flag === '--max-ratio-memory' ? '1.5' : '0.5'], error: new RegExp(`^${flag} is ignored with --policies crd`),
  })),
  { name: 'several at once are listed together', argv: ['--target-cpu', '0.5', '--window', '30s'], env: POD, error: /^2 flags would be ignored:\n- --target-cpu is ignored .*\n- --window is ignored/ },
  { name: 'load history snapshots more often than every 10s', argv: ['--history-snapshot-every', '2s'], env: POD, error: /^--history-snapshot-every 2000ms: each snapshot rewrites every node's history .* use 10s or more/ },
  ...[['--identity', 'me'], ['--status-writes-per-second', '5'], ['--history-snapshot-every', '1m'], ['--watch-bound-pods', 'off'], ['--opt-in-selector', 'a=b'], ['--ca-configmap', 'ca'], ['--proof-key-secret', 'a/b']].map(([flag, value]) => ({
    name: `${flag} without a cluster`, argv: [String(flag), String(value)], error: new RegExp(`^${flag} is ignored without a cluster \\(local mode: no --kubeconfig, not in a pod\\): pass --kubeconfig, or drop it`),
  })),
  { name: '--shard-copies without a cluster', argv: ['--shard-copies', '2'], error: /^--shard-copies is ignored without a cluster/ },
  { name: '--shard-service without --shard-copies', argv: ['--shard-service', 'a/b'], env: POD, error: /^--shard-service is ignored without --shard-copies above 0/ },
  { name: '--shard-copies with the webhook client CA', argv: ['--shard-copies', '2', '--webhook-client-ca-file', '/ca.pem'], env: POD, error: /^--shard-copies cannot be used with --webhook-client-ca-file/ },
  { name: '--lease-namespace without a cluster or sidecars', argv: ['--lease-namespace', 'x'], error: /^--lease-namespace is ignored without a cluster/ },
  { name: 'POD_NAME outside a pod', env: { POD_NAME: 'p' }, error: /^--identity \(from POD_NAME\) is ignored without a cluster/ },
  ...[['--agent-audience', 'a'], ['--agent-service-accounts', 'a/b'], ['--token-reviews-per-second', '5'], ['--token-reviews-in-flight', '5']].map(([flag, value]) => ({
    name: `${flag} with --auth none in a cluster`, argv: [...KUBECONFIG, '--auth', 'none', String(flag), String(value)], error: new RegExp(`^${flag} is ignored with --auth none: nobody is authenticated; pass --auth kubernetes, or drop it`),
  })),
  { name: 'agent auth settings in local mode', argv: ['--agent-audience', 'a'], error: /^--agent-audience is ignored with --auth none \(the default in local mode\)/ },
  { name: '--tls-secret next to certificate files', argv: ['--tls-cert-file', 'c', '--tls-key-file', 'k', '--tls-secret', 'a/b'], env: POD, error: /^--tls-secret is ignored with --tls-cert-file and --tls-key-file: the serving certificate comes from those files/ },
  { name: '--tls-hosts next to certificate files', argv: ['--tls-cert-file', 'c', '--tls-key-file', 'k', '--tls-hosts', 'x'], error: /^--tls-hosts is ignored with --tls-cert-file and --tls-key-file/ },
  { name: '--webhook-configuration without --tls-secret', env: { ...POD, OVERSELL_WEBHOOK_CONFIGURATION: 'oversell' }, error: /^--webhook-configuration \(from OVERSELL_WEBHOOK_CONFIGURATION\) is ignored without --tls-secret: .*pass --tls-secret too, or drop it/ },
  { name: '--tls-dir with the certificate from files in a cluster', argv: ['--tls-cert-file', 'c', '--tls-key-file', 'k', '--tls-dir', '/t'], env: POD, error: /^--tls-dir is ignored with the serving certificate from --tls-cert-file and the proof key from a Secret: nothing is kept there/ },
  { name: '--tls-dir with the certificate from a Secret', argv: ['--tls-secret', 'a/b', '--tls-dir', '/t'], env: POD, error: /^--tls-dir is ignored with the serving certificate from --tls-secret/ },
  { name: '--tls-dir with files and a proof key file in local mode', argv: ['--tls-cert-file', 'c', '--tls-key-file', 'k', '--proof-key-file', 'p', '--tls-dir', '/t'], error: /^--tls-dir is ignored with the serving certificate from --tls-cert-file and the proof key from --proof-key-file/ },
  { name: '--proof-key-secret next to --proof-key-file', argv: ['--proof-key-file', 'p', '--proof-key-secret', 'a/b'], env: POD, error: /^--proof-key-secret is ignored with --proof-key-file: the key comes from that file; pass one of them/ },
  { name: '--sidecar-templates-file with --sidecars none', argv: ['--sidecars', 'none', '--sidecar-templates-file', 't.yaml'], error: /^--sidecar-templates-file is ignored with --sidecars none: templates come from nowhere/ },
  { name: '--sidecar-templates-file with --sidecars configmap', argv: ['--sidecars', 'configmap', '--sidecar-templates-file', 't.yaml'], env: POD, error: /^--sidecar-templates-file is ignored with --sidecars configmap: templates come from ConfigMaps; pass --sidecars file, or drop it/ },
  { name: '--sidecar-namespace with --sidecars none', argv: ['--sidecars', 'none', '--sidecar-namespace', 'n'], env: POD, error: /^--sidecar-namespace is ignored with --sidecars none/ },
  { name: '--shed-max-send-every without batches', argv: ['--agent-summaries', 'off', '--agent-batch-samples', '0', '--shed-max-send-every', '10s'], error: /^--shed-max-send-every is ignored with --agent-batch-samples 0: agents send every sample at once and cannot be slowed/ },
  // Combinations that cannot work.
  { name: '--shed-max-send-every at or past --stale-after', argv: ['--shed-max-send-every', '40s'], error: /^--shed-max-send-every 40s is not under --stale-after 40s: a steady node's data would go stale while agents are slowed/ },
  { name: '--shed-max-send-every under --agent-send-every', argv: ['--shed-max-send-every', '2s'], error: /^--shed-max-send-every 2s is below --agent-send-every 20s: shedding only makes agents send less often/ },
  { name: 'crd policies without a cluster', argv: ['--policies', 'crd'], error: /^--policies crd needs a cluster: run in a pod or pass --kubeconfig \(or --policies flags\)$/ },
  { name: 'kubernetes auth without a cluster', argv: ['--auth', 'kubernetes'], error: /^--auth kubernetes needs a cluster/ },
  { name: 'a TLS Secret without a cluster', argv: ['--tls-secret', 'a/b'], error: /^--tls-secret needs a cluster/ },
  { name: 'ConfigMap sidecars without a cluster', argv: ['--sidecars', 'configmap'], error: /^--sidecars must be "configmap" \(needs a cluster\)/ },
  { name: 'file sidecars without a file', argv: ['--sidecars', 'file'], error: /needs --sidecar-templates-file/ },
  { name: 'a certificate without its key', argv: ['--tls-cert-file', 'c'], error: /^--tls-cert-file and --tls-key-file go together/ },
  // Values.
  { name: 'an unknown policy source', argv: ['--policies', 'crds'], error: /^--policies must be "crd" or "flags", got "crds"/ },
  { name: 'an unknown auth mode', argv: ['--auth', 'token'], error: /^--auth must be "kubernetes" or "none"/ },
  { name: 'a target over 1', argv: ['--target-cpu', '1.5'], error: /^--target-cpu must be in \(0, 1\], got 1.5/ },
  { name: 'a memory budget over its bound', argv: ['--budget-memory-over-share', '0.05'], error: /^--budget-memory-over-share must be in \[0, 0.01\], got 0.05/ },
  { name: 'a memory budget that may be exceeded with too little margin, as the CRD refuses it', argv: ['--budget-memory-over-share', '0.005', '--budget-memory-margin', '0.01'], error: /needs a margin of at least 0.05/ },
  { name: 'a drain the pod\'s grace period cannot hold', argv: ['--shutdown-drain', '21s'], env: POD, error: /^--shutdown-drain 21s: the kubelet kills the pod 30 s after SIGTERM by default, and closing may take 10 s after the drain; use 20s or less$/ },
  { name: 'a bad opt-in selector, whatever the mode', argv: ['--opt-in-selector', 'a in b'], env: POD, error: /^"a in b": cannot parse "a in b"; use forms like/ },
  { name: 'summaries sent no more often than --stale-after', argv: ['--agent-send-every', '40s'], error: /^--agent-send-every 40s is not under --stale-after 40s: with summaries/ },
  { name: '--agent-summaries neither on nor off', argv: ['--agent-summaries', 'yes'], error: /^--agent-summaries must be on or off, got "yes"/ },
  { name: '--grpc-tls neither on nor off', argv: ['--grpc-tls', 'yes'], error: /^--grpc-tls must be on or off, got "yes"/ },
  { name: 'a Secret that is not namespace/name', argv: ['--tls-secret', 'just-a-name'], env: POD, error: /^--tls-secret must be namespace\/name, got "just-a-name"/ },
];

describe('loadConfig: one row per mode', () => {
  for (const row of ACCEPTED) {
    it(row.name, () => like(load(row.argv ?? [], row.env), row.expect));
  }
});

describe('loadConfig: refused values and combinations say what to change', () => {
  for (const row of REFUSED) {
    it(row.name, () => {
      assert.throws(() => load(row.argv ?? [], row.env), (err: unknown) => {
        assert.ok(err instanceof ConfigError, `a ConfigError, got ${String(err)}`);
        assert.match(err.message, row.error);
        return true;
      });
    });
  }

  it('the refusal carries the asked log level, so main.ts says it at that level', () => {
    assert.throws(() => load(['--log-level', 'silent', '--policies', 'crd']), (err: unknown) => err instanceof ConfigError && err.logLevel === 'silent');
  });

  it('a value commander refuses (here from the environment) is a CommanderError that names the variable', () => {
    let said = '';
    assert.throws(() => loadConfig([], { OVERSELL_STALE_AFTER: 'soon' }, { ...silent, outputError: (s) => (said += s) }), (err: unknown) => err instanceof CommanderError && err.exitCode === 1);
    assert.match(said, /from env 'OVERSELL_STALE_AFTER' is invalid.*not a duration/);
  });

  it('a cap above the OversellPolicy CRD\'s (maxRatio at most 10) is refused as the CRD refuses it, for the caps and the learning caps', () => {
    for (const [flag, value] of [['--max-ratio-cpu', '50'], ['--max-ratio-memory', '10.5'], ['--history-learning-max-ratio-cpu', '11'], ['--history-learning-max-ratio-memory', '100']] as const) {
      let said = '';
      assert.throws(() => loadConfig(['--policies', 'flags', flag, value], {}, { ...silent, outputError: (s) => (said += s) }), (err: unknown) => err instanceof CommanderError && err.exitCode === 1, flag);
      assert.match(said, new RegExp(`${flag}.*"${value.replace('.', '\\.')}" is above 10`));
    }
    const policies = loadConfig(['--policies', 'flags', '--max-ratio-cpu', '10'], {}, silent).policies;
    assert.equal(policies.source === 'flags' && policies.policy.cpu.maxRatio, 10, '10 itself is the CRD\'s maximum');
  });

  it('--help is a CommanderError with exit code 0, the help written to output', () => {
    let out = '';
    assert.throws(() => loadConfig(['--help'], {}, { ...silent, writeOut: (s) => (out += s) }), (err: unknown) => err instanceof CommanderError && err.exitCode === 0);
    assert.match(out, /Usage: oversell-gateway/);
    assert.match(out, /--tls-secret <namespace\/name>[\s\S]*?env:\s+OVERSELL_TLS_SECRET/);
  });

  it('reads the environment it is given, never process.env', () => {
    const before = process.env.OVERSELL_GRPC_PORT;
    process.env.OVERSELL_GRPC_PORT = '1234';
    try {
      assert.equal(load([]).grpcPort, 50051);
      assert.equal(load([], { OVERSELL_GRPC_PORT: '4321' }).grpcPort, 4321);
    } finally {
      if (before === undefined) delete process.env.OVERSELL_GRPC_PORT;
      else process.env.OVERSELL_GRPC_PORT = before;
    }
  });
});

// What the shipped manifests and scripts pass must still be accepted.
const repo = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));

/** The gateway container's literal env in a kustomize file (valueFrom entries are the downward API: POD above). */
function gatewayEnv(path: string): Record<string, string> {
  const deployment = loadAllYaml(readFileSync(repo(path), 'utf8')).find((o: { kind?: string; metadata?: { name?: string } }) => o.kind === 'Deployment' && o.metadata?.name === 'oversell-gateway') as V1Deployment | undefined;
  const container = deployment?.spec?.template.spec?.containers.find((c) => c.name === 'gateway');
  assert.ok(container, `${path} has the gateway container`);
  return Object.fromEntries((container.env ?? []).filter((e: V1EnvVar) => e.value !== undefined).map((e: V1EnvVar) => [e.name, String(e.value)]));
}

describe('loadConfig accepts what the repository ships', () => {
  const base = gatewayEnv('deploy/base/gateway.yaml');
  for (const overlay of ['self-managed', 'cert-manager']) {
    it(`deploy/overlays/${overlay} (kustomize): base env plus the overlay's`, () => {
      const env = { ...POD, ...base, ...gatewayEnv(`deploy/overlays/${overlay}/gateway-tls.yaml`) };
      assert.ok(Object.keys(env).length > Object.keys(POD).length + 3, 'read the manifests\' env');
      const c = load([], env);
      like(c, { mode: 'cluster', policies: { source: 'crd' }, auth: { mode: 'kubernetes' }, grpcTls: true, agentPort: 50052, warmupMs: 15_000 });
      assert.equal(c.tls.source, overlay === 'self-managed' ? 'secret' : 'files');
    });
  }

  // deploy/helm/oversell/templates/gateway.yaml, both certificate modes, sidecars off (rendering needs helm: test/deploy).
  const helm = {
    ...POD, OVERSELL_LOG_LEVEL: 'info', OVERSELL_WARMUP: '15s', OVERSELL_GRPC_TLS: 'on', OVERSELL_AUTH: 'kubernetes', OVERSELL_AGENT_PORT: '50052',
    OVERSELL_OPT_IN_SELECTOR: 'oversell.io/enabled=true', OVERSELL_SIDECARS: 'none',
  };
  it('the Helm chart, self-managed certificates', () => {
    like(load([], { ...helm, OVERSELL_TLS_SECRET: 'oversell/oversell-gateway-tls', OVERSELL_WEBHOOK_CONFIGURATION: 'oversell', OVERSELL_TLS_HOSTS: 'localhost,127.0.0.1,oversell-gateway,oversell-gateway.oversell,oversell-gateway.oversell.svc,oversell-gateway.oversell.svc.cluster.local' }),
      { tls: { source: 'secret' }, sidecars: { source: 'none' } });
  });
  it('the Helm chart, cert-manager', () => {
    like(load([], { ...helm, OVERSELL_TLS_CERT_FILE: '/etc/oversell/tls/tls.crt', OVERSELL_TLS_KEY_FILE: '/etc/oversell/tls/tls.key' }), { tls: { source: 'files' } });
  });

  const local = ['--bind-address', '127.0.0.1', '--webhook-port', '1', '--grpc-port', '2', '--metrics-port', '3', '--tls-dir', '/tmp/t'];
  const unauthenticated = ['--auth', 'none', '--grpc-tls', 'off']; // test/e2e/fixtures.ts UNAUTHENTICATED_AGENTS
  const rows: Array<[string, string[]]> = [
    ['scripts/local.ts (npm start)', [...local, '--policies', 'flags', '--log-level', 'warn']],
    ['docker-compose.yml', ['--tls-dir', '/tls']],
    ['bench/processes.ts', [...local, '--agent-port', '4', '--policies', 'flags', '--log-level', 'warn', '--calm-period', '0s']],
    ['e2e fixtures, flags policy', [...local, '--stale-after', '6s', '--window', '10s', '--policies', 'flags']],
    ['e2e policy and apiserver-restart: crd policies', [...local, '--policies', 'crd', ...KUBECONFIG, '--lease-namespace', 'default', '--identity', 'x', ...unauthenticated]],
    ['e2e trust', [...local, '--stale-after', '6s', '--window', '10s', '--policies', 'flags', ...KUBECONFIG, '--lease-namespace', 'ns', '--identity', 'trust-e2e', '--stale-after', '6s', '--startup-grace', '0s', ...unauthenticated]],
    ['e2e sidecar', [...local, '--stale-after', '6s', '--window', '10s', '--policies', 'flags', ...KUBECONFIG, '--sidecars', 'configmap', '--sidecar-namespace', 't', '--lease-namespace', 't', ...unauthenticated]],
    ['e2e auth', [...local, '--stale-after', '6s', '--window', '10s', '--policies', 'flags', ...KUBECONFIG, '--lease-namespace', 'ns', '--grpc-tls', 'on', '--auth', 'kubernetes', '--agent-service-accounts', 'ns/oversell-agent', '--sidecars', 'none']],
    ['e2e decision-path: policy flags with a kubeconfig', [...local, '--stale-after', '6s', '--window', '10s', '--policies', 'flags', ...KUBECONFIG, '--lease-namespace', 'ns', '--identity', 'path-e2e', '--max-ratio-cpu', '2', '--max-ratio-memory', '1.5', '--hysteresis', '0.1', ...unauthenticated]],
    ['e2e install replicas (TLS in a Secret)', ['--bind-address', '127.0.0.1', '--webhook-port', '1', '--grpc-port', '2', '--metrics-port', '3', ...KUBECONFIG, '--policies', 'flags', '--lease-namespace', 'ns', '--identity', 'a', '--tls-secret', 'ns/tls', '--webhook-configuration', 'w', ...unauthenticated]],
  ];
  for (const [name, argv] of rows) it(name, () => assert.ok(load(argv)));
});

describe('loadAgentConfig', () => {
  /** The agent container's literal env in deploy/base/agent.yaml (NODE_NAME comes from the downward API). */
  function agentEnv(): Record<string, string> {
    const ds = loadAllYaml(readFileSync(repo('deploy/base/agent.yaml'), 'utf8')).find((o: { kind?: string }) => o.kind === 'DaemonSet') as V1DaemonSet | undefined;
    const container = ds?.spec?.template.spec?.containers[0];
    assert.ok(container, 'deploy/base/agent.yaml has the agent container');
    return Object.fromEntries((container.env ?? []).filter((e: V1EnvVar) => e.value !== undefined).map((e: V1EnvVar) => [e.name, String(e.value)]));
  }
  const loadAgent = (argv: string[], env: Record<string, string> = {}) => loadAgentConfig(argv, env, silent);

  it('local: the loopback gateway, bound pods unknown, metrics on every interface', () => {
    like(loadAgent([]), { kube: undefined, gateways: { kind: 'addresses', addresses: ['127.0.0.1:50052'] }, pods: { source: 'none' }, metrics: { host: '', port: 9091 }, connection: {}, intervalMs: 1000, podReportEvery: 10 });
  });

  it('the DaemonSet of deploy/base: discovery (its --gateway is set too and not refused), the pod watch, TLS and a token', () => {
    const env: Record<string, string> = { ...POD, NODE_NAME: 'node-1', ...agentEnv() };
    assert.equal(env.OVERSELL_GATEWAY, 'oversell-gateway-agents.oversell.svc:50052', 'the manifest sets --gateway next to discovery, on the agent port');
    like(loadAgent([], env), {
      nodeName: 'node-1', kube: { kind: 'in-cluster' }, procRoot: '/host/proc', cgroupRoot: '/host/sys/fs/cgroup',
      gateways: { kind: 'discovery', namespace: 'oversell', service: 'oversell-gateway-agents' }, pods: { source: 'watch' },
      connection: { caFile: '/var/run/oversell/ca/ca.crt', serverName: 'oversell-gateway.oversell.svc', tokenFile: '/var/run/oversell/token/token' },
    });
  });

  it('the kubelet root, whose CPU manager checkpoint is read: /var/lib/kubelet by default, set by flag or env, empty to read none', () => {
    assert.equal(loadAgent([]).kubeletRootDir, '/var/lib/kubelet');
    assert.equal(loadAgent(['--kubelet-root-dir', '/host/kubelet']).kubeletRootDir, '/host/kubelet');
    assert.equal(loadAgent([], { OVERSELL_KUBELET_ROOT_DIR: '/k' }).kubeletRootDir, '/k');
    assert.equal(loadAgent(['--kubelet-root-dir', '']).kubeletRootDir, undefined);
  });

  it('a pods file wins over the watch; several gateways; metrics off', () => {
    like(loadAgent(['--pods-file', 'p.yaml', '--gateway', 'a:1, b:2', '--metrics-address', '', '--interval', '500ms', ...KUBECONFIG]), {
      kube: { kind: 'kubeconfig' }, pods: { source: 'file', file: 'p.yaml' }, gateways: { addresses: ['a:1', 'b:2'] }, metrics: undefined, intervalMs: 500,
    });
  });

  it('a metrics address is host:port, [ipv6]:port or :port (every interface, both families)', () => {
    like(loadAgent(['--metrics-address', '127.0.0.1:9091']), { metrics: { host: '127.0.0.1', port: 9091 } });
    like(loadAgent(['--metrics-address', '[::1]:0']), { metrics: { host: '::1', port: 0 } });
    like(loadAgent(['--metrics-address', '[fe80::1%eth0]:9091']), { metrics: { host: 'fe80::1%eth0', port: 9091 } });
    like(loadAgent(['--metrics-address', ':9092']), { metrics: { host: '', port: 9092 } });
    for (const bad of ['9091', '::1:9091', 'host:', 'host:99999', 'host:port', '[::1]']) {
      assert.throws(() => loadAgent(['--metrics-address', bad]), (err: unknown) => err instanceof AgentConfigError && /--metrics-address must be host:port, \[ipv6\]:port or :port/.test(err.message), bad);
    }
  });

  for (const [name, argv, error] of [
    ['a server name with no CA (plain gRPC checks no certificate)', ['--gateway-server-name', 'gw'], /^--gateway-server-name is ignored without --gateway-ca-file: .*pass --gateway-ca-file too, or drop it/],
    ['discovery without a cluster', ['--gateway-discovery', 'oversell/gw'], /^--gateway-discovery needs namespace\/service and a cluster/],
    ['discovery that is not namespace/service', ['--gateway-discovery', 'gw', ...KUBECONFIG], /got "gw"/],
  ] as const) {
    it(`refuses ${name}`, () => assert.throws(() => loadAgent([...argv]), (err: unknown) => err instanceof AgentConfigError && error.test(err.message)));
  }
});

describe('--ingest-threads, removed', () => {
  it('is accepted, so a rollout that still sets it starts, and warns that it does nothing', () => {
    const config = loadConfig(['--ingest-threads', '4'], {});
    assert.deepEqual(config.warnings, ['--ingest-threads (OVERSELL_INGEST_THREADS) no longer does anything: one ingest thread serves the agent port; remove it']);
    assert.deepEqual(loadConfig([], {}).warnings, []);
  });
});
