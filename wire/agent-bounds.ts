// How much one agent may put in the messages of AgentStream.Report: the
// gateway refuses more (gateway/store/sample-check.ts), and the agent keeps
// within them (agent/sample/host-facts.ts, agent/sample/sampler.ts), so a
// node that is merely unusual loses detail, never its samples. The fields
// that can grow without them are the repeated ones and the strings. The
// bounds and why:
//
// - at most 1,024 pods in one sample: the kubelet's default maxPods is 110,
//   managed clusters allow up to 250-256 per node and the largest
//   configurations a few hundred more; an agent reports every pod cgroup under
//   kubepods, which includes pods that are being torn down. A forged report of
//   20,000 pods grew the gateway's heap by about 40 MiB (issue 43);
// - at most 64 containers in a pod (the kubelet runs a few, the sandbox
//   among them) and 4,096 in one sample (4 a pod at the pod bound; a
//   250-pod node with three sidecars each has about 1,000);
// - strings no longer than anything real: a pod uid is 36 characters (a
//   static pod's, 32), a QoS class at most 10, an instance id the agent's
//   random UUID, 36; a CPU model, an OS name and a kernel release are a few
//   dozen characters, allowed 256.
//
// So one node's sample stays under about 0.5 MB on the wire and one node's
// status (which carries its newest sample and its hello's host facts) far
// below the 4 MiB a gRPC message, and a replica's watch of its peers, may
// carry (gateway/shard/peer-wire.ts): a status past it made every peer refuse
// the replica's stream as "not a peer's" and reopen it every second.
import type { HostFacts__Output } from '../proto/gen/oversell/v1/HostFacts.js';
import type { PodUsage__Output } from '../proto/gen/oversell/v1/PodUsage.js';

export const POD_BOUNDS = {
  maxPodsPerSample: 1024,
  maxContainersPerPod: 64,
  maxContainersPerSample: 4096,
  /** Characters of PodUsage.uid and PodUsage.qos_class. */
  maxPodUidLength: 64,
  maxQosClassLength: 16,
} as const;

/** The most characters each string of Hello and of its HostFacts may have (node_name: a Kubernetes node name, at most 253). */
export const HELLO_BOUNDS = {
  instanceId: 64,
  agentVersion: 64,
  cpuModel: 256,
  os: 256,
  kernel: 256,
  cgroupMode: 16,
  cgroupDriver: 16,
} as const;

/** The host facts cut to HELLO_BOUNDS: what the agent reports of a host whose strings run longer. */
export function boundedHostFacts(host: HostFacts__Output): HostFacts__Output {
  const cut = (s: string, max: number) => (s.length > max ? s.slice(0, max) : s);
  return {
    ...host,
    cpuModel: cut(host.cpuModel, HELLO_BOUNDS.cpuModel),
    os: cut(host.os, HELLO_BOUNDS.os),
    kernel: cut(host.kernel, HELLO_BOUNDS.kernel),
    cgroupMode: cut(host.cgroupMode, HELLO_BOUNDS.cgroupMode),
    cgroupDriver: cut(host.cgroupDriver, HELLO_BOUNDS.cgroupDriver),
  };
}

/**
 * A pod report within POD_BOUNDS: pods with a uid or QoS class past their
 * bound left out (no pod has one), then the first maxPodsPerSample pods, the
 * first maxContainersPerPod containers of each, and no container past
 * maxContainersPerSample in all (their pods are kept, with fewer containers).
 * The same array when it is within them already; dropped: how many pods, and
 * containers of the pods kept, were left out.
 */
export function boundedPods(pods: PodUsage__Output[]): { pods: PodUsage__Output[]; dropped: { pods: number; containers: number } } {
  const named = (pod: PodUsage__Output) => pod.uid.length <= POD_BOUNDS.maxPodUidLength && pod.qosClass.length <= POD_BOUNDS.maxQosClassLength;
  let containers = 0;
  let fits = pods.length <= POD_BOUNDS.maxPodsPerSample;
  for (let i = 0; fits && i < pods.length; i++) {
    const pod = pods[i]!;
    containers += pod.containers.length;
    fits = named(pod) && pod.containers.length <= POD_BOUNDS.maxContainersPerPod && containers <= POD_BOUNDS.maxContainersPerSample;
  }
  if (fits) return { pods, dropped: { pods: 0, containers: 0 } };
  const kept = pods.filter(named).slice(0, POD_BOUNDS.maxPodsPerSample);
  let left = POD_BOUNDS.maxContainersPerSample;
  let droppedContainers = 0;
  const out = kept.map((pod) => {
    const take = Math.min(pod.containers.length, POD_BOUNDS.maxContainersPerPod, left);
    left -= take;
    if (take === pod.containers.length) return pod;
    droppedContainers += pod.containers.length - take;
    return { ...pod, containers: pod.containers.slice(0, take) };
  });
  return { pods: out, dropped: { pods: pods.length - kept.length, containers: droppedContainers } };
}
