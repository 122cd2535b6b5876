// The scenario: cluster, workload and policies of a simulation, with the
// defaults docs/simulate.md documents (examples/simulate.yaml spells them out).
// A file gives only what it changes; flags change a few fields after it.
// Everything read from a file is checked here, and an error names the field.
import { parseBytes, parseMilli } from '../lib/quantity.js';

export interface Quantities {
  /** Millicores. */
  cpu: number;
  /** Bytes. */
  memory: number;
}

/**
 * Who a class's pods are to the kubelet, the kernel and oversell's tiers: QoS
 * (Guaranteed: limits equal to requests; Burstable: requests below limits;
 * BestEffort pods request nothing and are not modelled: the model places by
 * requests) and spec.priority. Left out: Burstable at priority 0.
 */
export interface PodClassTier {
  qos?: 'Guaranteed' | 'Burstable';
  priority?: number;
}

export interface DeploymentClass extends PodClassTier {
  name: string;
  kind: 'deployment';
  requests: Quantities;
  /** Replicas per node of the cluster at the quietest and the busiest hour; the count follows the daily curve. */
  replicasPerNode: { min: number; max: number };
}

export interface JobClass extends PodClassTier {
  name: string;
  kind: 'job';
  requests: Quantities;
  /** Poisson arrivals per hour and node of the cluster. */
  arrivalsPerNodeHour: number;
  /** Mean running time (exponential); a job runs that long once started, and starts again if evicted. */
  durationMinutes: number;
}

export type PodClass = DeploymentClass | JobClass;

export interface OversellPolicyInput {
  name: string;
  /** An OversellPolicy spec, as in the cluster; read by the gateway's own parser. nodeSelector may be left out. */
  spec: Record<string, unknown>;
}

export interface Scenario {
  seed: number;
  nodes: number;
  hours: number;
  /**
   * Hours run before the measured ones, on the same daily curve (the day
   * before), and not measured: a cluster that has run oversell for a day,
   * whose policies have a history to learn from.
   */
  warmupHours: number;
  /** Simulated seconds per step: the agent's sampling interval and the kubelet's status interval in the model. */
  tickSeconds: number;
  node: {
    capacity: Quantities;
    /** kube-reserved + system-reserved: capacity minus this minus evictionHard is allocatable. */
    reserved: Quantities;
    /** The kubelet evicts when the node's memory use comes within this of capacity. */
    evictionHardMemory: number;
    /** What the system (kubelet, runtime, OS) uses; part of the node's usage. */
    systemUsage: Quantities;
    /** The kubelet's maxPods: a node takes no more pods, whatever its allocatable. */
    maxPods: number;
  };
  usage: {
    /** Mean (request - usage) / request over pods and the day: 0.46 is Autopilot's figure for manually sized jobs. */
    cpuSlack: number;
    memorySlack: number;
    /** How widely pods differ around that mean (a Beta distribution's a + b: larger is narrower). */
    concentration: number;
    /** Every pod's usage multiplied by this (--usage-scale). */
    scale: number;
    /** From this hour on, usage is multiplied by `factor` as well, reached over rampMinutes (0: at once): a cluster busier than its history. */
    step: { atHour: number; factor: number; rampMinutes: number } | undefined;
    /** Hour of the daily peak, and how far each pod's usage swings around its mean (+-share) over the day. */
    diurnal: { peakHour: number; cpuSwing: number; memorySwing: number };
    /** Share of time a pod's CPU bursts, by how much, and for how long. */
    bursts: { share: number; factor: number; seconds: number };
    /** Memory climbs from (1 - swing) to (1 + swing) of its mean over a period of the pod's life, then is freed. */
    memoryGrowth: { swing: number; periodHours: number };
    /**
     * A pod uses nothing for this long after it is bound (image pull, container
     * start), while its requests count at once: the decision sees requests
     * before usage, as on a real node.
     */
    startSeconds: number;
  };
  classes: PodClass[];
  policies: {
    /** allocatable x ratio, always: the sample webhooks and Koordinator's amplification ratio. */
    static: { cpu: number; memory: number };
    /** Katalyst's realtime formula; targets and load floor default to the default OversellPolicy's. */
    katalyst: { cpuTarget: number; memoryTarget: number; minLoadFactor: number };
    /** Koordinator's batch resources: reclaim thresholds as shares of capacity (its code's defaults: 60 % CPU, 65 % memory). */
    koordinator: { cpuThreshold: number; memoryThreshold: number };
    /** Crane's elastic resources: reserve shares of allocatable (crane-agent's default: none), and the forecast that stands in for its 1-hour prediction. */
    crane: { cpuReserve: number; memoryReserve: number; forecastPercentile: number; forecastWindowMinutes: number };
    /** Bashir et al.'s peak predictor: max(mean + n x sd of the node's usage, sum of per-pod percentiles), both over a trailing window. */
    peakPredictor: { n: number; percentile: number; windowMinutes: number };
    /** OversellPolicies, each run on the whole cluster. Empty: the default policy, named "oversell". */
    oversell: OversellPolicyInput[];
  };
}

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

export const DEFAULT_SCENARIO: Scenario = {
  seed: 1,
  nodes: 100,
  hours: 24,
  warmupHours: 24,
  tickSeconds: 10,
  node: {
    capacity: { cpu: 16_000, memory: 64 * GiB },
    reserved: { cpu: 500, memory: 2 * GiB },
    evictionHardMemory: 100 * MiB,
    systemUsage: { cpu: 300, memory: 1.5 * GiB },
    maxPods: 110,
  },
  usage: {
    cpuSlack: 0.46,
    memorySlack: 0.46,
    concentration: 8,
    scale: 1,
    step: undefined,
    diurnal: { peakHour: 14, cpuSwing: 0.15, memorySwing: 0.05 },
    bursts: { share: 0.02, factor: 2, seconds: 60 },
    memoryGrowth: { swing: 0.15, periodHours: 6 },
    startSeconds: 20,
  },
  // The tiers (docs/simulate.md, Tiers): caches Guaranteed, a system-cluster-critical
  // Deployment (protected); the rest Burstable, the API at a higher priority than the rest.
  classes: [
    { name: 'web', kind: 'deployment', requests: { cpu: 500, memory: 1 * GiB }, replicasPerNode: { min: 8, max: 18 }, qos: 'Burstable', priority: 0 },
    { name: 'api', kind: 'deployment', requests: { cpu: 1000, memory: 4 * GiB }, replicasPerNode: { min: 4, max: 8 }, qos: 'Burstable', priority: 1000 },
    { name: 'cache', kind: 'deployment', requests: { cpu: 250, memory: 4 * GiB }, replicasPerNode: { min: 2.5, max: 3.5 }, qos: 'Guaranteed', priority: 1000 },
    { name: 'batch', kind: 'job', requests: { cpu: 2000, memory: 4 * GiB }, arrivalsPerNodeHour: 1.5, durationMinutes: 60, qos: 'Burstable', priority: 0 },
    { name: 'etl', kind: 'job', requests: { cpu: 1000, memory: 8 * GiB }, arrivalsPerNodeHour: 0.4, durationMinutes: 90, qos: 'Burstable', priority: 0 },
    { name: 'system', kind: 'deployment', requests: { cpu: 500, memory: 1 * GiB }, replicasPerNode: { min: 1, max: 1 }, qos: 'Burstable', priority: 2_000_000_000 },
  ],
  policies: {
    static: { cpu: 1.5, memory: 1.5 },
    katalyst: { cpuTarget: 0.6, memoryTarget: 0.8, minLoadFactor: 0.1 },
    koordinator: { cpuThreshold: 0.6, memoryThreshold: 0.65 },
    crane: { cpuReserve: 0, memoryReserve: 0, forecastPercentile: 0.95, forecastWindowMinutes: 60 },
    peakPredictor: { n: 5, percentile: 0.99, windowMinutes: 60 },
    oversell: [],
  },
};

export class ScenarioError extends Error {
  override name = 'ScenarioError';
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Reads one object of the file against its defaults, naming fields by their path. */
class Reader {
  constructor(
    readonly obj: Obj,
    readonly path: string,
  ) {}

  static of(v: unknown, path: string): Reader {
    if (v === undefined || v === null) return new Reader({}, path);
    if (!isObj(v)) throw new ScenarioError(`${path || 'the scenario'} must be a mapping, got ${JSON.stringify(v)}`);
    return new Reader(v, path);
  }

  at(key: string): string {
    return this.path ? `${this.path}.${key}` : key;
  }

  /** Refuses keys this reader does not know: a typo must not silently keep a default. */
  only(keys: readonly string[]): this {
    for (const k of Object.keys(this.obj)) if (!keys.includes(k)) throw new ScenarioError(`${this.at(k)} is not a scenario field (known here: ${keys.join(', ')})`);
    return this;
  }

  child(key: string): Reader {
    return Reader.of(this.obj[key], this.at(key));
  }

  number(key: string, fallback: number, min: number, max: number, integer = false): number {
    const v = this.obj[key];
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
      throw new ScenarioError(`${this.at(key)} must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got ${JSON.stringify(v)}`);
    }
    return v;
  }

  /** A Kubernetes quantity ("500m", "4Gi"); a bare number is cores or bytes. */
  quantity(key: string, fallback: number, resource: 'cpu' | 'memory'): number {
    const v = this.obj[key];
    if (v === undefined) return fallback;
    const text = typeof v === 'number' ? String(v) : v;
    let n: bigint;
    try {
      n = resource === 'cpu' ? parseMilli(text, this.at(key)) : parseBytes(text, this.at(key));
    } catch (err) {
      throw new ScenarioError(`${this.at(key)} must be a quantity like ${resource === 'cpu' ? '"500m" or 2' : '"4Gi"'}: ${(err as Error).message}`);
    }
    if (n < 0n) throw new ScenarioError(`${this.at(key)} must not be negative`);
    return Number(n);
  }

  quantities(key: string, fallback: Quantities): Quantities {
    const r = this.child(key).only(['cpu', 'memory']);
    return { cpu: r.quantity('cpu', fallback.cpu, 'cpu'), memory: r.quantity('memory', fallback.memory, 'memory') };
  }

  string(key: string): string {
    const v = this.obj[key];
    if (typeof v !== 'string' || v === '') throw new ScenarioError(`${this.at(key)} must be a non-empty string`);
    return v;
  }
}

function podClass(v: unknown, path: string): PodClass {
  const r = Reader.of(v, path);
  const name = r.string('name');
  const kind = r.obj.kind ?? 'deployment';
  const requests = r.quantities('requests', { cpu: -1, memory: -1 });
  if (requests.cpu <= 0 || requests.memory <= 0) throw new ScenarioError(`${r.at('requests')} needs cpu and memory above zero`);
  const qos = r.obj.qos ?? 'Burstable';
  if (qos !== 'Guaranteed' && qos !== 'Burstable') throw new ScenarioError(`${r.at('qos')} must be Guaranteed or Burstable (BestEffort pods request nothing: the model places by requests), got ${JSON.stringify(qos)}`);
  // PriorityClass values: user classes up to 1e9, system-node-critical 2000001000.
  const tier = { qos, priority: r.number('priority', 0, -(2 ** 31), 2_000_001_000, true) } as const;
  if (kind === 'deployment') {
    r.only(['name', 'kind', 'requests', 'replicasPerNode', 'qos', 'priority']);
    const rep = r.child('replicasPerNode').only(['min', 'max']);
    const min = rep.number('min', -1, 0, 1e4);
    const max = rep.number('max', -1, 0, 1e4);
    if (min < 0 || max < min) throw new ScenarioError(`${r.at('replicasPerNode')} needs numbers min and max with min <= max`);
    return { name, kind, requests, replicasPerNode: { min, max }, ...tier };
  }
  if (kind === 'job') {
    r.only(['name', 'kind', 'requests', 'arrivalsPerNodeHour', 'durationMinutes', 'qos', 'priority']);
    return { name, kind, requests, arrivalsPerNodeHour: r.number('arrivalsPerNodeHour', 0, 0, 1e4), durationMinutes: r.number('durationMinutes', 60, 0.1, 1e6), ...tier };
  }
  throw new ScenarioError(`${r.at('kind')} must be deployment or job, got ${JSON.stringify(kind)}`);
}

function oversellPolicy(v: unknown, path: string): OversellPolicyInput {
  const r = Reader.of(v, path);
  // An OversellPolicy object as kubectl would take it, or just a name and a spec.
  const meta = Reader.of(r.obj.metadata, r.at('metadata'));
  const name = typeof r.obj.name === 'string' ? r.string('name') : meta.string('name');
  const spec = r.obj.spec ?? {};
  if (!isObj(spec)) throw new ScenarioError(`${r.at('spec')} must be a mapping`);
  return { name, spec };
}

/** The scenario a file describes (undefined: the defaults). Throws ScenarioError naming the field. */
export function parseScenario(file: unknown, base: Scenario = DEFAULT_SCENARIO): Scenario {
  const r = Reader.of(file, '').only(['seed', 'nodes', 'hours', 'warmupHours', 'tickSeconds', 'node', 'usage', 'classes', 'policies']);
  const node = r.child('node').only(['capacity', 'reserved', 'evictionHardMemory', 'systemUsage', 'maxPods']);
  const usage = r.child('usage').only(['cpuSlack', 'memorySlack', 'concentration', 'scale', 'step', 'diurnal', 'bursts', 'memoryGrowth', 'startSeconds']);
  const diurnal = usage.child('diurnal').only(['peakHour', 'cpuSwing', 'memorySwing']);
  const bursts = usage.child('bursts').only(['share', 'factor', 'seconds']);
  const growth = usage.child('memoryGrowth').only(['swing', 'periodHours']);
  const policies = r.child('policies').only(['static', 'katalyst', 'koordinator', 'crane', 'peakPredictor', 'oversell']);
  const st = policies.child('static').only(['cpu', 'memory']);
  const kat = policies.child('katalyst').only(['cpuTarget', 'memoryTarget', 'minLoadFactor']);
  const koord = policies.child('koordinator').only(['cpuThreshold', 'memoryThreshold']);
  const crane = policies.child('crane').only(['cpuReserve', 'memoryReserve', 'forecastPercentile', 'forecastWindowMinutes']);
  const peak = policies.child('peakPredictor').only(['n', 'percentile', 'windowMinutes']);
  const b = base;

  let step = b.usage.step;
  if (usage.obj.step !== undefined) {
    const s = usage.child('step').only(['atHour', 'factor', 'rampMinutes']);
    step = usage.obj.step === null ? undefined : { atHour: s.number('atHour', 12, 0, 1e6), factor: s.number('factor', 1.3, 0, 100), rampMinutes: s.number('rampMinutes', 0, 0, 1e6) };
  }
  let classes = b.classes;
  if (r.obj.classes !== undefined) {
    if (!Array.isArray(r.obj.classes) || r.obj.classes.length === 0) throw new ScenarioError('classes must be a non-empty list of pod classes');
    classes = r.obj.classes.map((c, i) => podClass(c, `classes[${i}]`));
    const names = classes.map((c) => c.name);
    const dup = names.find((n, i) => names.indexOf(n) !== i);
    if (dup) throw new ScenarioError(`classes: the name ${JSON.stringify(dup)} is used twice`);
  }
  let oversell = b.policies.oversell;
  if (policies.obj.oversell !== undefined) {
    if (!Array.isArray(policies.obj.oversell)) throw new ScenarioError('policies.oversell must be a list of OversellPolicies');
    oversell = policies.obj.oversell.map((p, i) => oversellPolicy(p, `policies.oversell[${i}]`));
  }

  const scenario: Scenario = {
    seed: r.number('seed', b.seed, 0, 2 ** 32 - 1, true),
    nodes: r.number('nodes', b.nodes, 1, 100_000, true),
    hours: r.number('hours', b.hours, 0.01, 24 * 365),
    warmupHours: r.number('warmupHours', b.warmupHours, 0, 24 * 7),
    tickSeconds: r.number('tickSeconds', b.tickSeconds, 1, 3600, true),
    node: {
      capacity: node.quantities('capacity', b.node.capacity),
      reserved: node.quantities('reserved', b.node.reserved),
      evictionHardMemory: node.quantity('evictionHardMemory', b.node.evictionHardMemory, 'memory'),
      systemUsage: node.quantities('systemUsage', b.node.systemUsage),
      maxPods: node.number('maxPods', b.node.maxPods, 1, 10_000, true),
    },
    usage: {
      cpuSlack: usage.number('cpuSlack', b.usage.cpuSlack, 0.01, 0.99),
      memorySlack: usage.number('memorySlack', b.usage.memorySlack, 0.01, 0.99),
      concentration: usage.number('concentration', b.usage.concentration, 0.5, 1000),
      scale: usage.number('scale', b.usage.scale, 0, 100),
      step,
      diurnal: {
        peakHour: diurnal.number('peakHour', b.usage.diurnal.peakHour, 0, 24),
        cpuSwing: diurnal.number('cpuSwing', b.usage.diurnal.cpuSwing, 0, 0.99),
        memorySwing: diurnal.number('memorySwing', b.usage.diurnal.memorySwing, 0, 0.99),
      },
      bursts: {
        share: bursts.number('share', b.usage.bursts.share, 0, 1),
        factor: bursts.number('factor', b.usage.bursts.factor, 1, 100),
        seconds: bursts.number('seconds', b.usage.bursts.seconds, 1, 86_400),
      },
      memoryGrowth: { swing: growth.number('swing', b.usage.memoryGrowth.swing, 0, 0.99), periodHours: growth.number('periodHours', b.usage.memoryGrowth.periodHours, 0.01, 1e5) },
      startSeconds: usage.number('startSeconds', b.usage.startSeconds, 0, 86_400),
    },
    classes,
    policies: {
      static: { cpu: st.number('cpu', b.policies.static.cpu, 1, 100), memory: st.number('memory', b.policies.static.memory, 1, 100) },
      katalyst: {
        cpuTarget: kat.number('cpuTarget', b.policies.katalyst.cpuTarget, 0.01, 1),
        memoryTarget: kat.number('memoryTarget', b.policies.katalyst.memoryTarget, 0.01, 1),
        minLoadFactor: kat.number('minLoadFactor', b.policies.katalyst.minLoadFactor, 0.01, 1),
      },
      koordinator: {
        cpuThreshold: koord.number('cpuThreshold', b.policies.koordinator.cpuThreshold, 0, 1),
        memoryThreshold: koord.number('memoryThreshold', b.policies.koordinator.memoryThreshold, 0, 1),
      },
      crane: {
        cpuReserve: crane.number('cpuReserve', b.policies.crane.cpuReserve, 0, 1),
        memoryReserve: crane.number('memoryReserve', b.policies.crane.memoryReserve, 0, 1),
        forecastPercentile: crane.number('forecastPercentile', b.policies.crane.forecastPercentile, 0, 1),
        forecastWindowMinutes: crane.number('forecastWindowMinutes', b.policies.crane.forecastWindowMinutes, 1, 7 * 24 * 60, true),
      },
      peakPredictor: {
        n: peak.number('n', b.policies.peakPredictor.n, 0, 100),
        percentile: peak.number('percentile', b.policies.peakPredictor.percentile, 0, 1),
        windowMinutes: peak.number('windowMinutes', b.policies.peakPredictor.windowMinutes, 1, 7 * 24 * 60, true),
      },
      oversell,
    },
  };
  const n = scenario.node;
  if (n.reserved.cpu >= n.capacity.cpu || n.reserved.memory + n.evictionHardMemory >= n.capacity.memory) {
    throw new ScenarioError('node.reserved (and evictionHardMemory) must leave allocatable above zero');
  }
  return scenario;
}

/** The flags of `oversell simulate` that change the scenario. */
export interface ScenarioOverrides {
  nodes?: number | undefined;
  hours?: number | undefined;
  warmupHours?: number | undefined;
  seed?: number | undefined;
  usageScale?: number | undefined;
}

export function applyOverrides(s: Scenario, o: ScenarioOverrides): Scenario {
  return parseScenario(
    {
      ...(o.nodes !== undefined && { nodes: o.nodes }),
      ...(o.hours !== undefined && { hours: o.hours }),
      ...(o.warmupHours !== undefined && { warmupHours: o.warmupHours }),
      ...(o.seed !== undefined && { seed: o.seed }),
      ...(o.usageScale !== undefined && { usage: { scale: o.usageScale } }),
    },
    s,
  );
}

/** Allocatable the kubelet computes for the scenario's node shape. */
export function rawAllocatable(s: Scenario): Quantities {
  const n = s.node;
  return { cpu: n.capacity.cpu - n.reserved.cpu, memory: n.capacity.memory - n.reserved.memory - n.evictionHardMemory };
}
