// The sender of node inputs between replicas (gateway/shard/node-inputs-sender.ts)
// against a real store and shard view, with the replicas' HTTPS replaced by
// a recorder: what it sends, to whom, and that a replica that never answers
// holds back only the sends to itself.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NodeStore } from '../../../gateway/store/node-store.js';
import { FIRST_OWNER_GRACE_MS, NodeInputsSender } from '../../../gateway/shard/node-inputs-sender.js';
import { peerInputsFromWire } from '../../../gateway/shard/node-inputs-wire.js';
import { ShardView } from '../../../gateway/shard/shard-view.js';
import { flagsPolicySource } from '../../../gateway/policies/policy-source.js';
import { DEFAULT_POLICY } from '../../../gateway/decide/policy.js';
import { planId } from '../../../lib/usage/summary-plan.js';
import { createLogger } from '../../../lib/log.js';
import { storeSample } from '../../helpers/store-sample.js';
import { nodeSample } from '../../helpers/node-reviews.js';

const log = createLogger('test', process.env.TEST_LOG_LEVEL ?? 'silent');

function setup(o: { reportedSampleAtMs?: (node: string) => number | undefined; now?: () => number } = {}) {
  const store = new NodeStore({ retainMs: 600_000, forgetAfterMs: 600_000 });
  const view = new ShardView(2, (key) => key === 'self');
  view.set([{ key: 'self', webhook: 'self:8443' }, { key: 'a', webhook: 'a:8443' }, { key: 'b', webhook: 'b:8443' }]);
  const posts: { webhook: string; nodes: string[]; body: unknown }[] = [];
  const hung = new Set<string>();
  const held: (() => void)[] = [];
  const client = {
    post: (webhook: string, _path: string, body: Buffer) => {
      const parsed = JSON.parse(body.toString()) as { nodes: { name: string }[] };
      posts.push({ webhook, nodes: parsed.nodes.map((n) => n.name), body: parsed });
      return hung.has(webhook) ? new Promise<Buffer>((resolve) => held.push(() => resolve(Buffer.alloc(0)))) : Promise.resolve(Buffer.alloc(0));
    },
  };
  let failed = 0;
  const policies = flagsPolicySource(DEFAULT_POLICY);
  const clock = o.now ?? Date.now;
  // The timer never fires within a test: each flush is the test's own.
  const sender = new NodeInputsSender({ store, policies: () => policies.entries(), view, client, identity: 'self', now: clock, log, onFailed: () => (failed += 1), everyMs: 3_600_000, ...(o.reportedSampleAtMs && { reportedSampleAtMs: o.reportedSampleAtMs }) });
  const report = (name: string, streamId: number, seq: number) => {
    if (!store.get(name)) store.attach(name, `agent-${name}`, null, streamId);
    const now = clock();
    storeSample(store, name, streamId, nodeSample(now, { seq, summaries: [{ planId: planId(DEFAULT_POLICY), samples: 30, spanMs: 30_000, cpuMillicores: 700, memoryBytes: 2 ** 30, cpuPressure: false, memoryPressure: true }] }), now);
  };
  /** Answers the sends held so far. */
  const answerHeld = () => held.splice(0).forEach((answer) => answer());
  return { store, view, sender, posts, hung, answerHeld, report, failed: () => failed };
}

describe('node inputs sent to the other replicas', () => {
  it('each changed node whose agent streams here, once to every other replica, as the receiver reads it', async () => {
    const { sender, posts, report, store } = setup();
    sender.start();
    try {
      report('n1', 1, 1);
      report('n2', 2, 1);
      // A node whose agent stream ended here is not reported: this replica would relay what it no longer gets.
      report('gone', 3, 1);
      store.detach('gone', 3);
      await sender.flush();
      assert.deepEqual(posts.map((p) => p.webhook).sort(), ['a:8443', 'b:8443']);
      for (const p of posts) assert.deepEqual(p.nodes.sort(), ['n1', 'n2']);
      const read = peerInputsFromWire(posts[0]!.body);
      assert.ok(typeof read !== 'string', String(read));
      const n1 = read.get('n1')!;
      assert.equal(n1.usage.requests.cpuMillicores, 6000);
      const planned = n1.usage.planned.find((p) => p.planId === planId(DEFAULT_POLICY));
      assert.equal(planned?.summary.cpuMillicores, 700, 'the agent\'s own summary under the policy\'s plan');
      assert.equal(planned?.summary.memoryPressure, true);
      posts.length = 0;
      await sender.flush();
      assert.equal(posts.length, 0, 'nothing changed: nothing sent');
    } finally {
      sender.stop();
    }
  });

  it('a replica that does not answer holds back only the sends to itself; what changed meanwhile follows once it answers', async () => {
    const { sender, posts, hung, answerHeld, report } = setup();
    const turn = () => new Promise((r) => setImmediate(r));
    hung.add('a:8443');
    sender.start();
    try {
      report('n1', 1, 1);
      void sender.flush();
      await turn();
      report('n2', 2, 1);
      void sender.flush();
      await turn();
      report('n3', 3, 1);
      void sender.flush();
      await turn();
      assert.deepEqual(posts.filter((p) => p.webhook === 'b:8443').map((p) => p.nodes), [['n1'], ['n2'], ['n3']], 'every change reached the answering replica at once');
      assert.deepEqual(posts.filter((p) => p.webhook === 'a:8443').map((p) => p.nodes), [['n1']], 'one send in flight to the silent one, the rest waiting');
      hung.delete('a:8443');
      answerHeld();
      await turn();
      await sender.flush();
      assert.deepEqual(posts.filter((p) => p.webhook === 'a:8443').map((p) => p.nodes.sort()), [['n1'], ['n2', 'n3']], 'what changed meanwhile, in one send');
    } finally {
      sender.stop();
    }
  });

  it('an owner other than the first holds a change back while the first owner\'s reports cover it, and sends it a second after they fall behind', async () => {
    let t = Date.now();
    const reports = new Map<string, number>();
    const { sender, posts, report, view } = setup({ reportedSampleAtMs: (n) => reports.get(n), now: () => t });
    const names = Array.from({ length: 40 }, (_, i) => `node-${i}`);
    const first = names.find((n) => view.isFirstOwner(n))!;
    const second = names.find((n) => !view.isFirstOwner(n))!;
    const sentTo = (webhook: string) => posts.filter((p) => p.webhook === webhook).flatMap((p) => p.nodes);
    sender.start();
    try {
      report(first, 1, 1);
      report(second, 2, 1);
      await sender.flush();
      assert.deepEqual(sentTo('a:8443'), [first], 'the first owner\'s node at once; the other held');
      // The first owner's report of the same message arrives: nothing to add, ever.
      reports.set(second, t);
      t += 2 * FIRST_OWNER_GRACE_MS;
      await sender.flush();
      assert.deepEqual(sentTo('a:8443'), [first]);
      // A new sample the first owner does not report (it lost the stream): sent once the grace has passed.
      t += 5000;
      report(second, 2, 2);
      await sender.flush();
      t += FIRST_OWNER_GRACE_MS / 2;
      await sender.flush();
      assert.deepEqual(sentTo('a:8443'), [first], 'still within the grace');
      t += FIRST_OWNER_GRACE_MS;
      await sender.flush();
      assert.deepEqual(sentTo('a:8443'), [first, second], 'the first owner\'s reports fell behind: this owner reports');
      assert.deepEqual(sentTo('b:8443'), [first, second]);
    } finally {
      sender.stop();
    }
  });

  it('a replica that joins is sent every node held here', async () => {
    const { sender, posts, report, view } = setup();
    sender.start();
    try {
      report('n1', 1, 1);
      report('n2', 2, 1);
      await sender.flush();
      posts.length = 0;
      view.set([{ key: 'self', webhook: 'self:8443' }, { key: 'a', webhook: 'a:8443' }, { key: 'b', webhook: 'b:8443' }, { key: 'c', webhook: 'c:8443' }]);
      await sender.flush();
      assert.deepEqual(posts.find((p) => p.webhook === 'c:8443')?.nodes.sort(), ['n1', 'n2']);
    } finally {
      sender.stop();
    }
  });
});
