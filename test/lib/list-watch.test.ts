// lib/list-watch.ts against a real HTTP server speaking the API server's list
// and watch protocol (test/helpers/fake-kube-api.ts): the first list then the
// events, a list in pages, a watch the server ends resuming from the last
// resourceVersion (bookmarks included), 410 Gone answered by one consistent
// replace, the backoff's growth, cap and reset, a refused first list, and
// stop() leaving no request and no retry behind.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { pino } from 'pino';
import { ListRefused, ListWatch, type ChangeType, type ListWatchOptions } from '../../lib/list-watch.js';
import { WatchCache } from '../../lib/watch-cache.js';
import { connectionOf } from '../../agent/kube/kube-access.js';
import { FakeKubeApi, type FakeObject } from '../helpers/fake-kube-api.js';
import { waitUntil } from '../../scripts/harness/wait.js';

const PODS = '/api/v1/pods';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pod = (name: string, node = 'node-a'): FakeObject => ({ metadata: { name, namespace: 'default', uid: `uid-${name}` }, spec: { nodeName: node } });

type Delivery = { replace: string[] } | { type: ChangeType; name: string };

function recorder() {
  const seen: Delivery[] = [];
  return {
    seen,
    target: {
      replace: (items: FakeObject[]) => seen.push({ replace: items.map((i) => i.metadata.name).sort() }),
      apply: (type: ChangeType, item: FakeObject) => seen.push({ type, name: item.metadata.name }),
    },
  };
}

function logger() {
  const lines: Array<{ level: number; msg: string; retryInMs?: number }> = [];
  return { lines, log: pino({ level: 'info' }, { write: (s: string) => lines.push(JSON.parse(s) as (typeof lines)[number]) }) };
}

describe('ListWatch', () => {
  let api: FakeKubeApi;
  const started: Array<ListWatch<FakeObject, FakeObject>> = [];
  before(async () => {
    api = await FakeKubeApi.start([PODS, '/api/v1/nodes']);
  });
  after(async () => {
    for (const w of started) w.stop();
    await api.close();
  });

  const make = (o: Partial<ListWatchOptions<FakeObject, FakeObject>> & Pick<ListWatchOptions<FakeObject, FakeObject>, 'target'>) => {
    const w = new ListWatch<FakeObject>({ connection: connectionOf(api.access()), path: PODS, decode: (x) => x, what: 'pods', log: logger().log, ...o });
    started.push(w);
    return w;
  };
  /** Each test starts with no watch of an earlier one left running, even one that failed. */
  const reset = async () => {
    for (const w of started.splice(0)) w.stop();
    api.endWatches();
    // A request the last test's watch sent just before its stop may still be arriving: it is no request of this test.
    await waitUntil('the last test\'s connections closed', async () => ((await api.connections()) === 0 ? true : undefined));
    api.refuse = {};
    api.requests.length = 0;
    api.arrivals.length = 0;
  };

  it('lists, then delivers each change once, with the selectors on both requests', async () => {
    await reset();
    api.put(PODS, pod('a'));
    api.put(PODS, pod('elsewhere', 'node-b'));
    const { seen, target } = recorder();
    const w = make({ target, fieldSelector: 'spec.nodeName=node-a' });
    await w.start();
    assert.equal(w.synced, true);
    assert.deepEqual(seen, [{ replace: ['a'] }]);
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    api.put(PODS, pod('b'));
    api.put(PODS, pod('b-elsewhere', 'node-b'));
    api.put(PODS, { ...pod('a'), status: { phase: 'Running' } });
    api.remove(PODS, 'default/b');
    await waitUntil('three changes', () => (seen.length === 4 ? true : undefined));
    assert.deepEqual(seen.slice(1), [
      { type: 'ADDED', name: 'b' },
      { type: 'MODIFIED', name: 'a' },
      { type: 'DELETED', name: 'b' },
    ]);
    for (const u of api.requests) assert.match(u, /fieldSelector=spec.nodeName%3Dnode-a/, u);
    const [watch] = api.watchRequests();
    assert.equal(watch?.get('allowWatchBookmarks'), 'true');
    w.stop();
    api.remove(PODS, 'default/a');
    api.remove(PODS, 'default/elsewhere');
    api.remove(PODS, 'default/b-elsewhere');
  });

  it('lists in pages and hands the collection over once, whole', async () => {
    await reset();
    for (const n of ['p1', 'p2', 'p3', 'p4', 'p5']) api.put('/api/v1/nodes', { metadata: { name: n } });
    const { seen, target } = recorder();
    const w = make({ target, path: '/api/v1/nodes', pageSize: 2 });
    await w.start();
    assert.deepEqual(seen, [{ replace: ['p1', 'p2', 'p3', 'p4', 'p5'] }]);
    const lists = api.listRequests();
    assert.equal(lists.length, 3, 'three pages of at most 2');
    assert.deepEqual(lists.map((q) => q.get('limit')), ['2', '2', '2']);
    assert.equal(lists[0]?.get('continue'), null);
    assert.ok(lists[1]?.get('continue') && lists[2]?.get('continue'));
    w.stop();
  });

  it('a watch the server ends resumes from the last resourceVersion (a bookmark included), without listing again and without losing what happened meanwhile', async () => {
    await reset();
    const { seen, target } = recorder();
    const w = make({ target });
    await w.start();
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    api.put(PODS, pod('x'));
    await waitUntil('x added', () => (seen.length === 2 ? true : undefined));
    api.put('/api/v1/nodes', { metadata: { name: 'other-collection' } }); // moves the server's resourceVersion past x's
    api.bookmark();
    await waitUntil('the bookmark read', () => (w.resourceVersion === api.resourceVersion ? true : undefined));
    const bookmarked = api.resourceVersion;
    // Between the end and the resumed watch, a pod arrives: the resumed watch must bring it.
    api.refuse = { watch: 503 };
    api.endWatches();
    await waitUntil('a refused reconnect', () => (api.watchRequests().length >= 2 ? true : undefined));
    api.put(PODS, pod('y'));
    api.refuse = {};
    await waitUntil('y added', () => (seen.length === 3 ? true : undefined), 5000);
    const watches = api.watchRequests();
    assert.equal(watches.at(-1)?.get('resourceVersion'), bookmarked, 'resumed from the bookmark');
    assert.equal(api.listRequests().length, 1, 'no list again');
    assert.deepEqual(seen, [{ replace: [] }, { type: 'ADDED', name: 'x' }, { type: 'ADDED', name: 'y' }]);
    w.stop();
    api.remove(PODS, 'default/x');
    api.remove(PODS, 'default/y');
  });

  it('410 Gone: lists again and the consumer sees one replace with the collection as it is now', async () => {
    await reset();
    api.put(PODS, pod('stays'));
    api.put(PODS, pod('goes'));
    const changes: string[] = [];
    const cache = new WatchCache<FakeObject>((cs) => changes.push(cs.map((c) => `${c.type} ${c.object.metadata.name}`).sort().join(',')));
    const replaces: string[][] = [];
    const w = make({
      target: {
        replace: (items) => {
          replaces.push(items.map((i) => i.metadata.name).sort());
          cache.replace(items);
        },
        apply: (t, o) => cache.apply(t, o),
      },
    });
    await w.start();
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    // The gateway is cut off while things change, and the server forgets the history meanwhile.
    api.refuse = { watch: 503 };
    api.endWatches();
    await waitUntil('a refused reconnect', () => (api.watchRequests().length >= 2 ? true : undefined));
    api.remove(PODS, 'default/goes');
    api.put(PODS, pod('new'));
    api.put(PODS, { ...pod('stays'), status: { phase: 'Running' } });
    api.compact();
    api.refuse = {};
    await waitUntil('a second list', () => (replaces.length === 2 ? true : undefined), 5000);
    assert.deepEqual(replaces, [['goes', 'stays'], ['new', 'stays']]);
    assert.deepEqual(cache.list().map((o) => o.metadata.name).sort(), ['new', 'stays']);
    assert.equal(changes.at(-1), 'ADDED new,DELETED goes,MODIFIED stays', 'the relist told as differences');
    await waitUntil('watching again', () => (api.openWatches === 1 ? true : undefined));
    assert.equal(api.watchRequests().at(-1)?.get('resourceVersion'), w.resourceVersion);
    api.put(PODS, pod('after'));
    await waitUntil('after added', () => (cache.get('default/after') ? true : undefined));
    w.stop();
    for (const n of ['stays', 'new', 'after']) api.remove(PODS, `default/${n}`);
  });

  it('backs off on failures: doubling to the cap, then reset once a watch is back', async () => {
    await reset();
    const { target } = recorder();
    const delays: number[] = [];
    const w = make({ target, backoff: { initialMs: 40, maxMs: 160 }, random: () => 1, onError: (_e, ms) => delays.push(ms) });
    await w.start();
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    api.refuse = { watch: 500 };
    const from = api.watchRequests().length;
    api.endWatches(); // ended at once without an event: a failure too (the first step)
    await waitUntil('six refusals', () => (api.watchRequests().length >= from + 6 ? true : undefined), 5000);
    const at = Date.now();
    api.refuse = {};
    await waitUntil('watching again', () => (api.openWatches === 1 ? true : undefined), 5000);
    assert.ok(Date.now() - at <= 160 + 500, 'the next attempt within the cap');
    assert.deepEqual(delays.slice(0, 6), [40, 80, 160, 160, 160, 160]);
    // And the attempts were that far apart, as the server saw them.
    const watchTimes = api.requests.map((u, i) => (u.includes('watch=1') ? api.arrivals[i] : undefined)).filter((t) => t !== undefined).slice(from);
    for (let i = 0; i < 5; i++) {
      const gap = (watchTimes[i + 1] ?? 0) - (watchTimes[i] ?? 0);
      assert.ok(gap >= (delays[i + 1] ?? 0) - 5 && gap <= (delays[i + 1] ?? 0) + 500, `attempt ${i + 2}: ${gap} ms after the one before, the backoff said ${delays[i + 1]}`);
    }
    // Healthy again: a new failure starts from the first step.
    await sleep(1100); // past the short-watch threshold: this watch is healthy
    const n = delays.length;
    api.refuse = { watch: 500 };
    api.endWatches();
    await waitUntil('a failure after recovery', () => (delays.length >= n + 1 ? true : undefined));
    assert.equal(delays[n], 40, 'reset after a healthy watch');
    w.stop();
  });

  it('a watch that ends at once without an event is a failure, not a reason to reconnect in a loop', async () => {
    await reset();
    const { target } = recorder();
    const { lines, log } = logger();
    const w = make({ target, log, backoff: { initialMs: 200, maxMs: 200 }, random: () => 1 });
    await w.start();
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    api.endWatches();
    await sleep(100);
    assert.equal(api.watchRequests().length, 1, `no reconnect before the backoff: ${api.requests.map((u, i) => `${api.arrivals[i]} ${u}`).join(' ')}`);
    assert.ok(lines.some((l) => /watch interrupted/.test(l.msg) && l.retryInMs === 200));
    await waitUntil('reconnected', () => (api.openWatches === 1 ? true : undefined));
    w.stop();
  });

  it('a refused first list rejects start() with the status, and nothing retries', async () => {
    await reset();
    api.refuse = { list: 403 };
    const { target } = recorder();
    const w = make({ target, backoff: { initialMs: 10, maxMs: 10 } });
    await assert.rejects(w.start(), (err: unknown) => err instanceof ListRefused && err.status === 403 && /HTTP 403/.test(err.message));
    await sleep(100);
    assert.equal(api.requests.length, 1);
    assert.equal(w.synced, false);
  });

  it('a first list refused for now (429, as while a new CRD\'s storage initialises) is tried again, and start() resolves once it is served', async () => {
    await reset();
    api.refuse = { list: 429 };
    const { target } = recorder();
    const w = make({ target, backoff: { initialMs: 20, maxMs: 20 }, random: () => 1 });
    let started = false;
    const starting = w.start().then(() => {
      started = true;
    });
    await waitUntil('a second list', () => (api.requests.length >= 2 ? true : undefined));
    assert.equal(started, false, 'still waiting while the API server says later');
    api.refuse = {};
    await starting;
    assert.equal(w.synced, true);
    w.stop();
  });

  it('stop() while start() waits to list again ends the wait: start() resolves and nothing retries', async () => {
    await reset();
    api.refuse = { list: 503 };
    const { target } = recorder();
    const w = make({ target, backoff: { initialMs: 5000, maxMs: 5000 }, random: () => 1 });
    const starting = w.start();
    await waitUntil('the first list', () => (api.requests.length >= 1 ? true : undefined));
    await sleep(20);
    w.stop();
    await starting;
    await sleep(50);
    assert.equal(api.requests.length, 1);
    assert.equal(w.synced, false);
    api.refuse = {};
  });

  it('stop() ends the open watch and a pending retry: no request afterwards, no socket left', async () => {
    await reset();
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const baseline = sockets();
    const { target } = recorder();
    const w = make({ target, backoff: { initialMs: 50, maxMs: 50 }, random: () => 1 });
    await w.start();
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    w.stop();
    await waitUntil('the watch closed', () => (api.openWatches === 0 ? true : undefined));
    await waitUntil('its sockets gone', () => (sockets() <= baseline ? true : undefined));

    // Now with a retry pending, far off: stop() must clear it, not leave it to find itself stopped.
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const w2 = make({ target, backoff: { initialMs: 60_000, maxMs: 60_000 }, random: () => 1 });
    await w2.start();
    await waitUntil('the watch open', () => (api.openWatches === 1 ? true : undefined));
    const timersBefore = timers();
    api.refuse = { watch: 500 };
    api.endWatches();
    await waitUntil('a retry pending', () => (timers() > timersBefore ? true : undefined));
    w2.stop();
    assert.equal(timers(), timersBefore, 'no timer left');
    const count = api.requests.length;
    await sleep(100);
    assert.equal(api.requests.length, count, 'nothing ran after stop');
    await waitUntil('no socket left', () => (sockets() <= baseline ? true : undefined));
  });

  it('stop() during the first list: start() resolves without handing anything over', async () => {
    await reset();
    const { seen, target } = recorder();
    let release: () => void = () => {};
    const w = make({
      target,
      connection: {
        server: new URL(api.url),
        options: () => new Promise((r) => (release = () => r({}))),
      },
    });
    const starting = w.start();
    w.stop();
    release();
    await starting;
    assert.deepEqual(seen, []);
    assert.equal(api.requests.length, 0);
  });
});
