// Each node's load history outlives the gateway process. Without this a
// restarted or upgraded replica learnt every node again for a day (the risk
// budget waits for history.minSpan), and two replicas, one restarted, decided
// the same node differently meanwhile.
//
// Every replica reads the snapshot once at start (retrying every interval
// until a read succeeds) and hands each node's history to the store
// (NodeStore.seedHistory: a record made later picks it up). The replica
// holding the leader Lease writes every node's history back every interval,
// for the opted-in nodes that still exist: a deleted node's entry goes at the
// next write. It writes only after its own read succeeded, so a leader that
// could not read never overwrites what the previous one kept.
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { decodeLoadHistory, encodeLoadHistory } from '../decide/load-history-codec.js';
import type { LoadHistory } from '../decide/load-history.js';
import type { NodeCache } from '../ingest/node-watch.js';
import type { NodeStore } from '../store/node-store.js';
import { HISTORY_LABEL, MAX_SHARDS, packShards, readShards, shardName } from './history-shards.js';

export interface HistorySnapshotsOptions {
  kubeConfig: KubeConfig;
  /** The gateway's own namespace (the lease's). */
  namespace: string;
  store: NodeStore;
  /** The opted-in nodes: whose histories are written. */
  nodes: NodeCache;
  lease: { readonly isLeader: boolean };
  /**
   * Sharded: the nodes whose histories this replica writes (those it is the
   * first owner of). Every replica then writes, and keeps the entries of the
   * other nodes as it read them. Absent: the leader writes every node's.
   */
  holds?: (node: string) => boolean;
  log: Logger;
  /** Write (and, until one succeeds, read) this often. */
  everyMs: number;
}

export interface LoadResult {
  seeded: number;
  keptOwn: number;
  held: number;
  refused: number;
}

const statusOf = (err: unknown): number | undefined => (err as { code?: number }).code;

export class HistorySnapshots {
  readonly #o: HistorySnapshotsOptions;
  readonly #api: CoreV1Api;
  #loaded = false;
  #busy = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: HistorySnapshotsOptions) {
    this.#o = options;
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
  }

  get loaded(): boolean {
    return this.#loaded;
  }

  /** Reads the snapshot (a failure is logged and retried), then writes every interval while leading. */
  async start(): Promise<void> {
    await this.#tick();
    this.#timer = setInterval(() => void this.#tick(), this.#o.everyMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  async #tick(): Promise<void> {
    if (this.#busy) return;
    this.#busy = true;
    try {
      if (!this.#loaded) await this.load();
      else if (this.#o.holds || this.#o.lease.isLeader) await this.write();
    } catch (err) {
      const { namespace } = this.#o;
      this.#o.log.warn(
        { err: String(err), namespace },
        this.#loaded
          ? 'load history snapshot not written; the next interval tries again (a restart meanwhile loses what was learnt since the last one)'
          : `load history snapshot not read; retrying every interval, and no replica writes one until it is read. The gateway needs list on configmaps in ${namespace} (deploy/base/rbac.yaml)`,
      );
    } finally {
      this.#busy = false;
    }
  }

  /** Reads every shard and seeds the store; refused entries are logged and those nodes learn from scratch. */
  async load(): Promise<LoadResult> {
    const { namespace, store, log } = this.#o;
    const { entries } = readShards(await this.#list());
    // A node in two shards (a write cut short while the count grew): the longer history.
    const best = new Map<string, LoadHistory>();
    const result: LoadResult = { seeded: 0, keptOwn: 0, held: 0, refused: 0 };
    for (const { node, bytes, configMap } of entries) {
      const decoded = decodeLoadHistory(bytes);
      if ('error' in decoded) {
        result.refused += 1;
        log.warn({ node, configMap: `${namespace}/${configMap}`, reason: decoded.error }, 'load history entry refused: this node learns from scratch (the budget waits for history.minSpan); the leader\'s next snapshot replaces the entry');
        continue;
      }
      const other = best.get(node);
      if (!other || decoded.history.spanMs() > other.spanMs()) best.set(node, decoded.history);
    }
    for (const [node, history] of best) {
      const outcome = store.seedHistory(node, history);
      if (outcome === 'seeded') result.seeded += 1;
      else if (outcome === 'held') result.held += 1;
      else result.keptOwn += 1;
    }
    this.#loaded = true;
    log.info({ ...result, namespace }, 'load history snapshot read');
    return result;
  }

  /** Writes the opted-in nodes' histories into the shards (the leader's job); returns the shard count. */
  async write(): Promise<number> {
    const { namespace, store, nodes } = this.#o;
    if (!this.#loaded) throw new Error('the snapshot was not read yet: writing now would drop what it holds');
    const existing = await this.#list();
    const { holds } = this.#o;
    // Sharded: another replica's nodes keep the entry it wrote.
    const written = holds ? new Map(readShards(existing).entries.map((e) => [e.node, e.bytes])) : undefined;
    const histories: Array<[string, LoadHistory]> = [];
    for (const node of nodes.list()) {
      const name = node.metadata?.name;
      if (name === undefined) continue;
      const history = holds && !holds(name) ? kept(written?.get(name)) : store.history(name);
      if (history) histories.push([name, history]);
    }
    // Should the shards ever be full, the longest histories are the ones kept.
    histories.sort((a, b) => b[1].spanMs() - a[1].spanMs());
    const entries = new Map<string, Uint8Array>();
    for (const [name, history] of histories) {
      const bytes = encodeLoadHistory(history);
      if (bytes) entries.set(name, bytes);
    }
    const { shards, dropped } = packShards(entries, readShards(existing).count);
    if (dropped.length > 0) {
      this.#o.log.warn({ dropped: dropped.length, kept: entries.size - dropped.length, example: dropped[0] }, `load history snapshot full (${MAX_SHARDS} ConfigMaps): the shortest histories are not kept, and those nodes learn again after a restart`);
    }
    const versions = new Map(existing.map((cm) => [cm.metadata?.name, cm.metadata?.resourceVersion]));
    for (const [k, shard] of shards.entries()) {
      const name = shardName(k);
      const body: V1ConfigMap = {
        metadata: { name, namespace, labels: { [HISTORY_LABEL.key]: HISTORY_LABEL.value } },
        binaryData: Object.fromEntries([...shard].map(([node, bytes]) => [node, Buffer.from(bytes).toString('base64')])),
      };
      const resourceVersion = versions.get(name);
      try {
        if (resourceVersion === undefined) await this.#api.createNamespacedConfigMap({ namespace, body });
        else await this.#api.replaceNamespacedConfigMap({ name, namespace, body: { ...body, metadata: { ...body.metadata, resourceVersion } } });
      } catch (err) {
        // Another replica led a moment ago and wrote in between: the next interval writes again.
        if (statusOf(err) === 409) continue;
        throw new Error(`writing ConfigMap ${namespace}/${name}: ${(err as Error).message}`);
      }
    }
    return shards.length;
  }

  async #list(): Promise<V1ConfigMap[]> {
    const { namespace } = this.#o;
    const list = await this.#api.listNamespacedConfigMap({ namespace, labelSelector: `${HISTORY_LABEL.key}=${HISTORY_LABEL.value}` });
    return list.items;
  }
}

/** An entry another replica wrote, as it was; undefined when absent or unreadable (its writer replaces it). */
function kept(bytes: Uint8Array | undefined): LoadHistory | undefined {
  if (!bytes) return undefined;
  const decoded = decodeLoadHistory(bytes);
  return 'error' in decoded ? undefined : decoded.history;
}
