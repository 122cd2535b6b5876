// Sidecar templates (gateway/inject/sidecar-template.ts): what a template may
// say, read from a ConfigMap or a file, and every way one is refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTemplate, templateFromConfigMap, templatesFromFile } from '../../../gateway/inject/sidecar-template.js';
import { logs, proxy } from '../../helpers/sidecar-templates.js';


const names = (v: unknown) => (Array.isArray(v) ? v.map((x: { name: string }) => x.name) : []);

describe('sidecar templates', () => {
  it('a full template is read with its defaults', () => {
    assert.equal(proxy.error, undefined);
    assert.equal(proxy.template?.default, true);
    assert.deepEqual(names(proxy.template?.containers), ['proxy']);
    assert.equal(logs.template?.default, false);
    assert.deepEqual(logs.template?.downwardEnv, {});
  });

  const bad: Array<[string, unknown, RegExp]> = [
    ['not an object', 'containers: []', /must be an object/],
    ['no containers', { volumes: [] }, /at least one container/],
    ['a typo in a field', { containers: [{ name: 'a', image: 'x' }], initcontainers: [] }, /unknown field\(s\) initcontainers/],
    ['a container without an image', { containers: [{ name: 'a' }] }, /needs an image/],
    ['an upper-case container name', { containers: [{ name: 'Proxy', image: 'x' }] }, /DNS label/],
    ['a name twice across containers and init containers', { containers: [{ name: 'a', image: 'x' }], initContainers: [{ name: 'a', image: 'y' }] }, /appears twice/],
    ['a volume twice', { containers: [{ name: 'a', image: 'x' }], volumes: [{ name: 'v', emptyDir: {} }, { name: 'v', emptyDir: {} }] }, /volume name "v" appears twice/],
    ['a relative mountPath', { containers: [{ name: 'a', image: 'x', volumeMounts: [{ name: 'v', mountPath: 'data' }] }] }, /absolute mountPath/],
    ['an env entry without a name', { containers: [{ name: 'a', image: 'x', env: [{ value: '1' }] }] }, /env\[0\] needs a valid name/],
    ['a fieldPath the downward API lacks', { containers: [{ name: 'a', image: 'x' }], downwardEnv: { X: 'spec.containers' } }, /not a pod fieldPath/],
    ['default not a boolean', { default: 'yes', containers: [{ name: 'a', image: 'x' }] }, /default must be true or false/],
    ['containers not a list', { containers: { name: 'a', image: 'x' } }, /containers must be a list/],
  ];
  for (const [what, spec, message] of bad) {
    it(`refuses ${what}`, () => {
      const e = parseTemplate('t', spec);
      assert.equal(e.template, undefined);
      assert.match(e.error ?? '', message);
    });
  }

  it('keeps the default flag of an invalid template, so its pods still get a warning', () => {
    const e = parseTemplate('broken', { default: true, containers: [{ name: 'a' }] });
    assert.equal(e.default, true);
    assert.ok(e.error);
  });

  it('refuses a template name that is not a DNS label', () => {
    assert.match(parseTemplate('My_Proxy', { containers: [{ name: 'a', image: 'x' }] }).error ?? '', /template name/);
  });

  it('accepts downward API label and annotation paths', () => {
    const e = parseTemplate('t', { containers: [{ name: 'a', image: 'x' }], downwardEnv: { APP: "metadata.labels['app']", REV: "metadata.annotations['example.com/rev']" } });
    assert.equal(e.error, undefined);
  });

  it('reads a ConfigMap: the name is the ConfigMap\'s, the template is YAML under sidecar.yaml', () => {
    const e = templateFromConfigMap({ metadata: { name: 'logs' }, data: { 'sidecar.yaml': 'containers:\n  - name: shipper\n    image: fluent-bit:3\n' } });
    assert.equal(e.name, 'logs');
    assert.deepEqual(names(e.template?.containers), ['shipper']);
    assert.match(templateFromConfigMap({ metadata: { name: 'x' }, data: {} }).error ?? '', /no data key sidecar\.yaml/);
    assert.match(templateFromConfigMap({ metadata: { name: 'x' }, data: { 'sidecar.yaml': 'a: [' } }).error ?? '', /not YAML/);
  });

  it('reads a templates file: a mapping of names to templates', () => {
    const entries = templatesFromFile('proxy:\n  containers: [{ name: proxy, image: envoy }]\nbad:\n  containers: []\n', 'f.yaml');
    assert.deepEqual(entries.map((e) => [e.name, Boolean(e.template)]), [['proxy', true], ['bad', false]]);
    assert.deepEqual(templatesFromFile('', 'f.yaml'), []);
    assert.throws(() => templatesFromFile('- a\n- b\n', 'f.yaml'), /must map template names/);
  });

  it('reads the namespaces field, and refuses a malformed one', () => {
    const payments = parseTemplate('vault', { default: true, namespaces: ['payments', 'billing'], containers: [{ name: 'vault-agent', image: 'vault:1.17' }] });
    assert.deepEqual(payments.template?.namespaces, ['payments', 'billing']);
    assert.deepEqual(payments.namespaces, ['payments', 'billing']);
    assert.match(parseTemplate('t', { namespaces: [], containers: [{ name: 'a', image: 'x' }] }).error ?? '', /non-empty list/);
    assert.match(parseTemplate('t', { namespaces: 'payments', containers: [{ name: 'a', image: 'x' }] }).error ?? '', /non-empty list/);
    assert.match(parseTemplate('t', { namespaces: ['Payments'], containers: [{ name: 'a', image: 'x' }] }).error ?? '', /namespaces\[0\] must be a DNS label/);
  });
});
