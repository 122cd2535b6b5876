// The agent's flags, each with its environment variable and default: the one
// definition --help and the README check (test/readme-flags.test.ts) read.
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { durationFlag, flag, numberFlag, program } from '../lib/cli.js';

export const defineAgentFlags = (cmd?: Command): Command => program('oversell-agent', 'Streams this node\'s real CPU, memory and pressure to the oversell gateway.', cmd)
  .addOption(flag('--node-name <name>', 'node this agent reports for (downward API spec.nodeName)', 'NODE_NAME', hostname()))
  .addOption(flag('--gateway <host:port,...>', 'the gateway\'s agent port address(es) (its --agent-port); the agent streams to each', 'OVERSELL_GATEWAY', '127.0.0.1:50052'))
  .addOption(flag('--gateway-discovery <namespace/service>', 'stream to every ready endpoint of this Service (its EndpointSlices); overrides --gateway', 'OVERSELL_GATEWAY_DISCOVERY'))
  .addOption(flag('--proc-root <dir>', 'procfs of the host (e.g. /host/proc in a pod)', 'OVERSELL_PROC_ROOT', '/proc'))
  .addOption(flag('--cgroup-root <dir>', 'cgroup mount of the host', 'OVERSELL_CGROUP_ROOT', '/sys/fs/cgroup'))
  .addOption(flag('--kubelet-root-dir <dir>', 'the kubelet\'s --root-dir as mounted here: its cpu_manager_state says whether the static CPU manager holds CPUs exclusively (empty: not read)', 'OVERSELL_KUBELET_ROOT_DIR', '/var/lib/kubelet'))
  .addOption(durationFlag('--interval <duration>', 'sampling interval', 'OVERSELL_INTERVAL', '1s'))
  .addOption(numberFlag('--pod-report-every <n>', 'send per-pod usage with every Nth sample', 'OVERSELL_POD_REPORT_EVERY', '10', 1))
  .addOption(flag('--kubeconfig <file>', 'kubeconfig for the pod watch (default: in-cluster when running in a pod)', 'KUBECONFIG'))
  .addOption(flag('--pods-file <file>', 'local mode: pods bound to this node, from a YAML/JSON file instead of a watch', 'OVERSELL_PODS_FILE'))
  .addOption(flag('--metrics-address <host:port>', 'serve /metrics and /healthz here: host:port, [ipv6]:port, or :port for every interface, IPv4 and IPv6 (empty: off)', 'OVERSELL_AGENT_METRICS_ADDRESS', ':9091'))
  .addOption(flag('--gateway-ca-file <file>', 'CA of the gateway\'s certificate (the oversell-gateway-ca ConfigMap); enables TLS', 'OVERSELL_GATEWAY_CA_FILE'))
  .addOption(flag('--gateway-server-name <name>', 'name the gateway\'s certificate is checked against (replicas are dialled by IP)', 'OVERSELL_GATEWAY_SERVER_NAME'))
  .addOption(flag('--token-file <file>', 'projected ServiceAccount token (audience oversell-gateway) sent on every stream; needs --gateway-ca-file', 'OVERSELL_TOKEN_FILE'))
  .addOption(flag('--log-level <level>', 'trace, debug, info, warn, error or silent', 'OVERSELL_LOG_LEVEL', 'info'));
