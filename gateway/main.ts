#!/usr/bin/env node
// oversell-gateway: ingests agent streams, serves the nodes/status and pod webhooks and the query API.
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { durationFlag, flag, numberFlag, parsed, program, stopOnSignals } from '../lib/cli.js';
import { parseDuration } from '../lib/duration.js';
import { createLogger } from '../lib/log.js';
import { parseLabelSelector } from '../lib/label-selector.js';
import { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_POLICY, type Policy } from './decide/policy.js';
import { crdPolicySource, flagsPolicySource, type PolicySource } from './policies/policy-source.js';
import { GATEWAY_DEFAULTS, startGateway, type GatewayOptions } from './gateway.js';
import { agentAuthenticator, kubernetesPodNodeLookup } from './auth/agent-authenticator.js';
import { kubernetesAccessReview, queryAuthorizer } from './auth/query-authorizer.js';
import { CachedTokenReviewer, kubernetesTokenReviewer } from './auth/token-review.js';
import { ReviewLimiter } from './auth/review-limiter.js';
import { configMapTemplateSource, fileTemplateSource, noTemplates, type TemplateSource } from './inject/template-source.js';
import { ensureServingCertificate } from './tls/self-signed.js';
import { fileProofKey, secretProofKey } from './auth/proof-key.js';
import { join } from 'node:path';
import { chooseTransport } from './local-mode.js';
import { publishCaConfigMap } from './tls/ca-bundle.js';
import { fileTlsKeeper, secretTlsKeeper, type Tls, type TlsKeeper } from './tls/tls-keeper.js';

const d = GATEWAY_DEFAULTS;
const p = DEFAULT_POLICY;
const cmd = program('oversell-gateway', 'Inflates node allocatable from live usage: agent ingest, admission webhook, query API.')
  .addOption(flag('--bind-address <ip>', `address every listener binds (default: ${d.bindAddress} with a cluster, 127.0.0.1 in local mode, i.e. no kubeconfig in use)`, 'OVERSELL_BIND_ADDRESS'))
  .addOption(numberFlag('--webhook-port <port>', 'HTTPS port of the admission webhook', 'OVERSELL_WEBHOOK_PORT', String(d.webhookPort)))
  .addOption(numberFlag('--grpc-port <port>', 'gRPC port (agent streams and query API)', 'OVERSELL_GRPC_PORT', String(d.grpcPort)))
  .addOption(numberFlag('--agent-port <port>', 'also serve agent streams on this port, decoded on a thread of their own so the webhook and query API do not wait behind them (for large clusters: docs/benchmarks.md); unset: agents use --grpc-port', 'OVERSELL_AGENT_PORT', undefined))
  .addOption(numberFlag('--metrics-port <port>', 'HTTP port of /healthz, /readyz and /metrics', 'OVERSELL_METRICS_PORT', String(d.metricsPort)))
  .addOption(flag('--tls-cert-file <file>', 'serving certificate (PEM); with --tls-key-file, replaces the self-managed one', 'OVERSELL_TLS_CERT_FILE'))
  .addOption(flag('--tls-key-file <file>', 'serving key (PEM)', 'OVERSELL_TLS_KEY_FILE'))
  .addOption(flag('--tls-secret <namespace/name>', 'in a cluster: keep the CA and serving certificate in this Secret (created if absent, renewed before expiry)', 'OVERSELL_TLS_SECRET'))
  .addOption(flag('--webhook-configuration <name>', 'with --tls-secret: MutatingWebhookConfiguration whose caBundle gets our CA (empty: none)', 'OVERSELL_WEBHOOK_CONFIGURATION', 'oversell'))
  .addOption(flag('--tls-dir <dir>', 'where the self-managed CA and serving certificate live', 'OVERSELL_TLS_DIR', '.oversell/tls'))
  .addOption(flag('--tls-hosts <list>', 'comma-separated DNS names and IPs of the self-managed certificate', 'OVERSELL_TLS_HOSTS',
    'localhost,127.0.0.1,oversell-gateway,oversell-gateway.oversell,oversell-gateway.oversell.svc,oversell-gateway.oversell.svc.cluster.local'))
  .addOption(numberFlag('--max-ratio-cpu <ratio>', 'cap on granted/raw allocatable for cpu', 'OVERSELL_MAX_RATIO_CPU', String(p.cpu.maxRatio), 1))
  .addOption(numberFlag('--max-ratio-memory <ratio>', 'cap on granted/raw allocatable for memory', 'OVERSELL_MAX_RATIO_MEMORY', String(p.memory.maxRatio), 1))
  .addOption(numberFlag('--target-cpu <fraction>', 'cpu utilization of raw allocatable to fill up to (0-1)', 'OVERSELL_TARGET_CPU', String(p.cpu.targetUtilization)))
  .addOption(numberFlag('--target-memory <fraction>', 'memory utilization of raw allocatable to fill up to (0-1)', 'OVERSELL_TARGET_MEMORY', String(p.memory.targetUtilization)))
  .addOption(durationFlag('--stale-after <duration>', 'usage older than this never inflates', 'OVERSELL_STALE_AFTER', `${p.staleAfterMs / 1000}s`))
  .addOption(durationFlag('--window <duration>', 'usage window for the statistics (cpu p95, memory max)', 'OVERSELL_WINDOW', `${p.windowMs / 1000}s`))
  .addOption(durationFlag('--calm-period <duration>', 'after pressure, grant only the floor until calm this long', 'OVERSELL_CALM_PERIOD', `${p.calmPeriodMs / 1000}s`))
  .addOption(numberFlag('--hysteresis <fraction>', 'hold back rises smaller than this fraction of the previous grant', 'OVERSELL_HYSTERESIS', String(p.hysteresis)))
  .addOption(flag('--policies <source>', '"crd": OversellPolicy objects of the cluster; "flags": the flags above for every node (default: crd in a cluster or with --kubeconfig, else flags)', 'OVERSELL_POLICIES'))
  .addOption(flag('--kubeconfig <file>', 'kubeconfig (default: in-cluster when running in a pod)', 'KUBECONFIG'))
  .addOption(flag('--lease-namespace <ns>', 'namespace of the leader Lease (one replica writes node and policy status)', 'POD_NAMESPACE', 'oversell'))
  .addOption(flag('--identity <name>', 'this replica in the leader election', 'POD_NAME', `${hostname()}-${process.pid}`))
  .addOption(numberFlag('--status-writes-per-second <n>', 'rate limit of the gateway\'s own nodes/status writes', 'OVERSELL_STATUS_WRITES_PER_SECOND', '10', 0.1))
  .addOption(flag('--watch-bound-pods <on|off>', 'with a cluster: watch the pods bound to every node, so bound requests come from the API server (they may then hold allocatable above the cap, as a kubelet restart needs); off: from the agents only, never past the cap (about 150 bytes per pod: 22 MiB at 150,000 pods)', 'OVERSELL_WATCH_BOUND_PODS', 'on'))
  .addOption(flag('--opt-in-selector <selector>', 'nodes the webhook objectSelector sends (label selector); the status writer watches the same', 'OVERSELL_OPT_IN_SELECTOR', 'oversell.io/enabled=true'))
  .addOption(flag('--sidecars <source>', 'sidecar templates for pod CREATE (/mutate/pods): "configmap" (ConfigMaps labelled oversell.io/sidecar-template=true in --sidecar-namespace), "file" (--sidecar-templates-file) or "none" (default: configmap in a cluster or with --kubeconfig, file with --sidecar-templates-file, else none)', 'OVERSELL_SIDECARS'))
  .addOption(flag('--sidecar-namespace <ns>', 'namespace of the template ConfigMaps; never injected (default: --lease-namespace, the gateway\'s own)', 'OVERSELL_SIDECAR_NAMESPACE'))
  .addOption(flag('--sidecar-templates-file <file>', 'with --sidecars file: YAML mapping template names to templates (docs/sidecars.md)', 'OVERSELL_SIDECAR_TEMPLATES_FILE'))
  .addOption(flag('--grpc-tls <on|off>', 'serve gRPC (agents, query API) over TLS with the serving certificate (default: on whenever a kubeconfig is in use, in a pod or with --kubeconfig; off only in local mode)', 'OVERSELL_GRPC_TLS'))
  .addOption(flag('--auth <mode>', '"kubernetes": agents prove their node with a projected ServiceAccount token (TokenReview) and query callers need RBAC on nodeusages.oversell.io (SubjectAccessReview); "none": local mode, anyone who reaches the port (default: kubernetes whenever a kubeconfig is in use, none only in local mode)', 'OVERSELL_AUTH'))
  .addOption(flag('--proof-key-secret <namespace/name>', 'with a cluster: the Secret holding the key every replica signs its grants with, created if absent (default: <lease namespace>/oversell-gateway-proof-key)', 'OVERSELL_PROOF_KEY_SECRET'))
  .addOption(flag('--proof-key-file <file>', 'the grant-signing key as a file (base64, at least 32 bytes), created if absent (default without a cluster: <tls dir>/proof.key)', 'OVERSELL_PROOF_KEY_FILE'))
  .addOption(flag('--agent-audience <aud>', 'audience of the agents\' projected tokens', 'OVERSELL_AGENT_AUDIENCE', 'oversell-gateway'))
  .addOption(numberFlag('--token-reviews-per-second <n>', 'TokenReviews the gateway may send the API server per second, agents and query callers together (a fifth reserved for callers accepted before); over it, callers get UNAVAILABLE and retry', 'OVERSELL_TOKEN_REVIEWS_PER_SECOND', '100', 1))
  .addOption(numberFlag('--token-reviews-in-flight <n>', 'TokenReviews waiting for the API server at once, at most', 'OVERSELL_TOKEN_REVIEWS_IN_FLIGHT', '20', 1))
  .addOption(flag('--agent-service-accounts <list>', 'comma-separated namespace/name of the ServiceAccounts agents run as (default: <lease namespace>/oversell-agent)', 'OVERSELL_AGENT_SERVICE_ACCOUNTS'))
  .addOption(flag('--ca-configmap <name>', 'in a cluster: publish the CA of the serving certificate (no key) in this ConfigMap of the lease namespace, for agents to trust gRPC TLS (empty: off)', 'OVERSELL_CA_CONFIGMAP', 'oversell-gateway-ca'))
  .addOption(flag('--webhook-client-ca-file <file>', 'require a client certificate from this CA on the webhook (the API server\'s admission client certificate; docs/security.md)', 'OVERSELL_WEBHOOK_CLIENT_CA_FILE'))
  .addOption(durationFlag('--warmup <duration>', '/readyz waits this long after start so agents fill the store before webhook traffic arrives', 'OVERSELL_WARMUP', '0s'))
  .addOption(flag('--log-level <level>', 'trace, debug, info, warn, error or silent', 'OVERSELL_LOG_LEVEL', 'info'));

cmd.parse();
const o = cmd.opts<Record<string, string | number | undefined>>();
const log = createLogger('oversell-gateway', String(o.logLevel));

try {
  parseLabelSelector(String(o.optInSelector)); // refuse a bad selector before anything starts
  const fraction = (v: unknown, name: string) => {
    const n = Number(v);
    if (!(n > 0 && n <= 1)) throw new Error(`${name} must be in (0, 1], got ${v}`);
    return n;
  };
  const policy: Policy = {
    ...p,
    cpu: { ...p.cpu, maxRatio: Number(o.maxRatioCpu), targetUtilization: fraction(o.targetCpu, '--target-cpu') },
    memory: { ...p.memory, maxRatio: Number(o.maxRatioMemory), targetUtilization: fraction(o.targetMemory, '--target-memory') },
    staleAfterMs: parsed(o.staleAfter, (s) => parseDuration(s, '--stale-after')),
    windowMs: parsed(o.window, (s) => parseDuration(s, '--window')),
    calmPeriodMs: parsed(o.calmPeriod, (s) => parseDuration(s, '--calm-period')),
    hysteresis: Number(o.hysteresis),
  };
  const inCluster = Boolean(process.env.KUBERNETES_SERVICE_HOST);
  const source = o.policies ?? (o.kubeconfig || inCluster ? 'crd' : 'flags');
  let kubeConfig: KubeConfig | undefined;
  if (source === 'crd' || o.kubeconfig || inCluster) {
    kubeConfig = new KubeConfig();
    if (o.kubeconfig) kubeConfig.loadFromFile(String(o.kubeconfig));
    else kubeConfig.loadFromCluster();
  }
  let policies: PolicySource;
  if (source === 'flags') policies = flagsPolicySource(policy);
  else if (source === 'crd' && kubeConfig) policies = await crdPolicySource(kubeConfig, log);
  else throw new Error(`--policies must be "crd" or "flags", got ${JSON.stringify(source)}`);
  log.info({ policies: source }, source === 'crd' ? 'policies from OversellPolicy objects' : 'one policy from flags for every node sent to the webhook');
  const sidecarSource = o.sidecars ?? (o.sidecarTemplatesFile ? 'file' : kubeConfig ? 'configmap' : 'none');
  const sidecarNamespace = String(o.sidecarNamespace ?? o.leaseNamespace);
  let templates: TemplateSource;
  if (sidecarSource === 'none') templates = noTemplates();
  else if (sidecarSource === 'file' && o.sidecarTemplatesFile) templates = fileTemplateSource(String(o.sidecarTemplatesFile), log);
  else if (sidecarSource === 'configmap' && kubeConfig) templates = await configMapTemplateSource(kubeConfig, sidecarNamespace, log);
  else throw new Error(`--sidecars must be "configmap" (needs a cluster), "file" (needs --sidecar-templates-file) or "none", got ${JSON.stringify(sidecarSource)}`);
  const hosts = String(o.tlsHosts).split(',').map((h) => h.trim()).filter(Boolean);
  let tlsKeeper: TlsKeeper | undefined;
  let tls: Tls;
  if (o.tlsCertFile || o.tlsKeyFile) {
    if (!o.tlsCertFile || !o.tlsKeyFile) throw new Error('--tls-cert-file and --tls-key-file go together');
    tlsKeeper = fileTlsKeeper(String(o.tlsCertFile), String(o.tlsKeyFile), log);
    tls = tlsKeeper.current;
  } else if (o.tlsSecret) {
    const [namespace, name] = String(o.tlsSecret).split('/');
    if (!namespace || !name) throw new Error(`--tls-secret must be namespace/name, got ${JSON.stringify(o.tlsSecret)}`);
    if (!kubeConfig) throw new Error('--tls-secret needs a cluster: run in a pod or pass --kubeconfig');
    tlsKeeper = await secretTlsKeeper({ kubeConfig, namespace, name, hosts, webhookConfiguration: String(o.webhookConfiguration ?? ''), log });
    tls = tlsKeeper.current;
  } else {
    const own = await ensureServingCertificate(String(o.tlsDir), hosts);
    log.info({ caFile: own.caFile, created: own.created }, 'self-managed serving certificate; give the webhook this CA as caBundle');
    tls = own;
  }
  const onOff = (v: unknown, name: string, dflt: boolean) => {
    if (v === undefined) return dflt;
    if (['on', 'true', '1'].includes(String(v))) return true;
    if (['off', 'false', '0'].includes(String(v))) return false;
    throw new Error(`${name} must be on or off, got ${JSON.stringify(v)}`);
  };
  const { auth: authMode, grpcTls, bindAddress, warning } = chooseTransport(kubeConfig !== undefined, {
    auth: o.auth === undefined ? undefined : String(o.auth),
    grpcTls: o.grpcTls === undefined ? undefined : onOff(o.grpcTls, '--grpc-tls', false),
    bindAddress: o.bindAddress === undefined ? undefined : String(o.bindAddress),
  }, d.bindAddress);
  if (warning) log.warn(warning);
  let proofKey: Buffer;
  if (o.proofKeyFile) {
    proofKey = fileProofKey(String(o.proofKeyFile));
  } else if (kubeConfig) {
    const [namespace, name] = String(o.proofKeySecret ?? `${o.leaseNamespace}/oversell-gateway-proof-key`).split('/');
    if (!namespace || !name) throw new Error(`--proof-key-secret must be namespace/name, got ${JSON.stringify(o.proofKeySecret)}`);
    proofKey = await secretProofKey(kubeConfig, namespace, name).catch((err: unknown) => {
      throw new Error(`cannot read or create the grant proof key Secret ${namespace}/${name}: ${(err as Error).message}; the gateway needs get and create on Secrets in its namespace (deploy/base/rbac.yaml), or pass --proof-key-file`);
    });
  } else {
    proofKey = fileProofKey(join(String(o.tlsDir), 'proof.key'));
  }
  let auth: GatewayOptions['auth'];
  if (authMode === 'kubernetes') {
    if (!kubeConfig) throw new Error('--auth kubernetes needs a cluster: run in a pod or pass --kubeconfig (or --auth none for local mode)');
    // One budget for both: the API server sees at most this many reviews from this replica, whoever sends the tokens.
    const perSecond = Number(o.tokenReviewsPerSecond);
    const reviews = new ReviewLimiter({ perSecond, burst: 2 * perSecond, maxInFlight: Number(o.tokenReviewsInFlight) });
    const cache = { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 50_000, limiter: reviews };
    const accounts = String(o.agentServiceAccounts ?? `${o.leaseNamespace}/oversell-agent`).split(',').map((s) => s.trim()).filter(Boolean);
    auth = {
      agents: agentAuthenticator(
        new CachedTokenReviewer(kubernetesTokenReviewer(kubeConfig, String(o.agentAudience)), { ...cache, precheck: { audience: String(o.agentAudience), acceptOpaque: false } }),
        accounts, kubernetesPodNodeLookup(kubeConfig),
      ),
      // Query callers may hold tokens that are not JWTs (static token files, some OIDC setups); their audiences are the API server's.
      query: queryAuthorizer(new CachedTokenReviewer(kubernetesTokenReviewer(kubeConfig, undefined), { ...cache, precheck: { acceptOpaque: true } }), kubernetesAccessReview(kubeConfig)),
      reviews,
    };
    log.info({ agentServiceAccounts: accounts, audience: o.agentAudience }, 'agents and query callers authenticate with Kubernetes tokens');
  } else {
    log.warn('--auth none: any client that reaches the gRPC port may report for any node and query every node (local mode only)');
  }
  const gateway = await startGateway({
    ...GATEWAY_DEFAULTS,
    bindAddress,
    webhookPort: Number(o.webhookPort),
    grpcPort: Number(o.grpcPort),
    ...(o.agentPort !== undefined && { agentPort: Number(o.agentPort) }),
    metricsPort: Number(o.metricsPort),
    tls,
    grpcTls,
    proofKey,
    ...(o.webhookClientCaFile && { webhookClientCa: readFileSync(String(o.webhookClientCaFile), 'utf8') }),
    auth,
    policies,
    sidecars: { source: templates, excludedNamespaces: [sidecarNamespace, String(o.leaseNamespace)] },
    warmupMs: parsed(o.warmup, (s) => parseDuration(s, '--warmup')),
    log,
    ...(kubeConfig && {
      cluster: {
        kubeConfig,
        leaseNamespace: String(o.leaseNamespace),
        identity: String(o.identity),
        statusWritesPerSecond: Number(o.statusWritesPerSecond),
        optInSelector: String(o.optInSelector),
        watchBoundPods: onOff(o.watchBoundPods, '--watch-bound-pods', true),
      },
    }),
  });
  const caConfigMap = String(o.caConfigmap ?? '');
  const publishCa = (ca: string | undefined) => {
    if (!kubeConfig || !caConfigMap || !ca) return;
    publishCaConfigMap(kubeConfig, String(o.leaseNamespace), caConfigMap, ca).then(
      (changed) => changed && log.info({ configMap: `${o.leaseNamespace}/${caConfigMap}` }, 'published the gateway CA for agents'),
      (err: unknown) => log.warn({ configMap: caConfigMap, err: (err as Error).message }, 'cannot publish the gateway CA yet; agents with TLS will not start until it exists'),
    );
  };
  publishCa(tls.ca);
  tlsKeeper?.onChange((next) => {
    gateway.setTls(next);
    publishCa(next.ca);
    log.info('serving certificate swapped without a restart');
  });
  stopOnSignals(async () => {
    tlsKeeper?.stop();
    await gateway.close();
  }, log);
} catch (err) {
  log.fatal({ err: (err as Error).message }, 'gateway cannot start');
  process.exit(2);
}
