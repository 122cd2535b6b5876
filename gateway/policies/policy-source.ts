// Where the gateway's policies come from: the OversellPolicy objects of the
// cluster (watched, applied without restart), or one policy from flags for
// local runs and clusters without the CRD.
import type { KubeConfig } from '@kubernetes/client-node';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, ListWatch } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import { WatchCache } from '../../lib/watch-cache.js';
import type { Policy } from '../decide/policy.js';
import { byPrecedence, selectPolicy, type PolicyEntry } from '../decide/select-policy.js';
import { retainFor } from '../decide/node-inputs.js';
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


/** One policy for every node the webhook is sent (its objectSelector does the opt-in). */
export function flagsPolicySource(policy: Policy): PolicySource {
  const entry: PolicyEntry = { name: policy.name, priority: 0, selector: {}, policy };
  return {
    kind: 'flags',
    entries: () => [entry],
    select: () => entry,
    retainMs: () => retainFor([policy]),
    notReady: () => undefined,
    onChange: () => {},
    stop: async () => {},
  };
}

export async function crdPolicySource(kubeConfig: KubeConfig, log: Logger): Promise<PolicySource> {
  let entries: PolicyEntry[] = [];
  let synced = false;
  const listeners: Array<() => void> = [];
  const policies = new WatchCache<OversellPolicyObject>(() => {
    // The first list is applied below, once start() has it all.
    if (synced) rebuild();
  });
  const rebuild = () => {
    entries = policies.list().map(toPolicyEntry).sort(byPrecedence);
    for (const e of entries) if (e.error) log.warn({ policy: e.name, error: e.error }, 'OversellPolicy is invalid: its nodes get no inflation until it is fixed');
    for (const e of entries) for (const w of e.warnings ?? []) log.warn({ policy: e.name, warning: w }, 'OversellPolicy selects nodes by labels their kubelets may set');
    for (const l of listeners) l();
  };
  const watch = new ListWatch<OversellPolicyObject>({
    connection: kubeConfigConnection(kubeConfig),
    path: `/apis/${POLICY_GROUP}/${POLICY_VERSION}/${POLICY_PLURAL}`,
    decode: (o) => o,
    target: policies,
    what: 'OversellPolicies',
    log,
    backoff: BACKOFF.replicas,
  });
  try {
    await watch.start();
  } catch (err) {
    throw new Error(`cannot list OversellPolicies (${(err as Error).message}); is the CRD installed (deploy/base/crd.yaml) and may the gateway list them?`);
  }
  synced = true;
  rebuild();
  log.info({ policies: entries.map((e) => e.name) }, 'watching OversellPolicies');
  return {
    kind: 'crd',
    entries: () => entries,
    select: (labels) => selectPolicy(entries, labels),
    retainMs: () => retainFor(entries.map((e) => e.policy)),
    notReady: () => (synced ? undefined : 'OversellPolicy watch not synced'),
    onChange: (l) => listeners.push(l),
    stop: async () => watch.stop(),
  };
}

/**
 * The policy that selects these labels, for work on the ingest path (learning,
 * relief, harm): a source that throws there must not cost the sample, so it
 * counts as no policy. The decision's own readers let the error say why.
 */
export function policyOrNone(source: Pick<PolicySource, 'select'>, labels: Record<string, string>): Policy | undefined {
  try {
    return source.select(labels)?.policy;
  } catch {
    return undefined;
  }
}
