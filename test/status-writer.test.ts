// The leader writes node status only while it can see: ready, and fresh data
// for most governed nodes. A gateway that lost its agents must not lower every
// node at once (issue 19, invariant 7).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { holdBack } from '../gateway/act/status-writer.js';
import { DEFAULT_POLICY } from '../gateway/decide/policy.js';

const nodes = (n: number, labels: Record<string, string> = { pool: 'a' }): V1Node[] =>
  Array.from({ length: n }, (_, i) => ({ metadata: { name: `n${i}`, labels } }));
const governed = (labels: Record<string, string>) => (labels.pool === 'a' ? DEFAULT_POLICY : undefined);
const stale = DEFAULT_POLICY.staleAfterMs + 1;

describe('status writer: hold back while blind', () => {
  it('writes when ready and every governed node is fresh', () => {
    assert.equal(holdBack(undefined, nodes(10), governed, () => 1000, 0.5), undefined);
  });

  it('holds back while the gateway is not ready (ingest thread down, policies not synced)', () => {
    assert.match(holdBack('ingest thread down', nodes(10), governed, () => 1000, 0.5) ?? '', /not ready: ingest thread down/);
  });

  it('holds back when the gateway lost its agents: every node stale or unknown', () => {
    assert.match(holdBack(undefined, nodes(10), governed, () => stale, 0.5) ?? '', /fresh for 0 of 10 governed nodes/);
    assert.match(holdBack(undefined, nodes(10), governed, () => undefined, 0.5) ?? '', /fresh for 0 of 10/);
  });

  it('still writes when only a few nodes are stale (their own agents died): that is the case it exists for', () => {
    const age = (name: string) => (name === 'n3' || name === 'n7' ? stale : 1000);
    assert.equal(holdBack(undefined, nodes(10), governed, age, 0.5), undefined);
  });

  it('the threshold is a share of governed nodes: exactly half fresh is enough, less is not', () => {
    const half = (name: string) => (Number(name.slice(1)) < 5 ? 1000 : stale);
    assert.equal(holdBack(undefined, nodes(10), governed, half, 0.5), undefined);
    const fewer = (name: string) => (Number(name.slice(1)) < 4 ? 1000 : stale);
    assert.match(holdBack(undefined, nodes(10), governed, fewer, 0.5) ?? '', /fresh for 4 of 10/);
  });

  it('nodes no policy governs do not count either way', () => {
    const all = [...nodes(2), ...nodes(50, { pool: 'other' }).map((n) => ({ metadata: { ...n.metadata, name: `o-${n.metadata?.name}` } }))];
    assert.equal(holdBack(undefined, all, governed, (name) => (name.startsWith('o-') ? undefined : 1000), 0.5), undefined);
  });
});
