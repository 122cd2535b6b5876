// Checks rendered oversell manifests (kustomize or helm output) without a
// cluster: every document parses and is a well-formed object that passes its
// schema (Kubernetes OpenAPI via kubernetes-models, cert-manager's CRDs via
// @kubernetes-models/cert-manager, OversellPolicy via our CRD's
// openAPIV3Schema with ajv; CEL rules and unknown fields are left to the API
// server), names are unique, namespaced objects sit in the install namespace, references resolve
// (bindings, Services, PDB, webhook -> Service -> container port), and the
// properties docs/install.md promises hold. Given several renders of the same
// certificate mode, they must contain the same objects, grant the same RBAC
// rules to the same subjects, and ship the same NetworkPolicy and
// ValidatingAdmissionPolicy. Every RBAC rule must be a row of the table in
// docs/install.md ("What oversell may do in the cluster"), and every row of
// that table for this mode must be rendered. With --monitoring on, every
// render has the monitoring objects (ServiceMonitor, PodMonitor,
// PrometheusRule, the Grafana dashboard ConfigMap: kustomize's
// deploy/monitoring Component, Helm's monitoring.enabled), pointing at the
// gateway and agents of that render, and the renders agree on their specs
// and the dashboard; with --monitoring off (the default) no render has any.
// With --metrics-api on (kustomize's deploy/components/metrics-api or
// metrics-api-cert-manager, Helm's metricsApi.enabled) every render serves the
// metrics API: the APIService v1beta1.metrics.k8s.io -> Service -> the
// gateway's port 4443 and env, its RBAC and CA injection for the mode, and
// Helm's give-back hook (hook objects are checked apart: kustomize has none);
// with it off, none of that.
//
// Usage: node test/deploy/manifests.mjs --mode self-managed|cert-manager
//          --namespace NS [--monitoring on|off] [--agent-pod-read on|off] [--metrics-api on|off]
//          [--tools DIR] LABEL=FILE [LABEL=FILE...]
//        node test/deploy/manifests.mjs --parse-only [--tools DIR] FILE...
//   DIR: where test/deploy/tools is installed (its node_modules has `yaml`).
//   --parse-only: only that every document parses, is a well-formed object and
//   passes its schema.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const [v] = args.splice(i, 2).slice(1);
  return v;
};
const parseOnly = args.includes('--parse-only') && args.splice(args.indexOf('--parse-only'), 1).length > 0;
const mode = opt('mode');
const ns = opt('namespace');
const monitoring = opt('monitoring') ?? 'off';
// The opt-in cluster-wide pod read for agents (deploy/agent-pod-read, Helm agent.podRead).
const agentPodRead = opt('agent-pod-read') ?? 'off';
// The metrics API (deploy/components/metrics-api*, Helm metricsApi.enabled).
const metricsApi = opt('metrics-api') ?? 'off';
const tools = opt('tools') ?? join(import.meta.dirname, 'tools');
if (args.length === 0 || !parseOnly && (!['self-managed', 'cert-manager'].includes(mode) || !ns || !['on', 'off'].includes(monitoring) || !['on', 'off'].includes(agentPodRead) || !['on', 'off'].includes(metricsApi))) {
  console.error('usage: manifests.mjs --mode self-managed|cert-manager --namespace NS [--monitoring on|off] [--agent-pod-read on|off] [--metrics-api on|off] [--tools DIR] LABEL=FILE...');
  console.error('       manifests.mjs --parse-only [--tools DIR] FILE...');
  process.exit(2);
}
const toolsRequire = createRequire(join(tools, 'node_modules', 'x.js'));
const { parseAllDocuments } = toolsRequire('yaml');
const toolImport = async (name) => {
  const m = await import(pathToFileURL(toolsRequire.resolve(name)).href);
  return { ...m.default, ...m };
};

const CLUSTER_SCOPED = new Set([
  'Namespace', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding',
  'MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration', 'OversellPolicy', 'PriorityClass',
  'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'APIService',
]);
// Events about Nodes live in the namespace default: the gateway's one Role outside its own.
// With the metrics API, the binding to the API server's own authentication reader in kube-system.
const OUTSIDE_NAMESPACE = new Set(['Role/default/oversell-gateway-events', 'RoleBinding/default/oversell-gateway-events', 'RoleBinding/kube-system/oversell-gateway-auth-reader']);
// Roles the API server bootstraps, that a render binds without rendering (their rules as Kubernetes defines them).
const BUILTIN_ROLES = {
  'Role/kube-system/extension-apiserver-authentication-reader': [{ apiGroups: [''], resources: ['configmaps'], resourceNames: ['extension-apiserver-authentication'], verbs: ['get', 'list', 'watch'] }],
};
const builtinRole = (b) => {
  const rules = BUILTIN_ROLES[`${b.roleRef.kind}/${b.kind === 'RoleBinding' ? `${b.metadata.namespace}/` : ''}${b.roleRef.name}`];
  return rules && { kind: b.roleRef.kind, metadata: { name: b.roleRef.name, namespace: b.metadata.namespace }, rules };
};
// Helm hooks (the metrics API's take-over and give-back Jobs and their RBAC): not release objects, checked apart.
const isHook = (o) => o.metadata?.annotations?.['helm.sh/hook'] !== undefined;
const METRICS_APISERVICE = 'v1beta1.metrics.k8s.io';
const DNS_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const RBAC_KINDS = new Set(['Role', 'ClusterRole', 'RoleBinding', 'ClusterRoleBinding']);
const RBAC_NAME = /^[^/%]+$/;

let failures = 0;
const fail = (where, msg) => { failures++; console.log(`  FAIL ${where}: ${msg}`); };
const check = (where, ok, msg) => { if (!ok) fail(where, msg); };

const id = (o) => `${o.kind}/${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name}`;
const matches = (selector = {}, labels = {}) =>
  Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);

async function load(label, file) {
  const objects = [];
  for (const [i, doc] of parseAllDocuments(readFileSync(file, 'utf8')).entries()) {
    const where = `${label} document ${i + 1}`;
    if (doc.errors.length) { fail(where, `YAML: ${doc.errors.map((e) => e.message).join('; ')}`); continue; }
    const o = doc.toJS();
    if (o === null || o === undefined) continue; // empty document (a bare ---)
    if (typeof o !== 'object' || Array.isArray(o)) { fail(where, 'not a mapping'); continue; }
    if (!(typeof o.apiVersion === 'string' && typeof o.kind === 'string')) { fail(where, 'no apiVersion or kind'); continue; }
    // RBAC objects take path-segment names (oversell:aggregated-metrics-reader); everything else here a DNS name.
    const nameOk = RBAC_KINDS.has(o.kind) ? RBAC_NAME.test(o.metadata?.name ?? '') && !['.', '..'].includes(o.metadata.name) : DNS_NAME.test(o.metadata?.name ?? '');
    check(where, typeof o.metadata?.name === 'string' && nameOk, `bad metadata.name ${JSON.stringify(o.metadata?.name)}`);
    const errors = await schemaErrors(o);
    check(`${label} ${id(o)}`, !errors, `schema: ${errors}`);
    objects.push(o);
  }
  return objects;
}

// ------------------------------------------------------------------ schemas
// OversellPolicy: the CRD's structural schema, in JSON Schema draft 7 terms
// (OpenAPI v3.0's boolean exclusiveMinimum/Maximum become numbers).
function draft7(schema) {
  if (Array.isArray(schema)) return schema.map(draft7);
  if (schema === null || typeof schema !== 'object') return schema;
  const out = {};
  for (const [k, v] of Object.entries(schema)) {
    if (k.startsWith('x-kubernetes-')) continue;
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v).map(([p, ps]) => [p, draft7(ps)])) : draft7(v);
  }
  for (const [flag, bound] of [['exclusiveMinimum', 'minimum'], ['exclusiveMaximum', 'maximum']]) {
    if (out[flag] === true) { out[flag] = out[bound]; delete out[bound]; } else if (out[flag] === false) delete out[flag];
  }
  return out;
}
const REPO = join(import.meta.dirname, '..', '..');
let crdValidate;
/** The agent's command as deploy/base/agent.yaml ships it: what bench/ starts the agent with (bench/processes.ts). */
function baseAgentCommand() {
  const ds = parseAllDocuments(readFileSync(join(REPO, 'deploy/base/agent.yaml'), 'utf8')).map((d) => d.toJS()).find((d) => d?.kind === 'DaemonSet');
  return ds?.spec.template.spec.containers.find((x) => x.name === 'agent')?.command;
}
async function oversellPolicyValidator() {
  if (!crdValidate) {
    const { default: Ajv } = await toolImport('ajv');
    const crd = parseAllDocuments(readFileSync(join(REPO, 'deploy/base/crd.yaml'), 'utf8'))[0].toJS();
    const version = crd.spec.versions.find((v) => v.storage);
    crdValidate = new Ajv({ strict: false, allErrors: true }).compile(draft7(version.schema.openAPIV3Schema));
  }
  return crdValidate;
}
const MODELS = {
  'cert-manager.io': '@kubernetes-models/cert-manager/cert-manager.io',
  'monitoring.coreos.com': '@kubernetes-models/prometheus-operator/monitoring.coreos.com',
};
async function schemaErrors(o) {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  if (group === 'oversell.io') {
    const validate = await oversellPolicyValidator();
    return validate(o) ? undefined : validate.errors.map((e) => `${e.instancePath} ${e.message}`).join('; ');
  }
  const base = MODELS[group] ?? (group ? `kubernetes-models/${group}` : 'kubernetes-models');
  let Model;
  try {
    Model = (await toolImport(`${base}/${version}`))[o.kind];
  } catch {
    return `no schema for ${o.apiVersion}`;
  }
  if (typeof Model !== 'function') return `no schema for ${o.apiVersion} ${o.kind}`;
  try {
    new Model(o).validate();
  } catch (e) {
    return e.message;
  }
  return undefined;
}

// ---------------------------------------------------------------- RBAC table
// Every rule as (subject | verb | resource | scope | names), one per verb and
// resource. Subjects: gateway, agent, or the name of a role bound to nobody
// (oversell-viewer, for users). The install namespace is written "oversell".
const SUBJECTS = { 'oversell-gateway': 'gateway', 'oversell-agent': 'agent', 'oversell-metrics-api-handover': 'metrics API handover' };
const resourceName = (group, resource) => {
  const [plural, sub] = resource.split('/');
  return `${plural}${group ? `.${group}` : ''}${sub ? `/${sub}` : ''}`;
};
// JSON with sorted keys and whitespace runs as one space: kustomize reorders
// keys and re-folds long strings (CEL), helm keeps the template's text.
const canonical = (v) => JSON.stringify(v, (_, x) => {
  if (typeof x === 'string') return x.replace(/\s+/g, ' ');
  return x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b))) : x;
});
const tuple = (t) => [t.subject, t.verb, t.resource, t.scope, t.names].join(' | ');

function grantedRules(objects, installNamespace) {
  const out = new Set();
  const expand = (subject, scope, rule) => {
    for (const group of rule.apiGroups ?? []) for (const resource of rule.resources ?? []) for (const verb of rule.verbs ?? []) {
      out.add(tuple({ subject, verb, resource: resourceName(group, resource), scope, names: (rule.resourceNames ?? []).slice().sort().join(', ') || '-' }));
    }
  };
  const scopeOf = (o) => (o.kind.startsWith('Cluster') ? 'cluster' : `namespace ${o.metadata.namespace === installNamespace ? 'oversell' : o.metadata.namespace}`);
  const bound = new Set();
  for (const b of objects.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')) {
    const role = objects.find((o) => o.kind === b.roleRef.kind && o.metadata.name === b.roleRef.name && (o.kind === 'ClusterRole' || o.metadata.namespace === b.metadata.namespace)) ?? builtinRole(b);
    if (!role) continue; // reported by verify()
    bound.add(id(role));
    for (const s of b.subjects ?? []) for (const r of role.rules ?? []) expand(SUBJECTS[s.name] ?? `${s.kind} ${s.name}`, scopeOf(b), r);
  }
  for (const role of objects.filter((o) => (o.kind === 'Role' || o.kind === 'ClusterRole') && !bound.has(id(o)))) {
    for (const r of role.rules ?? []) expand(role.metadata.name, scopeOf(role), r);
  }
  return out;
}

/** The rows of the table under "## What oversell may do in the cluster" in docs/install.md, for a certificate mode. */
function documentedRules(markdown, certificateMode, installs) {
  const section = markdown.split(/^## /m).find((x) => x.startsWith('What oversell may do in the cluster'));
  if (!section) throw new Error('docs/install.md has no section "## What oversell may do in the cluster"');
  const rows = section.split('\n').filter((l) => l.startsWith('|')).slice(2)
    .map((l) => l.slice(1, -1).split('|').map((c) => c.trim().replaceAll('`', '')));
  const out = new Set();
  for (const [subject, verbs, resource, scope, names, installed] of rows) {
    if (!(installs ?? ['both', certificateMode, ...(agentPodRead === 'on' ? ['agent pod read'] : []), ...(metricsApi === 'on' ? ['metrics API', `metrics API, ${certificateMode}`] : [])]).includes(installed)) continue;
    for (const verb of verbs.split(',').map((v) => v.trim())) out.add(tuple({ subject, verb, resource, scope, names: names.split(',').map((n) => n.trim()).sort().join(', ') }));
  }
  if (out.size === 0) throw new Error('the RBAC table in docs/install.md has no rows');
  return out;
}

function verifyRbacTable(label, objects, installs) {
  const granted = grantedRules(objects, ns);
  const documented = documentedRules(readFileSync(join(REPO, 'docs/install.md'), 'utf8'), mode, installs);
  for (const t of granted) check(label, documented.has(t), `RBAC rule not justified in docs/install.md ("What oversell may do in the cluster"): ${t}`);
  for (const t of documented) check(label, granted.has(t), `docs/install.md lists an RBAC rule this install does not grant (${mode}): ${t}`);
  return granted;
}

// ------------------------------------------------ the caBundle-only policy
function verifyCaBundlePolicy(label, objects, webhookConfiguration) {
  const policy = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name === 'oversell-gateway-cabundle-only');
  const binding = objects.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.metadata.name === 'oversell-gateway-cabundle-only');
  check(label, policy && binding, 'self-managed: a ValidatingAdmissionPolicy and its binding limit the gateway to the caBundle');
  if (!policy || !binding) return;
  const where = `${label} ${id(policy)}`;
  check(where, binding.spec.policyName === policy.metadata.name && binding.spec.validationActions?.join() === 'Deny' && !binding.spec.matchResources, 'bound with validationActions [Deny], everywhere');
  check(where, policy.spec.failurePolicy === 'Fail', 'failurePolicy Fail');
  const rule = policy.spec.matchConstraints?.resourceRules ?? [];
  check(where, rule.length === 1 && rule[0].resources?.join() === 'mutatingwebhookconfigurations' && rule[0].resourceNames?.join() === webhookConfiguration && rule[0].operations?.includes('UPDATE'), `matches UPDATE of the MutatingWebhookConfiguration ${webhookConfiguration}`);
  const who = policy.spec.matchConditions?.map((c) => c.expression).join(' ');
  check(where, who === `request.userInfo.username == 'system:serviceaccount:${ns}:oversell-gateway'`, `applies to the gateway's ServiceAccount in ${ns}: ${who}`);
  const cel = policy.spec.validations?.map((v) => v.expression).join('\n') ?? '';
  for (const field of ['rules', 'namespaceSelector', 'objectSelector', 'matchConditions', 'failurePolicy', 'sideEffects', 'timeoutSeconds', 'reinvocationPolicy', 'admissionReviewVersions', 'matchPolicy', 'clientConfig.service', 'clientConfig.url']) {
    check(where, cel.includes(`w.${field} == o.${field}`), `does not compare ${field}`);
  }
  check(where, !cel.includes('caBundle'), 'must leave clientConfig.caBundle free to change');
}

// What the gateway's ServiceAccount may change, down to fields and names
// (deploy/base/gateway-policy.yaml), in every certificate mode.
function verifyGatewayPolicies(label, objects) {
  const pair = (name) => {
    const policy = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name === name);
    const binding = objects.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.metadata.name === name);
    check(label, policy && binding, `missing ValidatingAdmissionPolicy ${name} or its binding`);
    if (!policy || !binding) return undefined;
    const where = `${label} ${id(policy)}`;
    check(where, binding.spec.policyName === name && binding.spec.validationActions?.join() === 'Deny' && !binding.spec.matchResources, 'bound with validationActions [Deny], everywhere');
    check(where, policy.spec.failurePolicy === 'Fail', 'failurePolicy Fail');
    const who = policy.spec.matchConditions?.map((c) => c.expression).join(' ');
    check(where, who === `request.userInfo.username == 'system:serviceaccount:${ns}:oversell-gateway'`, `applies to the gateway's ServiceAccount in ${ns}: ${who}`);
    return { where, policy, cel: policy.spec.validations?.map((v) => v.expression).join('\n') ?? '' };
  };
  const status = pair('oversell-gateway-node-status');
  if (status) {
    const rules = status.policy.spec.matchConstraints?.resourceRules ?? [];
    check(status.where, rules.length === 1 && rules[0].resources?.join() === 'nodes/status' && rules[0].operations?.join() === 'UPDATE', 'matches UPDATE of nodes/status (a patch arrives as UPDATE)');
    for (const field of ['labels', 'ownerReferences', 'finalizers', 'spec', 'capacity', 'conditions', 'addresses', 'phase', 'daemonEndpoints', 'nodeInfo', 'images', 'volumesInUse', 'volumesAttached', 'config', 'runtimeHandlers']) {
      check(status.where, new RegExp(`object\\.(metadata|status)?\\.?${field} == oldObject\\.(metadata|status)?\\.?${field}`).test(status.cel), `does not compare ${field}`);
    }
    for (const must of ["k.startsWith('oversell.io/')", "'oversell.io/raw-allocatable-cpu', 'oversell.io/raw-allocatable-memory'", "r in ['cpu', 'memory']", 'compareTo(quantity(variables.oldAllocatable[r])) <= 0', "compareTo(quantity(variables.oldAnnotations['oversell.io/raw-allocatable-' + r])) >= 0"]) {
      check(status.where, status.cel.includes(must), `does not check ${must}`);
    }
  }
  const own = pair('oversell-gateway-own-objects');
  if (own) {
    const rules = own.policy.spec.matchConstraints?.resourceRules ?? [];
    const matched = rules.flatMap((r) => r.resources ?? []).sort().join();
    check(own.where, matched === 'configmaps,leases,secrets' && rules.every((r) => r.operations?.join() === 'CREATE,UPDATE'), `matches CREATE and UPDATE of configmaps, secrets, leases (got ${matched})`);
    const secrets = own.policy.spec.variables?.find((v) => v.name === 'secrets')?.expression.replace(/\s+/g, '');
    const want = mode === 'self-managed' ? "['oversell-gateway-proof-key','oversell-gateway-tls']" : "['oversell-gateway-proof-key']";
    check(own.where, secrets === want, `Secrets the gateway may create (${mode}): ${secrets} (want ${want})`);
    check(own.where, own.cel.includes(`request.namespace == '${ns}'`) && own.cel.includes('oversell.io/sidecar-template'), `only in ${ns}, and never a sidecar template`);
  }
  // The gateway's RBAC lets it create Events in default: only the one kind it writes.
  const events = pair('oversell-gateway-node-events');
  if (events) {
    const rules = events.policy.spec.matchConstraints?.resourceRules ?? [];
    check(events.where, rules.length === 2 && rules.every((r) => r.resources?.join() === 'events' && r.operations?.join() === 'CREATE,UPDATE') && rules.map((r) => r.apiGroups?.join()).sort().join() === ',events.k8s.io', 'matches CREATE and UPDATE of events in both groups');
    for (const must of ["object.involvedObject.kind == 'Node'", "object.reason in ['BoundRequestsOverCap', 'PodRelieved']", "object.source.component == 'oversell-gateway'", "object.reportingComponent == 'oversell.io/gateway'", "request.resource.group == ''"]) {
      check(events.where, events.cel.includes(must), `does not check ${must}`);
    }
  }
}

// ------------------------------- images fixed in required sidecar namespaces
// deploy/base/required-pod-images.yaml: in namespaces labelled
// oversell.io/inject=required (exactly those of required-pods.oversell.io),
// an UPDATE of a pod may not change a container's or init container's image.
function verifyRequiredPodImages(label, objects, requiredHook) {
  const name = 'oversell-required-pod-images';
  const policy = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name === name);
  const binding = objects.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.metadata.name === name);
  check(label, policy && binding, `missing ValidatingAdmissionPolicy ${name} or its binding (pod images in namespaces that require their sidecars)`);
  if (!policy || !binding) return;
  const where = `${label} ${id(policy)}`;
  check(where, policy.spec.failurePolicy === 'Fail', 'failurePolicy Fail');
  const rules = policy.spec.matchConstraints?.resourceRules ?? [];
  check(where, rules.length === 1 && rules[0].resources?.join() === 'pods' && rules[0].operations?.join() === 'UPDATE' && rules[0].apiGroups?.join() === '', 'matches UPDATE of pods (not its subresources), nothing else');
  check(where, !policy.spec.matchConditions, 'exempts no one (no matchConditions)');
  const cel = [...(policy.spec.variables ?? []), ...(policy.spec.validations ?? [])].map((v) => v.expression).join('\n');
  for (const list of ['containers', 'initContainers']) check(where, cel.includes(`object.spec.${list}.filter(c, oldObject.spec.${list}.exists(o, o.name == c.name && o.image != c.image))`), `compares the images of ${list}`);
  check(where, binding.spec.policyName === name && binding.spec.validationActions?.join() === 'Deny', 'bound with validationActions [Deny]');
  check(where, canonical(binding.spec.matchResources?.namespaceSelector) === canonical(requiredHook?.namespaceSelector), `bound to the namespaces of required-pods.oversell.io: ${JSON.stringify(binding.spec.matchResources?.namespaceSelector)}`);
}

// --------------------------------------------------------- NetworkPolicy
function verifyNetworkPolicy(label, objects, gatewayLabels, ports) {
  const np = objects.find((o) => o.kind === 'NetworkPolicy' && o.metadata.name === 'oversell-gateway');
  check(label, np, 'missing NetworkPolicy/oversell-gateway');
  if (!np) return;
  const where = `${label} ${id(np)}`;
  check(where, matches(np.spec.podSelector?.matchLabels, gatewayLabels) && np.spec.policyTypes?.join() === 'Ingress', 'selects the gateway pods, Ingress');
  const portsOf = (r) => (r.ports ?? []).map((p) => p.port);
  const allowed = np.spec.ingress.flatMap(portsOf);
  // Every container port is reachable by someone, and nothing else is opened.
  check(where, Object.values(ports).every((p) => allowed.includes(p)) && allowed.every((p) => Object.values(ports).includes(p)), `ports ${allowed} (container ports ${Object.values(ports)})`);
  const agentLabels = objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'oversell-agent')?.spec.template.metadata.labels;
  for (const r of np.spec.ingress) {
    const p = portsOf(r);
    if (p.includes(ports.agent)) {
      check(where, r.from?.length === 1 && !r.from[0].namespaceSelector && matches(r.from[0].podSelector?.matchLabels, agentLabels), `port ${ports.agent} (agent streams) from agent pods only`);
    }
    if (p.includes(ports.grpc)) {
      // Query callers: one peer with both selectors (AND). A namespaceSelector
      // alone, or a podSelector with namespaceSelector {}, would let a pod's
      // author grant access by labelling the pod.
      // Agents stream to the agent port only: an agent pod (a compromised
      // node) has no business with the query API, health or reflection.
      const queryPeer = (f) => f.namespaceSelector?.matchLabels?.['oversell.io/query'] === 'allowed' && f.podSelector?.matchLabels?.['oversell.io/query'] === 'allowed';
      check(where, r.from?.length > 0 && r.from.every(queryPeer), `port ${ports.grpc} (query API, health, reflection) only from pods labelled oversell.io/query=allowed in namespaces labelled so, not from agent pods: ${JSON.stringify(r.from)}`);
    }
    if (p.includes(ports.metrics)) {
      check(where, r.from?.length > 0 && r.from.every((f) => f.namespaceSelector?.matchLabels?.['oversell.io/metrics'] === 'allowed' && !f.podSelector), `port ${ports.metrics} (metrics) only from namespaces labelled oversell.io/metrics=allowed`);
    }
    // The API server calls the webhook and (its aggregation proxy) the metrics API.
    const apiServerPorts = [ports.webhook, ports['metrics-api']].filter((x) => x !== undefined);
    check(where, r.from?.length > 0 || (p.length === 1 && apiServerPorts.includes(p[0])), 'only the webhook and metrics API ports are open to anywhere');
    check(where, !p.includes(ports['metrics-api']) || p.length === 1 && (!r.from || r.from.every((f) => f.ipBlock)), `port ${ports['metrics-api']} (metrics API) in a rule of its own, from anywhere or networkPolicy.webhookFromCIDRs`);
  }
}

// ------------------------------------------------------------ metrics API
function verifyMetricsApi(label, objects) {
  const where = (o) => `${label} ${id(o)}`;
  const get = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const apiService = get('APIService', METRICS_APISERVICE);
  const reader = get('ClusterRole', 'oversell:aggregated-metrics-reader');
  const authReader = get('RoleBinding', 'oversell-gateway-auth-reader');
  const vap = get('ValidatingAdmissionPolicy', 'oversell-gateway-apiservice-cabundle-only');
  if (metricsApi === 'off') {
    for (const o of [apiService, reader, authReader, vap, get('ClusterRole', 'oversell-gateway-apiservice')]) if (o) fail(where(o), 'a metrics API object with --metrics-api off (it must be opt-in: it replaces metrics-server)');
    return;
  }
  check(label, apiService, `missing APIService/${METRICS_APISERVICE}`);
  if (apiService) {
    const s = apiService.spec ?? {};
    check(where(apiService), s.group === 'metrics.k8s.io' && s.version === 'v1beta1' && s.groupPriorityMinimum === 100 && s.versionPriority === 100, `group metrics.k8s.io, version v1beta1, priorities 100/100: ${JSON.stringify(s)}`);
    check(where(apiService), !s.caBundle && !s.insecureSkipTLSVerify, 'caBundle injected, never rendered, and TLS always verified (no insecureSkipTLSVerify)');
    const svc = get('Service', s.service?.name);
    const port = svc?.spec.ports.find((p) => p.port === s.service?.port);
    const gw = get('Deployment', 'oversell-gateway');
    const container = gw?.spec.template.spec.containers.find((c) => c.name === 'gateway');
    check(where(apiService), s.service?.name === 'oversell-gateway' && s.service?.namespace === ns && port?.targetPort === 'metrics-api' && container?.ports?.some((p) => p.name === 'metrics-api'), `service ${JSON.stringify(s.service)} -> Service port -> the gateway's metrics-api port`);
    check(where(apiService), apiService.metadata.labels?.['app.kubernetes.io/part-of'] === 'oversell', 'labelled app.kubernetes.io/part-of=oversell: how the take-over and the chart tell ours from metrics-server\'s');
    if (apiService.metadata.labels?.['app.kubernetes.io/managed-by'] === 'Helm') {
      check(where(apiService), apiService.metadata.annotations?.['helm.sh/resource-policy'] === 'keep', 'Helm keeps it (resource-policy keep): the give-back Job removes it, after checking the take-over\'s record on it');
    }
    const inject = apiService.metadata.annotations?.['cert-manager.io/inject-ca-from'];
    if (mode === 'cert-manager') check(where(apiService), inject === `${ns}/oversell-gateway`, `cert-manager injects the caBundle: inject-ca-from ${inject}`);
    else check(where(apiService), !inject, 'no cert-manager annotation in self-managed mode');
  }
  if (reader) {
    const l = reader.metadata.labels ?? {};
    check(where(reader), ['view', 'edit', 'admin'].every((r) => l[`rbac.authorization.k8s.io/aggregate-to-${r}`] === 'true'), 'aggregated into view, edit and admin');
    check(where(reader), canonical(reader.rules) === canonical([{ apiGroups: ['metrics.k8s.io'], resources: ['pods', 'nodes'], verbs: ['get', 'list', 'watch'] }]), `get/list/watch pods and nodes in metrics.k8s.io, nothing else: ${JSON.stringify(reader.rules)}`);
  } else fail(label, 'missing ClusterRole/oversell:aggregated-metrics-reader');
  check(label, authReader?.metadata.namespace === 'kube-system' && authReader.roleRef.name === 'extension-apiserver-authentication-reader' && authReader.subjects?.length === 1 && authReader.subjects[0].name === 'oversell-gateway', 'the gateway reads kube-system/extension-apiserver-authentication (front-proxy CA, allowed names)');
  const gatewayApiService = objects.filter((b) => b.kind === 'ClusterRoleBinding' && b.subjects?.some((x) => x.name === 'oversell-gateway'))
    .flatMap((b) => get('ClusterRole', b.roleRef.name)?.rules ?? []).filter((r) => r.resources?.includes('apiservices'));
  if (mode === 'self-managed') {
    check(label, gatewayApiService.length === 1 && gatewayApiService[0].resourceNames?.join() === METRICS_APISERVICE && gatewayApiService[0].verbs.join() === 'get,update', `gateway: get and update the APIService ${METRICS_APISERVICE} (its caBundle), nothing else: ${JSON.stringify(gatewayApiService)}`);
    const binding = get('ValidatingAdmissionPolicyBinding', 'oversell-gateway-apiservice-cabundle-only');
    check(label, vap && binding, 'self-managed: a ValidatingAdmissionPolicy and its binding limit the gateway to the APIService\'s caBundle');
    if (vap && binding) {
      check(where(vap), binding.spec.policyName === vap.metadata.name && binding.spec.validationActions?.join() === 'Deny' && !binding.spec.matchResources && vap.spec.failurePolicy === 'Fail', 'bound with [Deny] everywhere, failurePolicy Fail');
      const rule = vap.spec.matchConstraints?.resourceRules ?? [];
      check(where(vap), rule.length === 1 && rule[0].resources?.join() === 'apiservices' && rule[0].resourceNames?.join() === METRICS_APISERVICE && rule[0].operations?.includes('UPDATE'), `matches UPDATE of the APIService ${METRICS_APISERVICE}`);
      check(where(vap), vap.spec.matchConditions?.map((c) => c.expression).join() === `request.userInfo.username == 'system:serviceaccount:${ns}:oversell-gateway'`, 'applies to the gateway\'s ServiceAccount');
      const cel = vap.spec.validations?.map((v) => v.expression).join('\n') ?? '';
      for (const field of ['metadata.labels', 'metadata.annotations', 'metadata.ownerReferences', 'metadata.finalizers', 'spec.service', 'spec.group', 'spec.version', 'spec.insecureSkipTLSVerify', 'spec.groupPriorityMinimum', 'spec.versionPriority']) {
        check(where(vap), cel.includes(`object.${field} == oldObject.${field}`), `does not compare ${field}`);
      }
      check(where(vap), !cel.includes('caBundle'), 'must leave spec.caBundle free to change');
    }
  } else {
    check(label, gatewayApiService.length === 0 && !vap, 'cert-manager: the gateway may not change the APIService at all (cert-manager injects its caBundle)');
  }
}

/** Helm's hooks: with the metrics API, the give-back Job (post-delete) and the handover RBAC; nothing else is a hook. */
function verifyHooks(label, hooks, helm) {
  const where = (o) => `${label} ${id(o)}`;
  const want = metricsApi === 'on' && helm;
  const jobs = hooks.filter((o) => o.kind === 'Job');
  for (const o of hooks) check(where(o), want && o.metadata.name.startsWith('oversell-metrics-api-'), 'the only hooks are the metrics API\'s take-over and give-back');
  if (!want) return;
  const giveBack = jobs.find((j) => j.metadata.name === 'oversell-metrics-api-give-back');
  check(label, giveBack?.metadata.annotations['helm.sh/hook'] === 'post-delete', 'the give-back Job runs on helm uninstall (post-delete)');
  // helm template has no cluster: lookup finds no APIService, so there is nothing to take over.
  check(label, !jobs.some((j) => j.metadata.name === 'oversell-metrics-api-take-over'), 'no take-over Job where lookup found no foreign APIService');
  for (const j of jobs) {
    const spec = j.spec.template.spec;
    const c = spec.containers[0];
    check(where(j), spec.serviceAccountName === 'oversell-metrics-api-handover' && spec.restartPolicy === 'Never', 'runs as oversell-metrics-api-handover, restartPolicy Never');
    check(where(j), c.command?.[1] === '/app/dist/gateway/act/apiservice-handover-main.js' && c.command.join(' ').endsWith(`--saved ${ns}/oversell-metrics-api-previous`), `runs the handover against ${ns}/oversell-metrics-api-previous: ${c.command}`);
    check(where(j), spec.securityContext?.runAsNonRoot === true && c.securityContext?.allowPrivilegeEscalation === false && c.securityContext?.readOnlyRootFilesystem === true && c.securityContext?.capabilities?.drop?.includes('ALL') && spec.securityContext?.seccompProfile?.type === 'RuntimeDefault', 'Pod Security restricted');
    check(where(j), j.metadata.annotations['helm.sh/hook-delete-policy'] === 'before-hook-creation,hook-succeeded', 'deleted once it succeeded');
  }
  // RBAC cannot limit the hand-over's create of APIServices by name: its policy does.
  const nameOnly = hooks.find((o) => o.kind === 'ValidatingAdmissionPolicy' && o.metadata.name === 'oversell-metrics-api-handover-name-only');
  const nameOnlyBinding = hooks.find((o) => o.kind === 'ValidatingAdmissionPolicyBinding' && o.metadata.name === 'oversell-metrics-api-handover-name-only');
  check(label, nameOnly && nameOnlyBinding?.spec.validationActions?.join() === 'Deny' && nameOnly.spec.failurePolicy === 'Fail', 'the hand-over\'s APIService creates are limited by a ValidatingAdmissionPolicy, bound Deny, failurePolicy Fail');
  if (nameOnly) {
    check(label, nameOnly.spec.matchConditions?.map((c) => c.expression).join() === `request.userInfo.username == 'system:serviceaccount:${ns}:oversell-metrics-api-handover'` && nameOnly.spec.validations?.map((v) => v.expression).join() === "object.metadata.name == 'v1beta1.metrics.k8s.io'", 'the hand-over\'s ServiceAccount, the one name');
  }
  for (const o of hooks.filter((x) => x.kind !== 'Job')) {
    check(where(o), Number(o.metadata.annotations['helm.sh/hook-weight']) < 0 && o.metadata.annotations['helm.sh/hook'] === giveBack?.metadata.annotations['helm.sh/hook'], 'created before the Jobs, for the same hook events');
  }
  verifyRbacTable(`${label} (hooks)`, hooks, ['metrics API, Helm hook']);
}

// ------------------------------------------------------------- monitoring
const DASHBOARD_FILE = 'deploy/monitoring/grafana-dashboard.json';
const isMonitoring = (o) => o.apiVersion.startsWith('monitoring.coreos.com/') || (o.kind === 'ConfigMap' && o.metadata.labels?.grafana_dashboard !== undefined);

function verifyMonitoring(label, objects) {
  const where = (o) => `${label} ${id(o)}`;
  const found = objects.filter(isMonitoring);
  if (monitoring === 'off') {
    for (const o of found) fail(where(o), 'a monitoring object with monitoring off (it needs the Prometheus operator\'s CRDs)');
    return;
  }
  const want = [`ServiceMonitor/${ns}/oversell-gateway`, `PodMonitor/${ns}/oversell-agent`, `PrometheusRule/${ns}/oversell`, `ConfigMap/${ns}/oversell-grafana-dashboard`];
  check(label, found.map(id).sort().join() === want.slice().sort().join(), `monitoring objects ${found.map(id)} (want ${want})`);
  const get = (kind) => found.find((o) => o.kind === kind);

  const svc = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'oversell-gateway');
  const sm = get('ServiceMonitor');
  if (sm && svc) {
    check(where(sm), matches(sm.spec.selector?.matchLabels, svc.metadata.labels), 'selects the Service oversell-gateway');
    check(where(sm), sm.spec.namespaceSelector?.matchNames?.join() === ns, `namespaceSelector ${JSON.stringify(sm.spec.namespaceSelector)} (want ${ns})`);
    check(where(sm), sm.spec.endpoints?.length === 1 && svc.spec.ports.some((p) => p.name === sm.spec.endpoints[0].port && p.name === 'metrics'), 'scrapes the Service port metrics');
    // The headless Service for agents must yield no targets: it has no port of that name.
    const headless = objects.find((o) => o.kind === 'Service' && o.metadata.name === 'oversell-gateway-agents');
    check(where(sm), !headless || !matches(sm.spec.selector?.matchLabels, headless.metadata.labels) || !headless.spec.ports.some((p) => p.name === 'metrics'), 'the agents\' headless Service yields no metrics targets');
  }
  const ds = objects.find((o) => o.kind === 'DaemonSet' && o.metadata.name === 'oversell-agent');
  const pm = get('PodMonitor');
  if (pm && ds) {
    check(where(pm), matches(pm.spec.selector?.matchLabels, ds.spec.template.metadata.labels), 'selects the agent pods');
    check(where(pm), pm.spec.namespaceSelector?.matchNames?.join() === ns, `namespaceSelector ${JSON.stringify(pm.spec.namespaceSelector)} (want ${ns})`);
  }
  const rule = get('PrometheusRule');
  if (rule) {
    const exprs = (rule.spec.groups ?? []).flatMap((g) => g.rules ?? []).map((r) => r.expr);
    check(where(rule), exprs.length > 0, 'no rules');
    for (const m of exprs.join('\n').matchAll(/namespace="([^"]*)"/g)) check(where(rule), m[1] === ns, `an alert matches namespace="${m[1]}" (want ${ns})`);
  }
  const cm = get('ConfigMap');
  if (cm) {
    check(where(cm), cm.metadata.labels?.grafana_dashboard === '1', 'label grafana_dashboard: "1" (Grafana\'s sidecar)');
    check(where(cm), Object.keys(cm.data ?? {}).join() === 'grafana-dashboard.json' && cm.data['grafana-dashboard.json'] === readFileSync(join(REPO, DASHBOARD_FILE), 'utf8'), `data is ${DASHBOARD_FILE}, byte for byte`);
  }
}

function verify(label, objects) {
  const where = (o) => `${label} ${id(o)}`;
  const get = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);
  const need = (kind, name) => {
    const o = get(kind, name);
    check(label, o, `missing ${kind}/${name}`);
    return o;
  };

  const seen = new Set();
  for (const o of objects) {
    const key = `${o.apiVersion.split('/')[0]}|${id(o)}`;
    check(where(o), !seen.has(key), 'duplicate object');
    seen.add(key);
    if (CLUSTER_SCOPED.has(o.kind)) check(where(o), !o.metadata.namespace, 'cluster-scoped object with a namespace');
    else check(where(o), o.metadata.namespace === ns || OUTSIDE_NAMESPACE.has(id(o)), `namespace ${o.metadata.namespace} (want ${ns})`);
    check(where(o), o.metadata.labels?.['app.kubernetes.io/part-of'] === 'oversell', 'no label app.kubernetes.io/part-of=oversell');
  }
  // Pod Security labels where the render owns the Namespace (kustomize; Helm's
  // release namespace is labelled by hand, docs/install.md): the agent's
  // hostPath needs privileged, everything else is held to restricted by warn and audit.
  const namespace = objects.find((o) => o.kind === 'Namespace');
  if (namespace) {
    const l = namespace.metadata.labels ?? {};
    check(where(namespace), l['pod-security.kubernetes.io/enforce'] === 'privileged' && l['pod-security.kubernetes.io/warn'] === 'restricted' && l['pod-security.kubernetes.io/audit'] === 'restricted',
      `Pod Security labels enforce=privileged (the agent's hostPath), warn and audit=restricted: ${JSON.stringify(l)}`);
  }
  // Nothing may point at another namespace (helm renders into any namespace).
  const text = JSON.stringify(objects);
  for (const m of text.matchAll(/oversell-gateway(?:-agents|-tls)?\.([a-z0-9-]+)\.svc/g)) check(label, m[1] === ns, `reference to namespace ${m[1]}: ${m[0]}`);

  // RBAC: every binding names a role and service accounts that are rendered.
  for (const b of objects.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding')) {
    check(where(b), get(b.roleRef.kind, b.roleRef.name) || builtinRole(b), `roleRef ${b.roleRef.kind}/${b.roleRef.name} not rendered (nor one the API server bootstraps)`);
    for (const s of b.subjects ?? []) {
      check(where(b), s.kind === 'ServiceAccount' && s.namespace === ns && get('ServiceAccount', s.name), `subject ${s.kind} ${s.namespace}/${s.name} not rendered`);
    }
  }
  const rules = (sa) => objects
    .filter((b) => (b.kind === 'RoleBinding' || b.kind === 'ClusterRoleBinding') && b.subjects?.some((s) => s.name === sa))
    .flatMap((b) => ((get(b.roleRef.kind, b.roleRef.name) ?? builtinRole(b))?.rules ?? []).map((r) => ({ ...r, scope: b.kind })));
  const grants = (sa, group, resource, verb, scope) => rules(sa).some((r) =>
    r.apiGroups?.includes(group) && r.resources?.includes(resource) && r.verbs?.includes(verb) && (!scope || r.scope === scope));

  // Gateway.
  const gw = need('Deployment', 'oversell-gateway');
  if (gw) {
    const spec = gw.spec.template.spec;
    const c = spec.containers.find((x) => x.name === 'gateway');
    const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
    const labels = gw.spec.template.metadata.labels;
    check(where(gw), matches(gw.spec.selector.matchLabels, labels), 'selector does not match the pod template');
    check(where(gw), gw.spec.replicas >= 2, `replicas ${gw.spec.replicas} (want >= 2)`);
    // Losing one node must not take every replica: a hard spread over the nodes
    // the gateway may run on, counting only the current ReplicaSet's pods; and
    // no minDomains, which held a rollout's surge pod Pending for good on a
    // one-node cluster (issue 44).
    const spread = spec.topologySpreadConstraints ?? [];
    check(where(gw), spread.some((t) => t.topologyKey === 'kubernetes.io/hostname' && t.whenUnsatisfiable === 'DoNotSchedule' && t.maxSkew === 1 && t.nodeTaintsPolicy === 'Honor' && t.matchLabelKeys?.join() === 'pod-template-hash' && matches(t.labelSelector?.matchLabels, labels)), 'replicas spread across nodes with DoNotSchedule (maxSkew 1, nodeTaintsPolicy Honor, matchLabelKeys pod-template-hash)');
    check(where(gw), spread.every((t) => t.minDomains === undefined), 'no minDomains: a one-node cluster must finish a rollout');
    check(where(gw), c?.readinessProbe?.httpGet?.path === '/readyz' && c?.livenessProbe?.httpGet?.path === '/healthz', 'probes');
    check(where(gw), c?.resources?.requests?.cpu && c?.resources?.requests?.memory && c?.resources?.limits?.memory, 'resource requests/limits');
    check(where(gw), c?.securityContext?.readOnlyRootFilesystem === true && c?.securityContext?.allowPrivilegeEscalation === false, 'readOnlyRootFilesystem / allowPrivilegeEscalation');
    check(where(gw), (spec.securityContext?.runAsNonRoot ?? c?.securityContext?.runAsNonRoot) === true, 'runAsNonRoot');
    check(where(gw), (spec.securityContext?.seccompProfile ?? c?.securityContext?.seccompProfile)?.type === 'RuntimeDefault', 'seccomp RuntimeDefault');
    // Pod Security "restricted" (the namespace warns and audits at it; the e2e
    // admission-policy test has the real API server enforce it on this template).
    check(where(gw), c?.securityContext?.capabilities?.drop?.includes('ALL') && !c?.securityContext?.capabilities?.add?.length && !c?.securityContext?.privileged, 'capabilities: drop ALL, add none, not privileged');
    check(where(gw), !spec.hostNetwork && !spec.hostPID && !spec.hostIPC && !(spec.volumes ?? []).some((v) => v.hostPath) && !(c?.ports ?? []).some((p) => p.hostPort), 'no host namespaces, hostPath volumes or host ports (Pod Security restricted)');
    check(where(gw), env.POD_NAME?.fieldRef?.fieldPath === 'metadata.name' && env.POD_NAMESPACE?.fieldRef?.fieldPath === 'metadata.namespace', 'POD_NAME / POD_NAMESPACE');
    const ports = Object.fromEntries((c?.ports ?? []).map((p) => [p.name, p.containerPort]));
    check(where(gw), ports.webhook === 8443 && ports.grpc === 50051 && ports.agent === 50052 && ports.metrics === 9090, `ports ${JSON.stringify(ports)}`);
    check(where(gw), env.OVERSELL_AGENT_PORT === String(ports.agent), `OVERSELL_AGENT_PORT ${env.OVERSELL_AGENT_PORT} is not the agent container port`);
    if (metricsApi === 'on') {
      check(where(gw), env.OVERSELL_METRICS_API === 'on' && ports['metrics-api'] === 4443 && env.OVERSELL_METRICS_API_PORT === String(ports['metrics-api']), `metrics API: OVERSELL_METRICS_API=on, OVERSELL_METRICS_API_PORT = the metrics-api container port 4443 (${env.OVERSELL_METRICS_API}, ${env.OVERSELL_METRICS_API_PORT}, ${ports['metrics-api']})`);
    } else {
      check(where(gw), env.OVERSELL_METRICS_API === undefined && env.OVERSELL_METRICS_API_PORT === undefined && ports['metrics-api'] === undefined, 'no metrics API env or port with --metrics-api off');
    }
    // Secrets: create (namespace-wide: create cannot be limited by name), otherwise by name only.
    const secretRules = rules('oversell-gateway').filter((r) => r.resources?.includes('secrets'));
    check(label, secretRules.every((r) => r.scope === 'RoleBinding' && (r.resourceNames?.length > 0 || r.verbs.join() === 'create')), 'gateway: Secrets in its namespace, by name except create');
    check(label, secretRules.some((r) => r.resourceNames?.join() === 'oversell-gateway-proof-key' && r.verbs.includes('get')), 'gateway: get the grant-signing key Secret oversell-gateway-proof-key');
    verifyNetworkPolicy(label, objects, labels, ports);
    verifyGatewayPolicies(label, objects);

    const pdb = need('PodDisruptionBudget', 'oversell-gateway');
    if (pdb) check(where(pdb), pdb.spec.minAvailable >= 1 && matches(pdb.spec.selector.matchLabels, labels), 'minAvailable >= 1 selecting the gateway');

    const svc = need('Service', 'oversell-gateway');
    if (svc) {
      check(where(svc), matches(svc.spec.selector, labels), 'selector does not match the gateway pods');
      const sp = Object.fromEntries(svc.spec.ports.map((p) => [p.name, `${p.port}->${p.targetPort}`]));
      check(where(svc), sp.webhook === '443->webhook' && sp.grpc === '50051->grpc' && sp.metrics === '9090->metrics', `ports ${JSON.stringify(sp)}`);
      check(where(svc), (sp['metrics-api'] === '4443->metrics-api') === (metricsApi === 'on') && Object.keys(sp).length === (metricsApi === 'on' ? 4 : 3), `metrics-api port 4443->metrics-api only with --metrics-api on: ${JSON.stringify(sp)}`);
    }
    const headless = need('Service', 'oversell-gateway-agents');
    if (headless) {
      check(where(headless), headless.spec.clusterIP === 'None' && headless.spec.publishNotReadyAddresses === true, 'headless, not-ready replicas listed too (they warm up before /readyz)');
      // Agents dial the port named grpc in its EndpointSlices: the ingest thread's.
      check(where(headless), matches(headless.spec.selector, labels) && headless.spec.ports.some((p) => p.name === 'grpc' && p.port === 50052 && p.targetPort === 'agent'), 'selects the gateway, grpc 50052 -> agent');
    }

    // Certificates.
    const mounts = c?.volumeMounts ?? [];
    const hook = need('MutatingWebhookConfiguration', 'oversell');
    const inject = hook?.metadata.annotations?.['cert-manager.io/inject-ca-from'];
    if (mode === 'self-managed') {
      check(where(gw), env.OVERSELL_TLS_SECRET === `${ns}/oversell-gateway-tls`, `OVERSELL_TLS_SECRET ${env.OVERSELL_TLS_SECRET}`);
      check(where(gw), env.OVERSELL_WEBHOOK_CONFIGURATION === 'oversell', 'OVERSELL_WEBHOOK_CONFIGURATION');
      check(where(gw), !env.OVERSELL_TLS_CERT_FILE && mounts.length === 0 && !spec.volumes?.length, 'no TLS files or volumes in self-managed mode');
      check(label, !inject, 'cert-manager annotation in self-managed mode');
      const secretRules = rules('oversell-gateway').filter((r) => r.resources?.includes('secrets'));
      check(label, secretRules.some((r) => r.resourceNames?.join() === 'oversell-gateway-tls' && ['get', 'update'].every((v) => r.verbs.includes(v))), 'gateway: secrets get/update on oversell-gateway-tls');
      check(label, rules('oversell-gateway').some((r) => r.scope === 'ClusterRoleBinding' && r.resources?.includes('mutatingwebhookconfigurations') && r.resourceNames?.join() === 'oversell' && r.verbs.join() === 'get,patch'), 'gateway: get and patch the webhook configuration oversell, nothing else');
      verifyCaBundlePolicy(label, objects, env.OVERSELL_WEBHOOK_CONFIGURATION);
      check(label, !objects.some((o) => o.apiVersion.startsWith('cert-manager.io/')), 'cert-manager objects in self-managed mode');
    } else {
      check(where(gw), env.OVERSELL_TLS_CERT_FILE === '/etc/oversell/tls/tls.crt' && env.OVERSELL_TLS_KEY_FILE === '/etc/oversell/tls/tls.key', 'TLS file env');
      const vol = spec.volumes?.find((v) => v.secret?.secretName === 'oversell-gateway-tls');
      check(where(gw), vol && mounts.some((m) => m.name === vol.name && m.mountPath === '/etc/oversell/tls' && m.readOnly === true), 'Secret oversell-gateway-tls mounted read-only at /etc/oversell/tls');
      check(where(gw), !env.OVERSELL_TLS_SECRET, 'OVERSELL_TLS_SECRET in cert-manager mode');
      check(label, inject === `${ns}/oversell-gateway`, `inject-ca-from ${inject}`);
      const cert = need('Certificate', 'oversell-gateway');
      if (cert) {
        check(where(cert), cert.spec.secretName === 'oversell-gateway-tls', 'secretName');
        const names = [`oversell-gateway.${ns}.svc`, `oversell-gateway.${ns}.svc.cluster.local`];
        check(where(cert), names.every((n) => cert.spec.dnsNames?.includes(n)), `dnsNames ${cert.spec.dnsNames}`);
        const issuer = need('Issuer', cert.spec.issuerRef.name);
        const caCert = issuer && need('Certificate', 'oversell-ca');
        check(where(cert), issuer?.spec.ca?.secretName && caCert?.spec.secretName === issuer.spec.ca.secretName && caCert.spec.isCA === true, 'signed by a CA Issuer backed by the CA Certificate');
        if (caCert) check(where(caCert), get('Issuer', caCert.spec.issuerRef.name)?.spec.selfSigned, 'CA issued by a self-signed Issuer');
      }
      check(label, !rules('oversell-gateway').some((r) => r.resources?.includes('mutatingwebhookconfigurations')), 'gateway needs no webhook RBAC with cert-manager');
      check(label, rules('oversell-gateway').filter((r) => r.resources?.includes('secrets')).every((r) => r.verbs.join() === 'create' || r.resourceNames?.join() === 'oversell-gateway-proof-key'), 'gateway: with cert-manager, Secrets only for the grant-signing key');
      check(label, !objects.some((o) => o.kind.startsWith('ValidatingAdmissionPolicy') && o.metadata.name === 'oversell-gateway-cabundle-only'), 'no caBundle policy with cert-manager: the gateway cannot change the webhook configuration at all');
    }

    // Webhook -> Service -> container port.
    if (hook) {
      const w = hook.webhooks?.find((x) => x.name === 'nodes.oversell.io') ?? {};
      check(where(hook), w.name, 'webhook nodes.oversell.io');
      check(where(hook), w.failurePolicy === 'Ignore', `failurePolicy ${w.failurePolicy} (the default must be Ignore)`);
      // The gateway records raw allocatable on real writes only: NoneOnDryRun, not None.
      check(where(hook), w.timeoutSeconds === 2 && w.sideEffects === 'NoneOnDryRun', `timeoutSeconds 2, sideEffects NoneOnDryRun (got ${w.sideEffects})`);
      check(where(hook), w.objectSelector?.matchLabels?.['oversell.io/enabled'] === 'true', 'opt-in objectSelector');
      check(where(hook), w.matchConditions?.some((c) => c.expression === "request.userInfo.username == 'system:node:' + object.metadata.name"), 'matchConditions: only the node\'s own kubelet');
      const s = w.clientConfig?.service;
      check(where(hook), s?.name === 'oversell-gateway' && s?.namespace === ns && s?.port === 443 && s?.path === '/mutate/nodes', `clientConfig.service ${JSON.stringify(s)}`);
      for (const x of hook.webhooks ?? []) check(where(hook), !x.clientConfig?.caBundle, `${x.name}: caBundle must be injected, not rendered`);

      // Sidecar injection (docs/sidecars.md): three pod entries, each pod reaches at most one.
      const pods = Object.fromEntries((hook.webhooks ?? []).filter((x) => x.clientConfig?.service?.path?.startsWith('/mutate/pods')).map((x) => [x.name, x]));
      check(where(hook), Object.keys(pods).sort().join() === 'annotated-pods.oversell.io,pods.oversell.io,required-pods.oversell.io', `pod webhooks ${Object.keys(pods)}`);
      const injectValues = (x) => x?.namespaceSelector?.matchExpressions?.find((e) => e.key === 'oversell.io/inject');
      for (const [name, x] of Object.entries(pods)) {
        const sp = x.clientConfig.service;
        check(where(hook), sp.name === 'oversell-gateway' && sp.namespace === ns && sp.port === 443, `${name}: clientConfig.service ${JSON.stringify(sp)}`);
        check(where(hook), x.rules?.length === 1 && x.rules[0].operations.join() === 'CREATE' && x.rules[0].resources.join() === 'pods', `${name}: only pod CREATE`);
        check(where(hook), x.reinvocationPolicy === 'IfNeeded' && x.sideEffects === 'None' && x.timeoutSeconds <= 5, `${name}: IfNeeded, no side effects, short timeout`);
        const excluded = x.namespaceSelector?.matchExpressions?.find((e) => e.key === 'kubernetes.io/metadata.name');
        check(where(hook), excluded?.operator === 'NotIn' && ['kube-system', ns].every((n) => excluded.values.includes(n)), `${name}: kube-system and ${ns} excluded`);
        // In namespaces labelled required a pod cannot opt out: no opt-out condition, and its own path.
        const required = name === 'required-pods.oversell.io';
        check(where(hook), sp.path === (required ? '/mutate/pods/required' : '/mutate/pods'), `${name}: path ${sp.path}`);
        check(where(hook), required ? !x.matchConditions?.some((c) => c.expression.includes('oversell.io/inject')) : x.matchConditions?.some((c) => c.name === 'not-opted-out'), `${name}: ${required ? 'no pod opt-out' : 'pod opt-out'}`);
      }
      check(where(hook), pods['pods.oversell.io']?.failurePolicy === 'Ignore' && injectValues(pods['pods.oversell.io'])?.values?.join() === 'enabled', 'pods.oversell.io: Ignore, namespaces oversell.io/inject=enabled');
      check(where(hook), pods['required-pods.oversell.io']?.failurePolicy === 'Fail' && injectValues(pods['required-pods.oversell.io'])?.values?.join() === 'required', 'required-pods.oversell.io: Fail, namespaces oversell.io/inject=required');
      const annotated = pods['annotated-pods.oversell.io'];
      check(where(hook), annotated?.failurePolicy === 'Ignore' && injectValues(annotated)?.operator === 'NotIn' && ['enabled', 'required', 'disabled'].every((v) => injectValues(annotated).values.includes(v)), 'annotated-pods.oversell.io: Ignore, only namespaces the others do not cover');
      check(where(hook), annotated?.matchConditions?.some((c) => c.expression.includes("'oversell.io/sidecars' in object.metadata.annotations")), 'annotated-pods.oversell.io: only pods annotated oversell.io/sidecars');
      check(label, grants('oversell-gateway', '', 'configmaps', 'watch', 'RoleBinding') && !grants('oversell-gateway', '', 'configmaps', 'watch', 'ClusterRoleBinding'), 'gateway: watch configmaps (sidecar templates) in its namespace only');
      verifyRequiredPodImages(label, objects, pods['required-pods.oversell.io']);
    }
  }

  // Agent.
  const ds = need('DaemonSet', 'oversell-agent');
  if (ds) {
    const spec = ds.spec.template.spec;
    const c = spec.containers.find((x) => x.name === 'agent');
    const env = Object.fromEntries((c?.env ?? []).map((e) => [e.name, e.value ?? e.valueFrom]));
    check(where(ds), matches(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels), 'selector does not match the pod template');
    check(where(ds), spec.tolerations?.some((t) => t.operator === 'Exists' && !t.key && !t.effect), 'tolerates every taint');
    check(where(ds), spec.priorityClassName === 'system-node-critical', 'system-node-critical');
    check(where(ds), ds.spec.updateStrategy?.type === 'RollingUpdate' && ds.spec.updateStrategy.rollingUpdate?.maxUnavailable, 'rolling update with maxUnavailable');
    check(where(ds), env.NODE_NAME?.fieldRef?.fieldPath === 'spec.nodeName', 'NODE_NAME from the downward API');
    check(where(ds), c?.command?.[0] === '/nodejs/bin/node' && c.command.includes('--jitless') && c.command.at(-1) === '/app/dist/agent/main.js', `agent runs dist/agent/main.js on node --jitless (what bench/agent-overhead.ts measures): ${c?.command}`);
    check(where(ds), JSON.stringify(c?.command) === JSON.stringify(baseAgentCommand()), `agent's Node flags are deploy/base/agent.yaml's, the ones the benchmarks measure: ${c?.command}`);
    check(where(ds), env.OVERSELL_GATEWAY_DISCOVERY === `${ns}/oversell-gateway-agents`, `OVERSELL_GATEWAY_DISCOVERY ${env.OVERSELL_GATEWAY_DISCOVERY}`);
    for (const host of ['/proc', '/sys/fs/cgroup']) {
      const vol = spec.volumes?.find((v) => v.hostPath?.path === host);
      check(where(ds), vol && c?.volumeMounts?.some((m) => m.name === vol.name && m.readOnly === true), `host ${host} mounted read-only`);
    }
    check(where(ds), c?.securityContext?.readOnlyRootFilesystem === true && c?.securityContext?.allowPrivilegeEscalation === false && c?.securityContext?.runAsNonRoot === true, 'container security context');
    check(label, grants('oversell-agent', 'discovery.k8s.io', 'endpointslices', 'watch', 'RoleBinding'), 'agent: watch endpointslices in its namespace');
    check(label, !grants('oversell-agent', 'discovery.k8s.io', 'endpointslices', 'watch', 'ClusterRoleBinding'), 'agent: endpointslices must not be cluster-wide');
    const clusterWide = rules('oversell-agent').filter((r) => r.scope === 'ClusterRoleBinding');
    check(label, clusterWide.every((r) => r.apiGroups.join() === '' && r.resources.join() === 'pods' && r.verbs.every((v) => ['get', 'list', 'watch'].includes(v))), 'agent: cluster-wide only pods get/list/watch');
    // Cluster-wide pod read only where asked for: the gateway's own pod watch does not use the agents' reports.
    check(label, (clusterWide.length > 0) === (agentPodRead === 'on'), `agent: cluster-wide pod read ${clusterWide.length > 0 ? 'granted' : 'not granted'} (want it ${agentPodRead === 'on' ? 'granted' : 'absent'}: --agent-pod-read ${agentPodRead})`);
  }
  verifyRbacTable(label, objects);
  verifyMonitoring(label, objects);
  verifyMetricsApi(label, objects);
  return objects;
}

if (parseOnly) {
  for (const file of args) {
    const before = failures;
    const objects = await load(file, file);
    console.log(`  ${failures === before ? 'ok  ' : 'FAIL'} ${file}: ${objects.map(id).join(', ')}`);
  }
  if (failures) {
    console.error(`manifests: ${failures} problem(s)`);
    process.exit(1);
  }
  process.exit(0);
}

const renders = [];
for (const a of args) {
  const [label, file] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, a];
  const before = failures;
  const loaded = await load(label, file);
  const hooks = loaded.filter(isHook);
  const objects = verify(label, loaded.filter((o) => !isHook(o)));
  verifyHooks(label, hooks, objects.some((o) => o.metadata.labels?.['app.kubernetes.io/managed-by'] === 'Helm'));
  console.log(`  ${failures === before ? 'ok  ' : 'FAIL'} ${label}: ${objects.length} objects${hooks.length ? ` and ${hooks.length} hooks` : ''} (${mode}, namespace ${ns}, monitoring ${monitoring}, metrics API ${metricsApi})`);
  renders.push({
    label,
    ids: new Set(objects.filter((o) => o.kind !== 'Namespace').map(id)),
    rules: grantedRules(objects, ns),
    // Specs that must not drift between kustomize and Helm (labels differ, specs must not).
    specs: new Map(objects.filter((o) => ['NetworkPolicy', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding', 'APIService'].includes(o.kind) || isMonitoring(o)).map((o) => [id(o), canonical(o.spec ?? o.data)])),
  });
}
// Same objects in every render of this mode (helm does not own the Namespace).
for (const r of renders.slice(1)) {
  const [first] = renders;
  const only = (a, b) => [...a.ids].filter((x) => !b.ids.has(x));
  for (const x of only(first, r)) fail(`${r.label} vs ${first.label}`, `${x} only in ${first.label}`);
  for (const x of only(r, first)) fail(`${r.label} vs ${first.label}`, `${x} only in ${r.label}`);
  // The same subject gets the same rules from either install path.
  for (const t of first.rules) if (!r.rules.has(t)) fail(`${r.label} vs ${first.label}`, `RBAC rule only in ${first.label}: ${t}`);
  for (const t of r.rules) if (!first.rules.has(t)) fail(`${r.label} vs ${first.label}`, `RBAC rule only in ${r.label}: ${t}`);
  for (const [k, spec] of first.specs) if (r.specs.has(k) && r.specs.get(k) !== spec) fail(`${r.label} vs ${first.label}`, `${k}: spec (data, for a ConfigMap) differs`);
}
if (failures) {
  console.error(`manifests: ${failures} problem(s)`);
  process.exit(1);
}
