// From a checked GatewayConfig to a running gateway: the kubeconfig, the policy
// and template sources, the serving certificate, the proof key and the
// authenticators, each built from its part of the config. Every choice was made
// in loadConfig; this file only carries them out.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { PooledKubeConfig } from '../lib/pooled-kube-config.js';
import type { Logger } from '../lib/log.js';
import { crdPolicySource, flagsPolicySource, type PolicySource } from './policies/policy-source.js';
import { GATEWAY_DEFAULTS } from './config/defaults.js';
import { startGateway, type GatewayOptions, type RunningGateway } from './gateway.js';
import { agentAuthenticator, kubernetesPodNodeLookup } from './auth/agent-authenticator.js';
import { kubernetesAccessReview, queryAuthorizer } from './auth/query-authorizer.js';
import { CachedTokenReviewer, kubernetesTokenReviewer } from './auth/token-review.js';
import { ReviewLimiter } from './auth/review-limiter.js';
import { configMapTemplateSource, fileTemplateSource, noTemplates, type TemplateSource } from './inject/template-source.js';
import { ensureServingCertificate } from './tls/self-signed.js';
import { fileProofKey, secretProofKey } from './auth/proof-key.js';
import { apiServiceCaBundleKeeper } from './act/apiservice-cabundle.js';
import { publishCaConfigMap } from './tls/ca-bundle.js';
import { fileTlsKeeper, secretTlsKeeper, type Tls, type TlsKeeper } from './tls/tls-keeper.js';
import type { AuthConfig, GatewayConfig, ProofKeyConfig, SidecarsConfig, TlsConfig } from './config/types.js';

export interface StartedGateway {
  gateway: RunningGateway;
  stop(): Promise<void>;
}

function kubeConfigOf(config: GatewayConfig): PooledKubeConfig | undefined {
  if (config.mode === 'local') return undefined;
  const kc = new PooledKubeConfig();
  if (config.kube.kind === 'kubeconfig') kc.loadFromFile(config.kube.file);
  else kc.loadFromCluster();
  return kc;
}

async function policySource(config: GatewayConfig, kc: KubeConfig | undefined, log: Logger): Promise<PolicySource> {
  const { policies } = config;
  let source: PolicySource;
  if (policies.source === 'flags') source = flagsPolicySource(policies.policy);
  else if (kc) source = await crdPolicySource(kc, log);
  else throw new Error('bug: crd policies without a kubeconfig');
  log.info({ policies: policies.source }, policies.source === 'crd' ? 'policies from OversellPolicy objects' : 'one policy from flags for every node sent to the webhook');
  return source;
}

async function templateSource(sidecars: SidecarsConfig, kc: KubeConfig | undefined, log: Logger): Promise<TemplateSource> {
  if (sidecars.source === 'none') return noTemplates();
  if (sidecars.source === 'file') return fileTemplateSource(sidecars.file, log);
  if (!kc) throw new Error('bug: configmap sidecars without a kubeconfig');
  return configMapTemplateSource(kc, sidecars.namespace, log);
}

async function servingTls(tls: TlsConfig, kc: KubeConfig | undefined, log: Logger, metricsApi: boolean): Promise<{ tls: Tls; keeper?: TlsKeeper }> {
  if (tls.source === 'files') {
    const keeper = fileTlsKeeper(tls.certFile, tls.keyFile, log);
    return { tls: keeper.current, keeper };
  }
  if (tls.source === 'secret') {
    if (!kc) throw new Error('bug: a TLS Secret without a kubeconfig');
    const keeper = await secretTlsKeeper({ kubeConfig: kc, namespace: tls.namespace, name: tls.name, hosts: tls.hosts, webhookConfiguration: tls.webhookConfiguration, alsoInject: metricsApi ? apiServiceCaBundleKeeper(kc, log) : undefined, log });
    return { tls: keeper.current, keeper };
  }
  const own = await ensureServingCertificate(tls.dir, tls.hosts);
  log.info({ caFile: own.caFile, created: own.created }, 'self-managed serving certificate; give the webhook this CA as caBundle');
  return { tls: own };
}

async function proofKeyOf(proofKey: ProofKeyConfig, kc: KubeConfig | undefined): Promise<Buffer> {
  if (proofKey.source === 'file') return fileProofKey(proofKey.file);
  if (!kc) throw new Error('bug: a proof key Secret without a kubeconfig');
  const { namespace, name } = proofKey;
  return secretProofKey(kc, namespace, name).catch((err: unknown) => {
    throw new Error(`cannot read or create the grant proof key Secret ${namespace}/${name}: ${(err as Error).message}; the gateway needs get and create on Secrets in its namespace (deploy/base/rbac.yaml), or pass --proof-key-file`);
  });
}

function authOf(auth: AuthConfig, kc: KubeConfig | undefined, log: Logger): GatewayOptions['auth'] {
  if (auth.mode === 'none') {
    log.warn('--auth none: any client that reaches the agent port may report for any node, and any that reaches the gRPC port may query every node (local mode only)');
    return undefined;
  }
  if (!kc) throw new Error('bug: kubernetes auth without a kubeconfig');
  // One budget for both: the API server sees at most this many reviews from this replica, whoever sends the tokens.
  const perSecond = auth.tokenReviewsPerSecond;
  const reviews = new ReviewLimiter({ perSecond, burst: 2 * perSecond, maxInFlight: auth.tokenReviewsInFlight });
  const cache = { ttlMs: 60_000, negativeTtlMs: 5_000, maxEntries: 50_000, limiter: reviews };
  log.info({ agentServiceAccounts: auth.serviceAccounts, audience: auth.audience }, 'agents and query callers authenticate with Kubernetes tokens');
  return {
    agents: agentAuthenticator(
      new CachedTokenReviewer(kubernetesTokenReviewer(kc, auth.audience), { ...cache, precheck: { audience: auth.audience, acceptOpaque: false } }),
      auth.serviceAccounts, kubernetesPodNodeLookup(kc),
    ),
    // Query callers may hold tokens that are not JWTs (static token files, some OIDC setups); their audiences are the API server's.
    query: queryAuthorizer(new CachedTokenReviewer(kubernetesTokenReviewer(kc, undefined), { ...cache, precheck: { acceptOpaque: true } }), kubernetesAccessReview(kc)),
    reviews,
  };
}

export async function startFromConfig(config: GatewayConfig, log: Logger): Promise<StartedGateway> {
  const kc = kubeConfigOf(config);
  const policies = await policySource(config, kc, log);
  const templates = await templateSource(config.sidecars, kc, log);
  const { tls, keeper } = await servingTls(config.tls, kc, log, config.mode === 'cluster' && config.metricsApi !== undefined);
  for (const warning of config.warnings) log.warn(warning);
  const proofKey = await proofKeyOf(config.proofKey, kc);
  const auth = authOf(config.auth, kc, log);
  const gateway = await startGateway({
    ...GATEWAY_DEFAULTS,
    bindAddress: config.bindAddress,
    webhookPort: config.webhookPort,
    grpcPort: config.grpcPort,
    ...(config.agentPort !== undefined && { agentPort: config.agentPort }),
    metricsPort: config.metricsPort,
    tls,
    grpcTls: config.grpcTls,
    proofKey,
    ...(config.webhookClientCaFile && { webhookClientCa: readFileSync(config.webhookClientCaFile, 'utf8') }),
    auth,
    policies,
    sidecars: { source: templates, excludedNamespaces: config.sidecars.excludedNamespaces },
    warmupMs: config.warmupMs,
    connections: config.connections,
    queryLimits: config.queryLimits,
    grpcStreams: config.grpcStreams,
    agentSending: config.agentSending,
    shedding: config.shedding,
    log,
    ...(config.mode === 'cluster' && kc && { cluster: { kubeConfig: kc, ...withoutShard(config.cluster), ...(config.metricsApi && { metricsApi: { port: config.metricsApi.port } }) } }),
    ...(config.mode === 'cluster' && config.cluster.shard && { shard: config.cluster.shard }),
  });
  const publishCa = (ca: string | undefined) => {
    if (config.mode !== 'cluster' || !kc || !config.caConfigMap || !ca) return;
    const { leaseNamespace } = config.cluster;
    const configMap = config.caConfigMap;
    publishCaConfigMap(kc, leaseNamespace, configMap, ca).then(
      (changed) => changed && log.info({ configMap: `${leaseNamespace}/${configMap}` }, 'published the gateway CA for agents'),
      (err: unknown) => log.warn({ configMap, err: (err as Error).message }, 'cannot publish the gateway CA yet; agents with TLS will not start until it exists'),
    );
  };
  publishCa(tls.ca);
  keeper?.onChange((next) => {
    gateway.setTls(next);
    publishCa(next.ca);
    log.info('serving certificate swapped without a restart');
  });
  return {
    gateway,
    stop: async () => {
      if (config.shutdownDrainMs > 0) {
        gateway.drain();
        await sleep(config.shutdownDrainMs);
      }
      keeper?.stop();
      await gateway.close();
      kc?.closeConnections();
    },
  };
}

/** The cluster settings GatewayOptions.cluster takes: sharding is GatewayOptions.shard. */
function withoutShard<T extends { shard?: unknown }>(cluster: T): Omit<T, 'shard'> {
  const { shard: _, ...rest } = cluster;
  return rest;
}
