// The webhook's partial JSON reader against JSON.parse: for every field it
// keeps, the same value; for everything JSON.parse refuses that it reads,
// a ReviewSyntaxError (the webhook's 400), never a hang, a crash or a
// polluted prototype.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { NODE_REVIEW_FIELDS, readJsonFields, ReviewSyntaxError, type Fields } from '../gateway/admit/review-reader.js';

const fixture = readFileSync(new URL('./fixtures/admission/node-status-update.json', import.meta.url), 'utf8');

/** What the reader promises: JSON.parse's value, cut down to `fields`. */
function project(value: unknown, fields: Fields | true): unknown {
  if (fields === true || typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(fields)) {
    if (Object.hasOwn(value, key)) out[key] = project((value as Record<string, unknown>)[key], fields[key]!);
  }
  return out;
}

const read = (text: string, fields: Fields = NODE_REVIEW_FIELDS) => readJsonFields(Buffer.from(text), fields);
const refused = (text: string, message?: RegExp) =>
  assert.throws(() => read(text), (err: unknown) => err instanceof ReviewSyntaxError && err.statusCode === 400 && (!message || message.test(err.message)));

describe('review reader', () => {
  it('keeps exactly what JSON.parse gives for the fields of a kubelet review, in any layout', () => {
    const review = JSON.parse(fixture) as unknown;
    for (const text of [fixture, JSON.stringify(review), JSON.stringify(review, null, 2), JSON.stringify(review, null, '\t'), `\ufeff${fixture}`]) {
      const kept = read(text) as { request: { object: { metadata: { labels: unknown }; status: Record<string, unknown> } } };
      assert.deepEqual(kept, project(review, NODE_REVIEW_FIELDS));
      // Proof that the expensive parts were skipped, not silently kept.
      assert.equal(Object.hasOwn(kept.request, 'oldObject'), false);
      assert.deepEqual(Object.keys(kept.request.object.status).sort(), ['allocatable', 'capacity']);
      assert.ok(kept.request.object.metadata.labels);
    }
  });

  it('agrees with JSON.parse on generated documents (strings with quotes, backslashes, unicode; numbers; nesting)', () => {
    const fieldsArb: fc.Arbitrary<Fields> = fc.letrec<{ fields: Fields }>((tie) => ({
      fields: fc.dictionary(fc.constantFrom('a', 'b', 'c', 'request', 'object', '"q', 'k\\'), fc.oneof({ depthSize: 'small' }, fc.constant(true as const), tie('fields'))),
    })).fields;
    // Keys drawn from a small set so generated documents hit the kept fields often, and repeat them (last one wins).
    const docArb = fc.letrec<{ value: unknown }>((tie) => ({
      value: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.jsonValue({ maxDepth: 2 }),
        fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c', 'request', 'object', '"q', 'k\\', '__proto_', 'x y'), tie('value')), { maxLength: 6 }).map(
          (members) => ({ members }),
        ),
      ),
    })).value;
    // Serialized by hand so duplicate keys survive into the text.
    const serialize = (v: unknown, space: string): string => {
      if (typeof v === 'object' && v !== null && 'members' in v) {
        const members = (v as { members: Array<[string, unknown]> }).members;
        return `{${space}${members.map(([k, x]) => `${JSON.stringify(k)}${space}:${space}${serialize(x, space)}`).join(`,${space}`)}${space}}`;
      }
      return JSON.stringify(v) ?? 'null';
    };
    fc.assert(
      fc.property(docArb, fieldsArb, fc.constantFrom('', ' ', '\n', '\t\r\n'), (doc, fields, space) => {
        const text = serialize(doc, space);
        // Poisoning keys are refused by design (tested below), not compared.
        fc.pre(!text.includes('__proto__') && !text.includes('constructor'));
        const expected = JSON.parse(text) as unknown;
        assert.deepEqual(readJsonFields(Buffer.from(text), fields), project(expected, fields));
      }),
      { numRuns: 3000, seed: Number(process.env.FC_SEED ?? Date.now()) % 2 ** 31 },
    );
  });

  it('refuses every truncation of a review with a 400, and does not hang', () => {
    const text = JSON.stringify(JSON.parse(fixture));
    for (let cut = 1; cut < text.length; cut += cut < 200 ? 1 : 37) {
      if (text.slice(0, cut).trim() === '') continue;
      refused(text.slice(0, cut));
    }
  });

  it('refuses malformed JSON in the parts it skips as well as in the parts it keeps', () => {
    const review = (oldObject: string) => `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","oldObject":${oldObject}}}`;
    assert.deepEqual(read(review('{"a":[1,{"b":"c\\"]}"}],"d":null}')), { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u' } });
    refused(review('{"a":[1,2}'), /unbalanced/);
    refused(review('{"a":"unterminated}}'), /unterminated|unbalanced/);
    refused(review('{"a":tru}'.replace('tru}', 'tru\u0001}')), /unexpected/);
    refused(review('nope'), /unexpected/);
    refused(review(''), /expected a value/);
    refused('{"apiVersion":"admission.k8s.io/v1" "kind":"x"}', /expected ','/);
    refused('{"apiVersion":"admission.k8s.io/v1"} trailing', /after the end/);
    refused('{"request":{"uid":01x}}'.replace('01x', '{"a":1'), /./);
    refused('{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",', /./);
    refused('', /empty/);
    refused('   \n', /empty/);
  });

  it('bounds nesting in skipped parts instead of exhausting the stack', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    refused(`{"skipped":${deep}}`, /nesting deeper/);
    refused(`{"request":{"object":{"metadata":${'{"x":'.repeat(600)}1${'}'.repeat(600)}}}}`, /nesting deeper/);
  });

  it('refuses __proto__ members where it reads keys or keeps values, and never materializes one it skips', () => {
    refused('{"apiVersion":"admission.k8s.io/v1","request":{"uid":"x","__proto__":{"polluted":1}}}', /__proto__/);
    refused('{"request":{"\\u005f_proto__":{"polluted":1}}}', /__proto__/);
    refused('{"request":{"object":{"metadata":{"labels":{"__proto__":{"polluted":1}}}}}}', /prototype|__proto__/i);
    refused('{"request":{"userInfo":{"constructor":{"prototype":{"polluted":1}}}}}', /./);
    const kept = read('{"request":{"uid":"x","oldObject":{"__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}}}}');
    assert.deepEqual(kept, { request: { uid: 'x' } });
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  it('hands a body that is no JSON object to the caller whole, so its error can say what it is', () => {
    assert.deepEqual(read('[1,2,3]'), [1, 2, 3]);
    assert.equal(read(' "hello" '), 'hello');
    assert.equal(read('null'), null);
    refused('\u00ff\u00fe{', /not valid JSON/);
  });
});
