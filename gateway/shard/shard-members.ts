// The members of a sharded gateway: the ready endpoints of the Service the
// agents dial (its EndpointSlices, read as agents read them), each with its
// webhook on this replica's webhook port (one Deployment, one port). Which of
// them is this replica: its own agent port on one of its own addresses.
import { networkInterfaces } from 'node:os';
import type { KubeConfig, V1EndpointSlice } from '@kubernetes/client-node';
import { addressesOf, watchServiceAddresses } from '../../lib/endpoint-addresses.js';
import { kubeConfigConnection } from '../../lib/kube-connection.js';
import { BACKOFF, type Watching } from '../../lib/list-watch.js';
import type { Logger } from '../../lib/log.js';
import type { ShardMember, ShardView } from './shard-view.js';

/** host and port of an "ip:port" or "[ip]:port" key. */
export function splitHostPort(key: string): { host: string; port: number } {
  const at = key.lastIndexOf(':');
  return { host: key.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(key.slice(at + 1)) };
}

/** Whether a member key is this replica: `agentPort()` on an address of this host's interfaces. */
export function selfMatcher(agentPort: () => number | undefined): (key: string) => boolean {
  const own = new Set(Object.values(networkInterfaces()).flatMap((ifs) => (ifs ?? []).map((i) => i.address)));
  return (key) => {
    const { host, port } = splitHostPort(key);
    return port === agentPort() && own.has(host);
  };
}

/** Each listed replica, its webhook on the slice's port named "webhook", else on `webhookPort` (this replica's: one Deployment, one port). */
export function membersOf(slices: readonly V1EndpointSlice[], webhookPort: number): ShardMember[] {
  const members = new Map<string, ShardMember>();
  for (const slice of slices) {
    const port = slice.ports?.find((p) => p.name === 'webhook')?.port ?? webhookPort;
    for (const key of addressesOf([slice])) {
      const { host } = splitHostPort(key);
      members.set(key, { key, webhook: host.includes(':') ? `[${host}]:${port}` : `${host}:${port}` });
    }
  }
  return [...members.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
}

/** Keeps `view` at the Service's members; resolves once the first complete list is in. */
export function watchShardMembers(o: {
  kubeConfig: KubeConfig;
  namespace: string;
  service: string;
  webhookPort: number;
  view: ShardView;
  log: Logger;
}): Promise<Watching> {
  return watchServiceAddresses({
    connection: kubeConfigConnection(o.kubeConfig),
    namespace: o.namespace,
    service: o.service,
    what: `shard members (${o.namespace}/${o.service})`,
    onChange: (_addresses, slices) => {
      const members = membersOf(slices, o.webhookPort);
      o.view.set(members);
      o.log.info({ service: `${o.namespace}/${o.service}`, members: members.map((m) => m.key), copies: o.view.copies }, 'shard members changed: nodes are owned anew');
    },
    log: o.log,
    backoff: BACKOFF.replicas,
  });
}
