// The Grid Workloads Archive's GWA-T-12 Bitbrains trace: one file per VM
// (fastStorage/N.csv, Rnd/2013-M/N.csv), a row per 5 minutes, columns
// separated by ';\t'. A VM is a pod whose provisioned size is its request.
// The trace has no hosts: the simulator packs the VMs onto nodes it is given.
import { readdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { idsNote } from './notes.js';
import { GapCounter, type PublicPod, type PublicWorkload, recorded, samplingInterval, SeriesBuilder, TraceFormatError } from './public-workload.js';
import { columns, count, forEachRow, formatError, type RowSource } from './rows.js';

const FORMAT = 'bitbrains';
const COLUMNS = 11;
export const BITBRAINS_HEADER = [
  'Timestamp [ms]', 'CPU cores', 'CPU capacity provisioned [MHZ]', 'CPU usage [MHZ]', 'CPU usage [%]', 'Memory capacity provisioned [KB]',
  'Memory usage [KB]', 'Disk read throughput [KB/s]', 'Disk write throughput [KB/s]', 'Network received throughput [KB/s]', 'Network transmitted throughput [KB/s]',
].join(';\t');

// Epoch seconds reach 1e11 in the year 5138; epoch milliseconds passed it in 1973.
const MILLISECONDS_FROM = 1e11;
const KiB = 1024;

export interface BitbrainsOptions {
  /** How long each VM's last sample holds; by default the most common gap between samples (300 s in the published trace). */
  sampleSeconds?: number;
}

interface Row {
  t: number;
  cores: number;
  capacityMHz: number;
  usageMHz: number;
  memoryKB: number;
  memoryUsageKB: number;
}

interface FileResult {
  id: string;
  rows: Row[];
  unit: 's' | 'ms';
  headerUnit: string | undefined;
}

/** The VM files: PATH itself, or the *.csv files directly in the directory PATH, in the order of their numbers. */
async function vmFiles(path: string): Promise<string[]> {
  let info;
  try {
    info = await stat(path);
  } catch (err) {
    throw new TraceFormatError(`${FORMAT}: cannot read ${path}: ${(err as Error).message}`);
  }
  if (!info.isDirectory()) return [path];
  const names = (await readdir(path, { withFileTypes: true })).filter((e) => e.isFile() && /\.csv$/i.test(e.name)).map((e) => e.name);
  if (names.length === 0) {
    throw new TraceFormatError(`${FORMAT}: ${path} has no .csv files: give the directory of the VM files (fastStorage, or one month of Rnd such as Rnd/2013-7) or one file`);
  }
  names.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  return names.map((n) => join(path, n));
}

const isNumber = (s: string) => s !== '' && Number.isFinite(Number(s));

async function readFile(path: string): Promise<FileResult> {
  const file = basename(path);
  const source: RowSource = { format: FORMAT, file, path, separator: ';' };
  const rows: Row[] = [];
  let unit: 's' | 'ms' | undefined;
  let headerUnit: string | undefined;
  let first = true;
  await forEachRow(source, (f, p) => {
    // The published files end some lines with the separator.
    if (f.length === COLUMNS + 1 && f[COLUMNS] === '') f.pop();
    if (first) {
      first = false;
      if (!isNumber(f[0]!)) {
        if (!/^timestamp/i.test(f[0]!) || f.length !== COLUMNS) throw formatError(p, `expected a header of ${COLUMNS} ;-separated columns starting 'Timestamp' (${BITBRAINS_HEADER.split(';\t').slice(0, 3).join('; ')}; ...) or a row of ${COLUMNS} numbers, got '${f.join(';')}'`);
        headerUnit = /\[(\w+)\]/.exec(f[0]!)?.[1];
        return;
      }
    }
    columns(f, COLUMNS, p);
    const stamp = count(f, 0, 'Timestamp', p);
    const rowUnit = stamp >= MILLISECONDS_FROM ? 'ms' : 's';
    unit ??= rowUnit;
    if (rowUnit !== unit) throw formatError(p, `Timestamp ${f[0]} is in ${rowUnit === 'ms' ? 'milliseconds' : 'seconds'} since 1970 but the file's first row is in ${unit === 'ms' ? 'milliseconds' : 'seconds'}`);
    rows.push({
      t: unit === 'ms' ? stamp / 1000 : stamp,
      cores: count(f, 1, 'CPU cores', p),
      capacityMHz: count(f, 2, 'CPU capacity provisioned [MHZ]', p),
      usageMHz: count(f, 3, 'CPU usage [MHZ]', p),
      memoryKB: count(f, 5, 'Memory capacity provisioned [KB]', p),
      memoryUsageKB: count(f, 6, 'Memory usage [KB]', p),
    });
  });
  if (rows.length === 0) throw new TraceFormatError(`${FORMAT}: ${file} has no rows`);
  return { id: file.replace(/\.csv$/i, ''), rows, unit: unit!, headerUnit };
}

/**
 * Reads the Bitbrains VMs at PATH (a directory of N.csv files, or one file).
 * Requests are the provisioned sizes: CPU cores x 1000 millicores, memory KB
 * x 1024 bytes. CPU usage in cores is usage MHz over the VM's MHz per core.
 */
export async function readBitbrains(path: string, options: BitbrainsOptions = {}): Promise<PublicWorkload> {
  const files = await vmFiles(path);
  const notes: string[] = [
    'Bitbrains has no hosts: the VMs are the workload, placed onto nodes of the stated shape by the scheduler\'s fit check.',
    'Each VM\'s request is its provisioned size: CPU cores x 1000 millicores, provisioned memory KB x 1024 bytes; CPU usage in millicores is usage MHz / (capacity MHz / cores) x 1000.',
  ];
  const noMemory: string[] = [];
  const noCpu: string[] = [];
  const resized: string[] = [];
  const unordered: string[] = [];
  const repeated: string[] = [];
  let secondsUnderMs = 0;
  let milliseconds = 0;
  const vms: { id: string; request: { cpu: number; memory: number }; builder: SeriesBuilder }[] = [];
  for (const file of files) {
    const r = await readFile(file);
    if (r.unit === 's' && r.headerUnit === 'ms') secondsUnderMs += 1;
    if (r.unit === 'ms') milliseconds += 1;
    let cores = 0;
    let memoryKB = 0;
    let minCores = Number.POSITIVE_INFINITY;
    let minMemoryKB = Number.POSITIVE_INFINITY;
    let mhzPerCore: number | undefined;
    for (const row of r.rows) {
      cores = Math.max(cores, row.cores);
      memoryKB = Math.max(memoryKB, row.memoryKB);
      minCores = Math.min(minCores, row.cores);
      minMemoryKB = Math.min(minMemoryKB, row.memoryKB);
      if (mhzPerCore === undefined && row.cores > 0 && row.capacityMHz > 0) mhzPerCore = row.capacityMHz / row.cores;
    }
    // A VM provisioned with no memory or no CPU has no size to request and no
    // speed to turn MHz into cores: reported, never divided by.
    if (memoryKB === 0) {
      noMemory.push(r.id);
      continue;
    }
    if (cores === 0 || mhzPerCore === undefined) {
      noCpu.push(r.id);
      continue;
    }
    if (minCores !== cores || minMemoryKB !== memoryKB) resized.push(r.id);
    const builder = new SeriesBuilder();
    for (const row of r.rows) {
      // A row without its own capacity (a VM switched off) keeps the VM's speed per core.
      const perCore = row.cores > 0 && row.capacityMHz > 0 ? row.capacityMHz / row.cores : mhzPerCore;
      builder.add(row.t, (row.usageMHz / perCore) * 1000, row.memoryUsageKB * KiB);
    }
    vms.push({ id: r.id, request: { cpu: cores * 1000, memory: memoryKB * KiB }, builder });
  }
  if (vms.length === 0) {
    throw new TraceFormatError(`${FORMAT}: no VM in ${path} has both provisioned memory and CPU (${noMemory.length} without memory, ${noCpu.length} without CPU)`);
  }
  const origin = vms.reduce((m, v) => Math.min(m, v.builder.first()), Number.POSITIVE_INFINITY);
  const gaps = new GapCounter();
  const series = vms.map((v) => {
    const s = v.builder.build(origin);
    gaps.addSeries(s);
    if (v.builder.unordered) unordered.push(v.id);
    if (v.builder.duplicates > 0) repeated.push(v.id);
    return s;
  });
  const sampleSeconds = samplingInterval(FORMAT, gaps, options.sampleSeconds);
  const pods: PublicPod[] = vms.map((v, i) => ({ id: v.id, request: v.request, ...recorded(series[i]!, sampleSeconds) }));

  const nFiles = (n: number) => (n === 1 ? '1 file' : `${n} files`);
  if (secondsUnderMs > 0) notes.push(`${nFiles(secondsUnderMs)} with Timestamp [ms] in the header hold epoch seconds (as the published GWA-T-12 files do): read as seconds.`);
  if (milliseconds > 0) notes.push(`${nFiles(milliseconds)} with epoch milliseconds: read as milliseconds.`);
  idsNote(notes, noMemory, 'VM', 'provisioned memory is 0 in every row: skipped (no request to place it by).');
  idsNote(notes, noCpu, 'VM', 'no row provisions CPU cores with a capacity in MHz: skipped (no request, and no MHz per core to turn usage into cores).');
  idsNote(notes, resized, 'VM', 'provisioned size changes during the trace: the request is the largest.');
  idsNote(notes, unordered, 'VM', 'rows out of time order: sorted.');
  idsNote(notes, repeated, 'VM', 'rows repeat a timestamp: one sample kept per time, with the higher CPU and the higher memory.');
  const durationSeconds = pods.reduce((m, p) => Math.max(m, p.end), 0);
  return { format: FORMAT, pods, machines: undefined, requestsKnown: true, notes, originSeconds: origin, sampleSeconds, durationSeconds };
}
