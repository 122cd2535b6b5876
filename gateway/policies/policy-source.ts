// Where the gateway's policies come from: the OversellPolicy objects of the
// cluster (watched, applied without restart), or one policy from flags for
// local runs and clusters without the CRD.
import { CustomObjectsApi, type KubeConfig, makeInformer, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { keepWatching } from '../../lib/keep-watching.js';
import { DEFAULT_POLICY, type Policy } from '../decide/policy.js';
import { byPrecedence, selectPolicy, type PolicyEntry } from '../decide/select-policy.js';
import { POLICY_GROUP, POLICY_PLURAL, POLICY_VERSION, toPolicyEntry, type OversellPolicyObject } from './policy-spec.js';

export interface PolicySource {
  readonly kind: 'flags' | 'crd';
  /** All entries, valid or not, in precedence order. */
  entries(): readonly PolicyEntry[];
  /** The entry governing a node with these labels, if any. */
  select(labels: Record<string, string>): PolicyEntry | undefined;
  /** History the store must keep for the longest window or calm period. */
  retainMs(): number;
  /** Undefined once usable; otherwise what is missing (readiness). */
  notReady(): string | undefined;
  onChange(listener: () => void): void;
  stop(): Promise<void>;
}

const retainOf = (entries: readonly PolicyEntry[]) =>
  Math.max(DEFAULT_POLICY.windowMs, ...entries.map((e) => Math.max(e.policy?.windowMs ?? 0, e.policy?.calmPeriodMs ?? 0)));

/** One policy for every node the webhook is sent (its objectSelector does the opt-in). */
export function flagsPolicySource(policy: Policy): PolicySource {
  const entry: PolicyEntry = { name: policy.name, priority: 0, selector: {}, policy };
  return {
    kind: 'flags',
    entries: () => [entry],
    select: () => entry,
    retainMs: () => Math.min(600_000, Math.max(policy.windowMs, policy.calmPeriodMs)),
    notReady: () => undefined,
    onChange: () => {},
    stop: async () => {},
  };
}

export async function crdPolicySource(kubeConfig: KubeConfig, log: Logger): Promise<PolicySource> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const path = `/apis/${POLICY_GROUP}/${POLICY_VERSION}/${POLICY_PLURAL}`;
  const informer = makeInformer<KubernetesObject>(kubeConfig, path, async () =>
    (await api.listClusterCustomObject({ group: POLICY_GROUP, version: POLICY_VERSION, plural: POLICY_PLURAL })) as {
      items: KubernetesObject[];
      metadata: { resourceVersion?: string };
    },
  );
  let entries: PolicyEntry[] = [];
  let synced = false;
  const listeners: Array<() => void> = [];
  const rebuild = () => {
    entries = informer.list().map((o) => toPolicyEntry(o as OversellPolicyObject)).sort(byPrecedence);
    for (const e of entries) if (e.error) log.warn({ policy: e.name, error: e.error }, 'OversellPolicy is invalid: its nodes get no inflation until it is fixed');
    for (const e of entries) for (const w of e.warnings ?? []) log.warn({ policy: e.name, warning: w }, 'OversellPolicy selects nodes by labels their kubelets may set');
    for (const l of listeners) l();
  };
  const watching = await keepWatching(informer, {
    what: 'OversellPolicy',
    log,
    onChange: rebuild,
    cannotStart: (message) => `cannot list OversellPolicies (${message}); is the CRD installed (deploy/base/crd.yaml) and may the gateway list them?`,
  });
  synced = true;
  rebuild();
  log.info({ policies: entries.map((e) => e.name) }, 'watching OversellPolicies');
  return {
    kind: 'crd',
    entries: () => entries,
    select: (labels) => selectPolicy(entries, labels),
    retainMs: () => Math.min(600_000, retainOf(entries)),
    notReady: () => (synced ? undefined : 'OversellPolicy watch not synced'),
    onChange: (l) => listeners.push(l),
    stop: () => watching.stop(),
  };
}
