// keepWatching around client-node's real ListWatch, with a Watch whose
// connection the test breaks, refuses and restores: an API server going away
// for several retries and coming back, and a gateway stopping meanwhile.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ListWatch, type KubernetesObject, type Watch } from '@kubernetes/client-node';
import { pino } from 'pino';
import { keepWatching } from '../lib/keep-watching.js';
import { waitUntil } from '../scripts/harness/wait.js';

const RETRY_MS = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Watch connections to an API server that is up or down; `breakAll` ends the open ones as a dying server does. */
class FakeApiServer {
  up = true;
  watches = 0;
  #open = new Set<(err: unknown) => void>();

  get openWatches(): number {
    return this.#open.size;
  }

  readonly watch = {
    watch: async (_path: string, _q: unknown, _cb: unknown, done: (err: unknown) => void) => {
      this.watches++;
      if (!this.up) {
        done(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }));
        return { abort() {} };
      }
      let ended = false;
      const end = (err: unknown) => {
        if (ended) return;
        ended = true;
        this.#open.delete(end);
        done(err);
      };
      this.#open.add(end);
      // Aborting the request ends it with an AbortError, as node-fetch does.
      return { abort: () => end(Object.assign(new Error('The user aborted a request.'), { name: 'AbortError' })) };
    },
  } as unknown as Watch;

  breakAll(): void {
    for (const end of [...this.#open]) end(new Error('Premature close'));
  }
}

function setup() {
  const server = new FakeApiServer();
  const items: KubernetesObject[] = [{ metadata: { name: 'pool-a', resourceVersion: '1' } }];
  const informer = new ListWatch<KubernetesObject>('/apis/oversell.io/v1alpha1/oversellpolicies', server.watch, async () => ({ items, metadata: { resourceVersion: '1' } }), false);
  const lines: Array<{ level: number; msg: string }> = [];
  const log = pino({ level: 'info' }, { write: (s: string) => lines.push(JSON.parse(s) as { level: number; msg: string }) });
  return { server, informer, lines, log };
}

describe('keepWatching', () => {
  it('keeps retrying through an API server outage, keeps the last known objects, and watches again once it is back', async () => {
    const { server, informer, lines, log } = setup();
    const watching = await keepWatching(informer, { what: 'OversellPolicy', log, retryAfterMs: RETRY_MS });
    assert.equal(server.openWatches, 1);
    server.up = false;
    server.breakAll();
    // Several refused restarts in a row: each one schedules the next.
    await waitUntil('three refused restarts', () => (server.watches >= 4 ? true : undefined), 2000, 5);
    assert.equal(server.openWatches, 0);
    assert.deepEqual(informer.list().map((o) => o.metadata?.name), ['pool-a'], 'the last known objects stay');
    server.up = true;
    await waitUntil('a watch open again', () => (server.openWatches === 1 ? true : undefined), 2000, 5);
    assert.ok(lines.filter((l) => /watch failed; retrying/.test(l.msg)).length >= 3);
    assert.deepEqual(lines.filter((l) => l.level >= 50), [], 'no error: retries only');
    await watching.stop();
  });

  it('stopping ends it: the aborted watch is not taken for a failure, nothing restarts it', async () => {
    const { server, informer, lines, log } = setup();
    const watching = await keepWatching(informer, { what: 'OversellPolicy', log, retryAfterMs: RETRY_MS });
    const opened = server.watches;
    await watching.stop();
    await sleep(RETRY_MS * 5);
    assert.equal(server.watches, opened, 'no watch after stop');
    assert.equal(server.openWatches, 0);
    assert.deepEqual(lines.filter((l) => /watch failed/.test(l.msg)), [], 'the abort of our own stop is no failure');
  });

  it('stopping while a retry is pending cancels the retry', async () => {
    const { server, informer, log } = setup();
    const watching = await keepWatching(informer, { what: 'OversellPolicy', log, retryAfterMs: RETRY_MS });
    server.up = false;
    server.breakAll(); // a retry is now scheduled
    const watches = server.watches;
    await watching.stop();
    server.up = true;
    await sleep(RETRY_MS * 5);
    assert.equal(server.watches, watches, 'the pending retry did not start a watch');
    assert.equal(server.openWatches, 0);
  });
});
