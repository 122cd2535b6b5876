// Alibaba's cluster-trace-v2018 (github.com/alibaba/clusterdata,
// cluster-trace-v2018/schema.txt): 8 days of about 4,000 machines. CSV files
// with no header row; columns as in the schema. Memory is normalized (0-100)
// and the trace does not say of what, so the reader is told the bytes of a
// machine whose mem_size is 100.
import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { idsNote } from './notes.js';
import {
  GapCounter, type PublicMachine, type PublicPod, type PublicWorkload, recorded, type Resources, samplingInterval, SeriesBuilder, TraceFormatError, type UsageSeries,
} from './public-workload.js';
import { columns, count, forEachRow, formatError, optionalCount, type RowSource, time } from './rows.js';

const FORMAT = 'alibaba-2018';

/** The schema's columns, in file order. */
export const ALIBABA_2018_COLUMNS = {
  machine_meta: ['machine_id', 'time_stamp', 'failure_domain_1', 'failure_domain_2', 'cpu_num', 'mem_size', 'status'],
  machine_usage: ['machine_id', 'time_stamp', 'cpu_util_percent', 'mem_util_percent', 'mem_gps', 'mkpi', 'net_in', 'net_out', 'disk_io_percent'],
  container_meta: ['container_id', 'machine_id', 'time_stamp', 'app_du', 'status', 'cpu_request', 'cpu_limit', 'mem_size'],
  container_usage: ['container_id', 'machine_id', 'time_stamp', 'cpu_util_percent', 'mem_util_percent', 'cpi', 'mem_gps', 'mpki', 'net_in', 'net_out', 'disk_io_percent'],
} as const;

type FileName = keyof typeof ALIBABA_2018_COLUMNS;

export interface Alibaba2018Options {
  /**
   * Bytes of memory of a machine whose mem_size is 100. The trace publishes
   * memory only normalized to 0-100, so every byte count scales with this.
   */
  machineMemoryBytes: number;
  /** How long each last sample holds; by default the most common gap between samples. */
  sampleSeconds?: number;
  /**
   * Keep only usage rows with from <= time_stamp < to (trace seconds): the
   * full container_usage.csv has hundreds of millions of rows, more samples
   * than fit in memory, while a window of it does.
   */
  window?: { from: number; to: number };
}

interface Latest<T> {
  t: number;
  value: T;
  changed: boolean;
}

/** Keeps, per id, the value of the row with the latest time_stamp (a later line wins a tie), and whether it ever changed. */
function keepLatest<T>(map: Map<string, Latest<T>>, id: string, t: number, value: T, same: (a: T, b: T) => boolean): void {
  const old = map.get(id);
  if (old === undefined) {
    map.set(id, { t, value, changed: false });
    return;
  }
  const changed = old.changed || !same(old.value, value);
  if (t >= old.t) map.set(id, { t, value, changed });
  else old.changed = changed;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}

const source = (dir: string, name: FileName): RowSource => ({ format: FORMAT, file: `${name}.csv`, path: join(dir, `${name}.csv`), separator: ',', headerless: true });

const sameResources = (a: Resources, b: Resources) => a.cpu === b.cpu && a.memory === b.memory;

/**
 * Reads machine_meta.csv and machine_usage.csv in DIR, and container_meta.csv
 * with container_usage.csv where both are there. Without the container files
 * the machines' total usage is all there is: no pods, requestsKnown false.
 */
export async function readAlibaba2018(dir: string, options: Alibaba2018Options): Promise<PublicWorkload> {
  const memory = options.machineMemoryBytes;
  if (!(memory > 0)) {
    throw new TraceFormatError(`${FORMAT}: the trace gives memory normalized to 0-100, not in bytes: give machineMemoryBytes, the memory of a machine whose mem_size is 100 (got ${memory})`);
  }
  const window = options.window;
  if (window !== undefined && !(window.from < window.to)) throw new TraceFormatError(`${FORMAT}: window from ${window.from} to ${window.to}: from must be before to`);
  const inWindow = (t: number) => window === undefined || (t >= window.from && t < window.to);

  for (const name of ['machine_meta', 'machine_usage'] as const) {
    if (!(await exists(join(dir, `${name}.csv`)))) {
      const packed = (await exists(join(dir, `${name}.tar.gz`))) ? ` (extract ${name}.tar.gz there first)` : '';
      throw new TraceFormatError(`${FORMAT}: ${dir} has no ${name}.csv${packed}: the trace's machines come from machine_meta.csv and machine_usage.csv`);
    }
  }
  const hasContainerMeta = await exists(join(dir, 'container_meta.csv'));
  const hasContainerUsage = await exists(join(dir, 'container_usage.csv'));
  if (hasContainerMeta !== hasContainerUsage) {
    const [has, lacks] = hasContainerMeta ? ['container_meta.csv', 'container_usage.csv'] : ['container_usage.csv', 'container_meta.csv'];
    throw new TraceFormatError(`${FORMAT}: ${dir} has ${has} but no ${lacks}: container usage is a percentage of the container's request, so both are needed (or neither, for the machines alone)`);
  }
  const notes: string[] = [
    `Memory in the trace is normalized to 0-100; read with mem_size 100 = ${memory} bytes, as given.`,
  ];

  // Machines: the capacity of each machine's latest machine_meta row.
  const metas = new Map<string, Latest<Resources>>();
  const cols = ALIBABA_2018_COLUMNS;
  await forEachRow(source(dir, 'machine_meta'), (f, p) => {
    columns(f, cols.machine_meta.length, p);
    const t = time(f, 1, 'time_stamp', p);
    const memSize = count(f, 5, 'mem_size', p);
    if (memSize > 100) throw formatError(p, `mem_size (column 6): expected a normalized size 0-100, got '${f[5]}'`);
    keepLatest(metas, f[0]!, t, { cpu: count(f, 4, 'cpu_num', p) * 1000, memory: (memSize / 100) * memory }, sameResources);
  });
  if (metas.size === 0) throw new TraceFormatError(`${FORMAT}: machine_meta.csv has no rows`);

  const machineSeries = new Map<string, SeriesBuilder>();
  const unknownMachines = new Set<string>();
  let machineGaps = 0;
  await forEachRow(source(dir, 'machine_usage'), (f, p) => {
    columns(f, cols.machine_usage.length, p);
    const t = time(f, 1, 'time_stamp', p);
    const cpu = optionalCount(f, 2, 'cpu_util_percent', p);
    const mem = optionalCount(f, 3, 'mem_util_percent', p);
    if (!inWindow(t)) return;
    const meta = metas.get(f[0]!);
    if (meta === undefined) {
      unknownMachines.add(f[0]!);
      return;
    }
    if (cpu === undefined || mem === undefined) {
      machineGaps += 1;
      return;
    }
    let b = machineSeries.get(f[0]!);
    if (b === undefined) machineSeries.set(f[0]!, (b = new SeriesBuilder()));
    b.add(t, (cpu / 100) * meta.value.cpu, (mem / 100) * meta.value.memory);
  });

  // Containers: the request of each one's latest container_meta row, usage as a share of it.
  interface ContainerMeta {
    machine: string;
    request: Resources;
    cpuLimit: number;
  }
  const containers = new Map<string, Latest<ContainerMeta>>();
  const containerSeries = new Map<string, SeriesBuilder>();
  const unknownContainers = new Set<string>();
  const noRequest = new Set<string>();
  let containerGaps = 0;
  if (hasContainerMeta) {
    await forEachRow(source(dir, 'container_meta'), (f, p) => {
      columns(f, cols.container_meta.length, p);
      const t = time(f, 2, 'time_stamp', p);
      const request = { cpu: count(f, 5, 'cpu_request', p) * 10, memory: (count(f, 7, 'mem_size', p) / 100) * memory };
      keepLatest(containers, f[0]!, t, { machine: f[1]!, request, cpuLimit: count(f, 6, 'cpu_limit', p) * 10 }, (a, b) => a.machine === b.machine && sameResources(a.request, b.request) && a.cpuLimit === b.cpuLimit);
    });
    await forEachRow(source(dir, 'container_usage'), (f, p) => {
      columns(f, cols.container_usage.length, p);
      const t = time(f, 2, 'time_stamp', p);
      const cpu = optionalCount(f, 3, 'cpu_util_percent', p);
      const mem = optionalCount(f, 4, 'mem_util_percent', p);
      if (!inWindow(t)) return;
      const meta = containers.get(f[0]!);
      if (meta === undefined) {
        unknownContainers.add(f[0]!);
        return;
      }
      // A percentage of a zero request is no reading at all: reported, never divided by.
      if (meta.value.request.cpu === 0 || meta.value.request.memory === 0) {
        noRequest.add(f[0]!);
        return;
      }
      if (cpu === undefined || mem === undefined) {
        containerGaps += 1;
        return;
      }
      let b = containerSeries.get(f[0]!);
      if (b === undefined) containerSeries.set(f[0]!, (b = new SeriesBuilder()));
      b.add(t, (cpu / 100) * meta.value.request.cpu, (mem / 100) * meta.value.request.memory);
    });
  }

  let origin = Number.POSITIVE_INFINITY;
  for (const b of machineSeries.values()) origin = Math.min(origin, b.first());
  for (const b of containerSeries.values()) origin = Math.min(origin, b.first());
  if (origin === Number.POSITIVE_INFINITY) {
    const span = window === undefined ? '' : ` from ${window.from} to ${window.to}`;
    throw new TraceFormatError(`${FORMAT}: no usage row${span} of a machine in machine_meta.csv${hasContainerMeta ? ' or of a container in container_meta.csv' : ''}: nothing to replay`);
  }

  const gaps = new GapCounter();
  const unordered: string[] = [];
  const repeated: string[] = [];
  const build = (id: string, b: SeriesBuilder | undefined): UsageSeries => {
    const s = (b ?? new SeriesBuilder()).build(origin);
    gaps.addSeries(s);
    if (b?.unordered) unordered.push(id);
    if ((b?.duplicates ?? 0) > 0) repeated.push(id);
    return s;
  };
  const machineUsage = [...metas.keys()].map((id) => build(id, machineSeries.get(id)));
  const podUsage = [...containerSeries.keys()].map((id) => build(id, containerSeries.get(id)));
  const sampleSeconds = samplingInterval(FORMAT, gaps, options.sampleSeconds);

  const machines: PublicMachine[] = [...metas.entries()].map(([id, m], i) => ({ id, capacity: m.value, ...recorded(machineUsage[i]!, sampleSeconds) }));
  const pods: PublicPod[] = [...containerSeries.keys()].map((id, i) => {
    const meta = containers.get(id)!.value;
    return { id, request: meta.request, cpuLimit: meta.cpuLimit, machine: meta.machine, ...recorded(podUsage[i]!, sampleSeconds) };
  });

  if (hasContainerMeta) {
    notes.push(
      'Container requests from container_meta (its latest row): cpu_request and cpu_limit with 100 = 1 core, mem_size on the machines\' 0-100 scale.',
      'Container cpu_util_percent is a percentage of the container\'s cpu_request (the trace\'s maintainers, alibaba/clusterdata#62); mem_util_percent is read as a percentage of its mem_size (the schema does not say).',
      'machine_usage also counts the batch tasks (batch_task.csv, batch_instance.csv, not read): a machine\'s usage is more than the sum of its containers\'.',
    );
  } else {
    notes.push(`container_meta.csv and container_usage.csv are not in ${dir}: only the machines' total usage is known, not what ran on them or what it requested. Requests are unknown: policies must not be compared on requests from this trace.`);
  }
  const changedMachines = [...metas.entries()].filter(([, m]) => m.changed).map(([id]) => id);
  idsNote(notes, changedMachines, 'machine', 'capacity changes between machine_meta rows: the latest is used.');
  idsNote(notes, [...metas.keys()].filter((id) => !machineSeries.has(id)), 'machine', `no usage row${window === undefined ? '' : ' in the window'}: capacity only.`);
  idsNote(notes, [...unknownMachines], 'machine', 'in machine_usage.csv but not in machine_meta.csv: skipped (no capacity to scale its percentages by).');
  if (machineGaps > 0) notes.push(`${machineGaps} machine_usage rows without cpu_util_percent or mem_util_percent: skipped.`);
  if (hasContainerMeta) {
    const changedContainers = [...containers.entries()].filter(([, c]) => c.changed).map(([id]) => id);
    idsNote(notes, changedContainers, 'container', 'request, limit or machine changes between container_meta rows: the latest is used.');
    idsNote(notes, [...noRequest], 'container', 'cpu_request or mem_size is 0, so its usage percentages are of nothing: skipped.');
    idsNote(notes, [...unknownContainers], 'container', 'in container_usage.csv but not in container_meta.csv: skipped (no request to scale its percentages by).');
    idsNote(notes, [...containers.keys()].filter((id) => !containerSeries.has(id) && !noRequest.has(id)), 'container', `in container_meta.csv with no usage row${window === undefined ? '' : ' in the window'}: skipped.`);
    if (containerGaps > 0) notes.push(`${containerGaps} container_usage rows without cpu_util_percent or mem_util_percent: skipped.`);
  }
  idsNote(notes, unordered, 'machine or container', 'rows out of time order: sorted.');
  idsNote(notes, repeated, 'machine or container', 'rows repeat a time_stamp: one sample kept per time, with the higher CPU and the higher memory.');

  let durationSeconds = 0;
  for (const x of [...machines, ...pods]) durationSeconds = Math.max(durationSeconds, x.end);
  return { format: FORMAT, pods, machines, requestsKnown: hasContainerMeta, notes, originSeconds: origin, sampleSeconds, durationSeconds };
}
