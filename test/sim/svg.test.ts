import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lineChart, scatter, ticks } from '../../sim/svg.js';

describe('svg charts', () => {
  it('ticks are round numbers covering the range', () => {
    assert.deepEqual(ticks(0, 24, 8), [0, 5, 10, 15, 20, 25]);
    assert.deepEqual(ticks(0, 3210), [0, 1000, 2000, 3000, 4000]);
    assert.deepEqual(ticks(-0.3, 10.2, 6), [-2, 0, 2, 4, 6, 8, 10, 12]);
    assert.deepEqual(ticks(0.1, 0.35), [0.1, 0.15, 0.2, 0.25, 0.3, 0.35]);
    assert.deepEqual(ticks(5, 5), [5]);
  });

  it('escapes names and draws one path per series, one point per entry', () => {
    const line = lineChart({ title: 'a <b>', xLabel: 'x', yLabel: 'y' }, [
      { name: 'p&q', color: '#000', points: [[0, 1], [1, 2]] },
      { name: 'r', color: '#111', dashed: true, points: [[0, 2], [1, 3]] },
    ]);
    assert.match(line, /a &lt;b&gt;/);
    assert.match(line, /p&amp;q/);
    assert.equal(line.match(/<path /g)?.length, 2);
    assert.equal(line.match(/stroke-dasharray/g)?.length, 2, 'the dashed series and its legend line');
    const dots = scatter({ title: 't', xLabel: 'x', yLabel: 'y' }, [{ name: 'a', color: '#000', x: 0, y: 0 }, { name: 'b', color: '#000', x: 5, y: 1e6 }]);
    assert.equal(dots.match(/<circle /g)?.length, 2);
    assert.match(dots, />1M</, 'log axis up to a million');
  });
});
