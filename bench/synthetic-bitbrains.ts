// Writes a synthetic trace in the Bitbrains (GWA-T-12) file format, for the
// CPU measurements on coarse, spiky data (docs/simulate.md). The published
// trace cannot be downloaded here; this one is shaped after what its paper
// reports: VMs of 1 to 8 cores and 2 to 32 GiB, 5-minute rows, CPU use far
// below what is provisioned with a heavy tail across VMs, a daily curve and
// rare spikes close to the VM's full size.
//
//   node --import tsx bench/synthetic-bitbrains.ts DIR [--vms 400] [--days 7] [--seed 1] [--spikes 0.02] [--spread 0.9] [--no-spikes] [--alike]
//
// --alike gives every VM the same mean CPU share (the spread across VMs is
// what the node's own history cannot foresee); --no-spikes drops the spikes.
// --spikes is the share of rows at 70-100 % of the VM's cores; --spread the
// sigma of the log-normal mean CPU share across VMs (median 10 %).
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { BITBRAINS_HEADER } from '../sim/traces/bitbrains.js';
import { Rng } from '../sim/random.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    vms: { type: 'string', default: '400' },
    days: { type: 'string', default: '7' },
    seed: { type: 'string', default: '1' },
    spikes: { type: 'string', default: '0.02' },
    spread: { type: 'string', default: '0.9' },
    'no-spikes': { type: 'boolean', default: false },
    alike: { type: 'boolean', default: false },
  },
});
const dir = positionals[0];
if (!dir) {
  console.error('usage: synthetic-bitbrains.ts DIR [--vms N] [--days N] [--seed N] [--spikes SHARE] [--spread SIGMA] [--no-spikes] [--alike]');
  process.exit(2);
}
const vms = Number(values.vms);
const rows = Math.round((Number(values.days) * 86_400) / 300);
const rng = new Rng(Number(values.seed));
const MHZ_PER_CORE = 2_600;
const START_S = 1_376_314_846; // the published fastStorage files start in August 2013
const SPIKE_SHARE = Number(values.spikes);
const SPREAD = Number(values.spread);
const CORES = [1, 1, 2, 2, 2, 4, 4, 8];
const GIB_KB = 1024 * 1024;

const logNormal = (median: number, sigma: number) => median * Math.exp(sigma * rng.normal());
const daily = (t: number) => 0.75 + 0.5 * Math.max(0, Math.sin(((t % 86_400) / 86_400) * 2 * Math.PI - Math.PI / 2));

await mkdir(dir, { recursive: true });
let cpuUsed = 0;
let cpuProvisioned = 0;
let memUsed = 0;
let memProvisioned = 0;
for (let vm = 1; vm <= vms; vm += 1) {
  const cores = CORES[Math.floor(rng.next() * CORES.length)]!;
  const memoryKB = Math.round((2 + rng.next() * 30) * GIB_KB);
  const cpuShare = values.alike ? 0.1 : Math.min(0.9, logNormal(0.1, SPREAD));
  const memShare = Math.min(0.9, logNormal(0.09, 0.5));
  const lines = [BITBRAINS_HEADER];
  for (let r = 0; r < rows; r += 1) {
    const t = START_S + r * 300;
    const spike = !values['no-spikes'] && rng.next() < SPIKE_SHARE;
    const share = spike ? 0.7 + 0.3 * rng.next() : Math.min(1, cpuShare * daily(t) * logNormal(1, 0.3));
    const mem = Math.min(1, memShare * logNormal(1, 0.1));
    const usageMHz = share * cores * MHZ_PER_CORE;
    cpuUsed += share * cores;
    cpuProvisioned += cores;
    memUsed += mem * memoryKB;
    memProvisioned += memoryKB;
    lines.push([t, cores, cores * MHZ_PER_CORE, usageMHz.toFixed(3), (share * 100).toFixed(3), memoryKB, Math.round(mem * memoryKB), 0, 0, 0, 0].join(';\t'));
  }
  await writeFile(join(dir, `${vm}.csv`), `${lines.join('\n')}\n`);
}
console.log(`${vms} VMs, ${rows} rows each in ${dir}: CPU ${((cpuUsed / cpuProvisioned) * 100).toFixed(1)} % of provisioned, memory ${((memUsed / memProvisioned) * 100).toFixed(1)} %`);
