// The objects of a watched collection, by key (what an informer keeps), for
// consumers that read whole objects: the agent's pods and EndpointSlices, the
// gateway's nodes, OversellPolicies and sidecar templates. A list after 410
// Gone is told as the differences from what was held, so a consumer that acts
// per object (the node cache) forgets what vanished meanwhile.
import type { ChangeType, KubeObject, ListWatchTarget } from './list-watch.js';

export interface Change<T> {
  type: ChangeType;
  object: T;
}

/** namespace/name, or the name of a cluster-scoped object. */
export const namespacedName = (o: KubeObject): string | undefined => {
  const name = o.metadata?.name;
  if (!name) return undefined;
  return o.metadata?.namespace ? `${o.metadata.namespace}/${name}` : name;
};

export class WatchCache<T extends KubeObject> implements ListWatchTarget<T> {
  #items = new Map<string, T>();

  constructor(
    /** After every list (even one that changed nothing: the first one says the collection is known) and every event. */
    private readonly onChange: (changes: readonly Change<T>[]) => void = () => {},
    private readonly key: (o: T) => string | undefined = namespacedName,
  ) {}

  replace(items: T[]): void {
    const next = new Map<string, T>();
    const changes: Change<T>[] = [];
    for (const object of items) {
      const k = this.key(object);
      if (k === undefined) continue;
      next.set(k, object);
      const before = this.#items.get(k);
      if (!before) changes.push({ type: 'ADDED', object });
      else if (before.metadata?.resourceVersion !== object.metadata?.resourceVersion) changes.push({ type: 'MODIFIED', object });
    }
    for (const [k, object] of this.#items) if (!next.has(k)) changes.push({ type: 'DELETED', object });
    this.#items = next;
    this.onChange(changes);
  }

  apply(type: ChangeType, object: T): void {
    const k = this.key(object);
    if (k === undefined) return;
    if (type === 'DELETED') this.#items.delete(k);
    else this.#items.set(k, object);
    this.onChange([{ type, object }]);
  }

  list(): T[] {
    return [...this.#items.values()];
  }

  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  get size(): number {
    return this.#items.size;
  }
}
