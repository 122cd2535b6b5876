// The install paths as the e2e suite applies them: deploy/ rendered by
// kustomize (the cluster's kubectl) and the Helm chart (helm from the Go module
// proxy, built once and cached by test/deploy/build-helm.sh), in namespace
// oversell, as lists of objects.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import yaml from 'js-yaml';
import { REPO, cluster } from './cluster.js';

export type Obj = KubernetesObject & Record<string, unknown>;
export interface Render {
  path: 'kustomize' | 'helm';
  docs: Obj[];
}

export function render(path: Render['path'], namespace = 'oversell'): Render {
  const text = path === 'kustomize'
    ? cluster('kubectl', 'kustomize', join(REPO, 'deploy'))
    : (() => {
      execFileSync('bash', [join(REPO, 'test/deploy/build-helm.sh')], { stdio: ['ignore', 'ignore', 'inherit'] });
      const helm = execFileSync('bash', [join(REPO, 'test/deploy/build-helm.sh'), '--print-path'], { encoding: 'utf8' }).trim();
      return execFileSync(helm, ['template', 'oversell', join(REPO, 'deploy/helm/oversell'), '--namespace', namespace], { encoding: 'utf8' });
    })();
  return { path, docs: yaml.loadAll(text).filter((d): d is Obj => typeof d === 'object' && d !== null) };
}

/** A copy of the render's one object of this kind (and name, if given); fails the test when there is none. */
export function one(r: Render, kind: string, name?: string): Obj {
  const o = r.docs.find((d) => d.kind === kind && (name === undefined || d.metadata?.name === name));
  assert.ok(o, `${r.path} renders no ${kind}${name === undefined ? '' : `/${name}`}`);
  return structuredClone(o);
}
