// The gateway's flags, each with its environment variable and default: the one
// definition --help, loadConfig and the README check (test/readme-flags.test.ts) read.
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { durationFlag, flag, numberFlag, program } from '../../lib/cli.js';
import { DEFAULT_POLICY } from '../decide/policy.js';
import { AGENT_SENDING, GATEWAY_DEFAULTS, SHEDDING } from './defaults.js';
import { DEFAULT_QUERY_LIMITS } from '../query/query-limits.js';

const d = GATEWAY_DEFAULTS;
const p = DEFAULT_POLICY;
const q = DEFAULT_QUERY_LIMITS;
export const defineGatewayFlags = (cmd?: Command): Command => program('oversell-gateway', 'Inflates node allocatable from live usage: agent ingest, admission webhook, query API.', cmd)
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
  .addOption(flag('--risk-budget <on|off>', 'grant from each node\'s predicted peak (its load history) once the history spans --history-min-span; off: the targets only (docs/policy.md)', 'OVERSELL_RISK_BUDGET', 'on'))
  .addOption(numberFlag('--budget-cpu-over-share <share>', 'risk budget: share of node-time the predicted CPU load factor may be exceeded (0-0.1)', 'OVERSELL_BUDGET_CPU_OVER_SHARE', String(p.cpu.riskBudget.overShare)))
  .addOption(numberFlag('--budget-cpu-margin <share>', 'risk budget: share of raw allocatable CPU kept free at the predicted peak (0-0.5)', 'OVERSELL_BUDGET_CPU_MARGIN', String(p.cpu.riskBudget.margin)))
  .addOption(numberFlag('--budget-memory-over-share <share>', 'risk budget: share of node-time the predicted memory load factor may be exceeded (0-0.01; 0: the largest seen)', 'OVERSELL_BUDGET_MEMORY_OVER_SHARE', String(p.memory.riskBudget.overShare)))
  .addOption(numberFlag('--budget-memory-margin <share>', 'risk budget: share of raw allocatable memory kept free at the predicted peak: the surge above anything seen that pods survive (0-0.5)', 'OVERSELL_BUDGET_MEMORY_MARGIN', String(p.memory.riskBudget.margin)))
  .addOption(durationFlag('--history-min-span <duration>', 'risk budget: how long a node\'s load history must span before it is used (the targets until then)', 'OVERSELL_HISTORY_MIN_SPAN', `${p.history.minSpanMs / 3_600_000}h`))
  .addOption(flag('--history-learning <Targets|Floor>', 'risk budget: what decides until the history spans --history-min-span: the targets, or nothing above the floor', 'OVERSELL_HISTORY_LEARNING', p.history.learning))
  .addOption(durationFlag('--stale-after <duration>', 'usage older than this never inflates', 'OVERSELL_STALE_AFTER', `${p.staleAfterMs / 1000}s`))
  .addOption(durationFlag('--window <duration>', 'usage window for the statistics (cpu p95, memory max)', 'OVERSELL_WINDOW', `${p.windowMs / 1000}s`))
  .addOption(durationFlag('--calm-period <duration>', 'after pressure, grant only the floor until calm this long', 'OVERSELL_CALM_PERIOD', `${p.calmPeriodMs / 1000}s`))
  .addOption(numberFlag('--hysteresis <fraction>', 'hold back rises smaller than this fraction of the previous grant', 'OVERSELL_HYSTERESIS', String(p.hysteresis)))
  .addOption(durationFlag('--startup-grace <duration>', 'no rise while the node\'s newest pod was bound less than this long ago (needs the bound pods watch)', 'OVERSELL_STARTUP_GRACE', `${p.startupGraceMs / 1000}s`))
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
  .addOption(numberFlag('--max-connections <n>', 'connections each gRPC listener (--grpc-port, --agent-port) holds at once; past it, new ones are closed as they arrive (10,000 agents per replica fit)', 'OVERSELL_MAX_CONNECTIONS', String(d.connections.grpcMaxConnections), 1))
  .addOption(numberFlag('--webhook-max-connections <n>', 'connections the webhook holds at once; past it, new ones are closed as they arrive', 'OVERSELL_WEBHOOK_MAX_CONNECTIONS', String(d.connections.webhookMaxConnections), 1))
  .addOption(durationFlag('--handshake-timeout <duration>', 'a connection to any listener must finish TLS within this, and a gRPC one then send its HTTP/2 preface within this, or it is closed', 'OVERSELL_HANDSHAKE_TIMEOUT', `${d.connections.handshakeTimeoutMs / 1000}s`))
  .addOption(numberFlag('--agent-batch-samples <n>', 'agents send their 1 s samples in batches of at most this many, told in the welcome (0: one message per sample, as gateways before batches)', 'OVERSELL_AGENT_BATCH_SAMPLES', String(AGENT_SENDING.maxBatchSamples)))
  .addOption(durationFlag('--agent-send-every <duration>', 'with batches: the longest a sample waits before its agent sends it; a change of usage, pressure or requests is sent at once', 'OVERSELL_AGENT_SEND_EVERY', `${AGENT_SENDING.sendEveryMs / 1000}s`))
  .addOption(durationFlag('--shed-loop-delay <duration>', 'a thread whose event loop runs later than this (99th percentile over a second) is overloaded: agents are told to send less often (doubling, up to --shed-max-send-every) and, on the main thread, queries are refused with RESOURCE_EXHAUSTED; reviews are never refused (0: never shed)', 'OVERSELL_SHED_LOOP_DELAY', `${SHEDDING.loopDelayMs}ms`))
  .addOption(durationFlag('--shed-max-send-every <duration>', 'the longest send interval agents are told while the gateway is overloaded; keep it under every policy\'s staleAfter, or steady nodes go stale', 'OVERSELL_SHED_MAX_SEND_EVERY', `${SHEDDING.maxSendEveryMs / 1000}s`))
  .addOption(numberFlag('--query-watches-per-caller <n>', 'WatchNodes streams one query caller (a user; in local mode a connection) may hold open on a replica', 'OVERSELL_QUERY_WATCHES_PER_CALLER', String(q.watchesPerCaller), 1))
  .addOption(numberFlag('--query-watches <n>', 'WatchNodes streams a replica serves at once, all callers together', 'OVERSELL_QUERY_WATCHES', String(q.watches), 1))
  .addOption(numberFlag('--query-lists-in-flight <n>', 'ListNodes/ListNodeSummaries answers a replica computes or sends at once (an answer its client does not read stays counted)', 'OVERSELL_QUERY_LISTS_IN_FLIGHT', String(q.listsInFlight), 1))
  .addOption(durationFlag('--query-watch-stall <duration>', 'a WatchNodes client that reads nothing this long while the gateway has something to send is ended (RESOURCE_EXHAUSTED)', 'OVERSELL_QUERY_WATCH_STALL', `${q.watchStallMs / 1000}s`))
  .addOption(durationFlag('--warmup <duration>', '/readyz waits this long after start so agents fill the store before webhook traffic arrives', 'OVERSELL_WARMUP', '0s'))
  .addOption(flag('--log-level <level>', 'trace, debug, info, warn, error or silent', 'OVERSELL_LOG_LEVEL', 'info'));
