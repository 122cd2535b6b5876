// Where the load histories live between gateway processes: ConfigMaps in the
// gateway's own namespace (a kubelet can write its node's annotations, not
// these), named oversell-load-history-<k>, one binaryData key per node (a node
// name is a valid key), the node in shard hash(name) mod count. This file is
// the layout only: which shard, how many, and reading them back.
import type { V1ConfigMap } from '@kubernetes/client-node';

export const HISTORY_CONFIGMAP_PREFIX = 'oversell-load-history-';
/** What the gateway lists the shards by; it never writes a ConfigMap without it, nor reads one that lacks it. */
export const HISTORY_LABEL = { key: 'oversell.io/load-history', value: 'v1' } as const;
/**
 * A shard is filled to about this many bytes of keys and values, and never
 * past SHARD_LIMIT_BYTES: well under the API server's 1 MiB ConfigMap limit,
 * with room for the object's JSON (binaryData travels base64, 4/3 the bytes).
 * At 4,235 + 253 bytes a node at most (every bucket set, the longest name)
 * a shard holds at least 170 nodes; a typical day's entry is about 1 KiB, so
 * about 500 nodes fill one.
 */
export const SHARD_TARGET_BYTES = 512 * 1024;
export const SHARD_LIMIT_BYTES = 768 * 1024;
/**
 * RBAC names every shard the gateway may update (deploy/base/rbac.yaml lists
 * oversell-load-history-0 to -63): RBAC cannot match a name pattern, and a
 * broader update would reach the sidecar templates in the same namespace.
 * 64 shards hold about 30,000 nodes of typical entries, 10,880 at worst.
 */
export const MAX_SHARDS = 64;

export const shardName = (k: number): string => `${HISTORY_CONFIGMAP_PREFIX}${k}`;

/** The shard index a ConfigMap name says, or undefined when it is not a shard's name. */
export function shardIndex(name: string): number | undefined {
  const m = /^oversell-load-history-(0|[1-9][0-9]{0,5})$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** FNV-1a of the name: stable across processes and versions, unlike anything seeded. */
export function shardOf(node: string, count: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < node.length; i++) {
    h ^= node.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % count;
}

/**
 * The entries split into shards: as many as SHARD_TARGET_BYTES needs, never
 * fewer than `atLeast` (the shards already there: the count only grows, so a
 * shard is never left behind with old entries and the gateway never deletes),
 * doubled while any shard would pass SHARD_LIMIT_BYTES, at most MAX_SHARDS.
 * Entries in order of preference (the caller puts the longest histories
 * first): at MAX_SHARDS, what does not fit its shard is left out (`dropped`).
 */
export function packShards(entries: ReadonlyMap<string, Uint8Array>, atLeast: number): { shards: Array<Map<string, Uint8Array>>; dropped: string[] } {
  let total = 0;
  for (const [node, bytes] of entries) total += node.length + bytes.length;
  let count = Math.min(MAX_SHARDS, Math.max(1, atLeast, Math.ceil(total / SHARD_TARGET_BYTES)));
  for (;;) {
    const shards = Array.from({ length: count }, () => new Map<string, Uint8Array>());
    const sizes = new Array<number>(count).fill(0);
    const dropped: string[] = [];
    for (const [node, bytes] of entries) {
      const k = shardOf(node, count);
      if (sizes[k]! + node.length + bytes.length > SHARD_LIMIT_BYTES) {
        dropped.push(node);
        continue;
      }
      shards[k]!.set(node, bytes);
      sizes[k]! += node.length + bytes.length;
    }
    if (dropped.length === 0 || count >= MAX_SHARDS) return { shards, dropped };
    count = Math.min(MAX_SHARDS, count * 2);
  }
}

export interface ReadShards {
  /** Each node's entry; a node in two shards (a write that stopped halfway while the count grew) is decided by the caller. */
  entries: Array<{ node: string; bytes: Uint8Array; configMap: string }>;
  /** The highest shard index there plus one (at most MAX_SHARDS): the count the next write keeps at least. */
  count: number;
}

/** The entries of the shards listed (by HISTORY_LABEL); ConfigMaps not named as a shard are skipped. */
export function readShards(configMaps: readonly V1ConfigMap[]): ReadShards {
  const entries: ReadShards['entries'] = [];
  let count = 0;
  for (const cm of configMaps) {
    const name = cm.metadata?.name ?? '';
    const k = shardIndex(name);
    if (k === undefined || k >= MAX_SHARDS) continue;
    count = Math.max(count, k + 1);
    for (const [node, base64] of Object.entries(cm.binaryData ?? {})) {
      entries.push({ node, bytes: Buffer.from(base64, 'base64'), configMap: name });
    }
  }
  return { entries, count };
}
