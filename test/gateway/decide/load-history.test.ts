import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LoadHistory, recordLoad } from '../../../gateway/decide/load-history.js';

const HOUR = 3_600_000;

describe('LoadHistory', () => {
  it('a quantile is the factor the node stayed under for all but that share of its time, rounded up to 1/128', () => {
    const h = new LoadHistory(24 * HOUR);
    // 999 seconds at 0.5, then 1 second at 0.9 (CPU), memory at 0.3 throughout.
    for (let s = 1; s <= 1000; s++) h.record(s * 1000, s === 1000 ? 0.9 : 0.5, 0.3);
    assert.equal(h.spanMs(), 999_000);
    assert.equal(h.quantile('cpu', 0), Math.ceil(0.9 * 128 + 1e-9) / 128, 'share 0: the largest seen');
    assert.equal(h.quantile('cpu', 0.01), Math.ceil(0.5 * 128 + 1e-9) / 128, '1% of the time may be above: the one second at 0.9 is');
    assert.ok(h.quantile('cpu', 0.01) >= 0.5 && h.quantile('cpu', 0.01) <= 0.5 + 1 / 128);
    assert.equal(h.quantile('memory', 0), Math.ceil(0.3 * 128 + 1e-9) / 128);
  });

  it('decays: a peak a week old weighs less than a day of quiet', () => {
    const h = new LoadHistory(24 * HOUR);
    let t = 0;
    for (let i = 0; i < 360; i++) h.record((t += 10_000), 0.9, 0.9); // one hour at 0.9
    for (let i = 0; i < 6 * 24 * 360; i++) h.record((t += 10_000), 0.4, 0.4); // six days at 0.4
    // The hour at 0.9 was 1/145 of the time, decayed 6 half-lives: below a 0.1 % share now.
    assert.ok(h.quantile('cpu', 0.001) < 0.41, `p99.9 ${h.quantile('cpu', 0.001)} still sees the old peak`);
    // Seen at all (share 0) it still is: 2^-6 of an hour is far above the unseen threshold.
    assert.ok(h.quantile('cpu', 0) > 0.89);
  });

  it('rescales long histories without losing the distribution', () => {
    const h = new LoadHistory(HOUR);
    let t = 0;
    // 60 half-lives: the stored weights would overflow 2^40 without rescaling.
    for (let i = 0; i < 60 * 360; i++) h.record((t += 10_000), i % 10 === 0 ? 0.8 : 0.5, 0.5);
    assert.ok(Number.isFinite(h.quantile('cpu', 0.05)));
    assert.equal(h.quantile('cpu', 0.05), 0.8 + 1 / 128 - ((0.8 * 128) % 1) / 128, 'a tenth of the time at 0.8: the 95th percentile is there');
    assert.ok(Math.abs(h.quantile('cpu', 0.2) - (0.5 + 1 / 128)) < 1e-9);
  });

  it('a gap counts as at most 10 s, and records out of order or not finite are ignored', () => {
    const h = new LoadHistory(24 * HOUR);
    h.record(1000, 0.5, 0.5);
    h.record(3_600_000, 0.9, 0.9); // an hour of silence, then 0.9: 10 s of weight, not an hour
    for (let s = 1; s <= 100; s++) h.record(3_600_000 + s * 1000, 0.5, 0.5);
    assert.ok(h.quantile('cpu', 0.2) < 0.6, 'the silent hour did not count as time at 0.9');
    const before = h.quantile('memory', 0);
    h.record(10, 5, 5);
    h.record(4_000_000, Number.NaN, 1);
    h.record(4_000_001, -1, 1);
    assert.equal(h.quantile('memory', 0), before);
  });

  it('factors past 2x requests are kept by their largest value', () => {
    const h = new LoadHistory(24 * HOUR);
    h.record(1000, 3.7, 0.5);
    h.record(2000, 2.5, 0.5);
    assert.equal(h.quantile('cpu', 0), 3.7);
  });

  it('recordLoad learns nothing while a pod is starting or little is bound', () => {
    const h = new LoadHistory(24 * HOUR);
    const raw = { cpu: 1000, memory: 1000 };
    recordLoad(h, 1000, { cpu: 900, memory: 100 }, { cpu: 1000, memory: 1000 }, raw, true);
    recordLoad(h, 2000, { cpu: 200, memory: 100 }, { cpu: 240, memory: 1000 }, raw, false);
    assert.equal(h.quantile('cpu', 0), 0, 'nothing recorded');
    recordLoad(h, 3000, { cpu: 600, memory: 300 }, { cpu: 1000, memory: 1000 }, raw, false);
    assert.equal(h.quantile('cpu', 0), Math.ceil(0.6 * 128) / 128);
  });
});
