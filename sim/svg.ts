// Hand-written SVG charts for the simulation report: a line chart and a
// scatter, no dependency. Output is text that depends only on the data (no
// ids, no dates), so a regenerated report is byte-identical.

export interface Series {
  name: string;
  color: string;
  dashed?: boolean;
  /** [x, y] pairs, x ascending. */
  points: [number, number][];
}

export interface Axes {
  title: string;
  xLabel: string;
  yLabel: string;
  width?: number;
  height?: number;
}

const W = 720;
const H = 360;
const PAD = { left: 70, right: 150, top: 36, bottom: 48 };

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const f = (n: number) => (Math.round(n * 10) / 10).toString();

/** Round numbers for ticks (1, 2 or 5 times a power of ten, about `count` of them), the first at or below lo, the last at or above hi. */
export function ticks(lo: number, hi: number, count = 5): number[] {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const p = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
  const out: number[] = [];
  const first = Math.floor(lo / step + 1e-9);
  for (let k = first; out.length === 0 || out[out.length - 1]! < hi - step * 1e-9; k++) out.push(Number((k * step).toPrecision(12)));
  return out;
}

function label(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${Number((v / 1e6).toPrecision(4))}M`;
  if (a >= 1e4) return `${Number((v / 1e3).toPrecision(4))}k`;
  return String(Number(v.toPrecision(6)));
}

function frame(a: Axes, xs: number[], ys: number[], xOf: (x: number) => number, yOf: (y: number) => number, yText = label): string[] {
  const w = a.width ?? W;
  const h = a.height ?? H;
  const out = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${w} ${h}" width="${w}" height="${h}" font-family="sans-serif" font-size="12">`,
    `<rect width="${w}" height="${h}" fill="white"/>`,
    `<text x="${PAD.left}" y="20" font-size="14" font-weight="bold">${esc(a.title)}</text>`,
  ];
  for (const y of ys) {
    out.push(`<line x1="${PAD.left}" x2="${w - PAD.right}" y1="${f(yOf(y))}" y2="${f(yOf(y))}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${PAD.left - 6}" y="${f(yOf(y) + 4)}" text-anchor="end">${esc(yText(y))}</text>`);
  }
  for (const x of xs) out.push(`<text x="${f(xOf(x))}" y="${h - PAD.bottom + 16}" text-anchor="middle">${esc(label(x))}</text>`);
  out.push(`<line x1="${PAD.left}" x2="${w - PAD.right}" y1="${h - PAD.bottom}" y2="${h - PAD.bottom}" stroke="#555"/>`);
  out.push(`<line x1="${PAD.left}" x2="${PAD.left}" y1="${PAD.top}" y2="${h - PAD.bottom}" stroke="#555"/>`);
  out.push(`<text x="${f((PAD.left + w - PAD.right) / 2)}" y="${h - 10}" text-anchor="middle">${esc(a.xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${f((PAD.top + h - PAD.bottom) / 2)}) rotate(-90)" text-anchor="middle">${esc(a.yLabel)}</text>`);
  return out;
}

function legend(out: string[], a: Axes, items: { name: string; color: string; dashed?: boolean | undefined }[]): void {
  const x = (a.width ?? W) - PAD.right + 14;
  items.forEach((s, i) => {
    const y = PAD.top + 8 + i * 18;
    out.push(`<line x1="${x}" x2="${x + 22}" y1="${y}" y2="${y}" stroke="${s.color}" stroke-width="3"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`);
    out.push(`<text x="${x + 28}" y="${y + 4}">${esc(s.name)}</text>`);
  });
}

export function lineChart(a: Axes, series: Series[], yFrom?: number): string {
  const w = a.width ?? W;
  const h = a.height ?? H;
  const all = series.flatMap((s) => s.points);
  const xt = ticks(0, Math.max(...all.map((p) => p[0]), 1), 8);
  const xMax = xt[xt.length - 1]!;
  const yMaxData = Math.max(...all.map((p) => p[1]), 1);
  const yMinData = yFrom ?? Math.min(...all.map((p) => p[1]), 0);
  const yt = ticks(yMinData, yMaxData);
  const yLo = yt[0]!;
  const yHi = yt[yt.length - 1]!;
  const xOf = (x: number) => PAD.left + (x / xMax) * (w - PAD.left - PAD.right);
  const yOf = (y: number) => h - PAD.bottom - ((y - yLo) / (yHi - yLo || 1)) * (h - PAD.top - PAD.bottom);
  const out = frame(a, xt, yt, xOf, yOf);
  for (const s of series) {
    const d = s.points.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${f(xOf(x))} ${f(yOf(y))}`).join('');
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 3"' : ''}/>`);
  }
  legend(out, a, series);
  out.push('</svg>');
  return out.join('\n') + '\n';
}

export interface Point {
  name: string;
  color: string;
  x: number;
  y: number;
}

/** y on a log scale of (1 + y), so zero risk sits on the axis and large counts still fit. */
export function scatter(a: Axes, points: Point[]): string {
  const w = a.width ?? W;
  const h = a.height ?? H;
  const xs = points.map((p) => p.x);
  const xt = ticks(Math.min(...xs, 0), Math.max(...xs, 1), 6);
  const xLo = xt[0]!;
  const xHi = xt[xt.length - 1]!;
  const top = Math.max(1, Math.ceil(Math.log10(1 + Math.max(...points.map((p) => p.y), 1))));
  const yt = Array.from({ length: top + 1 }, (_, i) => i);
  const xOf = (x: number) => PAD.left + ((x - xLo) / (xHi - xLo || 1)) * (w - PAD.left - PAD.right);
  const yOf = (e: number) => h - PAD.bottom - (e / top) * (h - PAD.top - PAD.bottom);
  const out = frame(a, xt, yt, xOf, yOf, (e) => (e === 0 ? '0' : label(10 ** e)));
  // Points at one spot would hide each other: labels step down where they would overlap.
  const placed: { x: number; y: number }[] = [];
  for (const p of points) {
    const cx = xOf(p.x);
    const cy = yOf(Math.log10(1 + p.y));
    let ly = cy + 4;
    while (placed.some((q) => Math.abs(q.x - cx) < 60 && Math.abs(q.y - ly) < 13)) ly += 13;
    placed.push({ x: cx, y: ly });
    out.push(`<circle cx="${f(cx)}" cy="${f(cy)}" r="6" fill="${p.color}"/>`);
    out.push(`<text x="${f(cx + 9)}" y="${f(ly)}">${esc(p.name)}</text>`);
  }
  out.push('</svg>');
  return out.join('\n') + '\n';
}

export interface FrontierSeries {
  name: string;
  color: string;
  /** Every point of the family, [risk share of node-time, y]. */
  points: [number, number][];
  /** Its frontier: the points no other of the family beats, risk ascending. */
  frontier: [number, number][];
}

/** Decades of risk shown left of 100 % at least, so one risky point does not squeeze the rest. */
const MIN_DECADES = 3;

/**
 * y against a risk share on a log scale, with zero risk one decade left of the
 * smallest share that occurs (risk runs from none to all of node-time). Each
 * series is markers at all its points and a line along its frontier; each
 * reference is a dashed horizontal line.
 */
export function frontierChart(a: Axes, series: FrontierSeries[], references: { name: string; color: string; y: number }[]): string {
  const w = a.width ?? W;
  const h = a.height ?? H;
  const all = series.flatMap((s) => s.points);
  const positive = all.map((p) => p[0]).filter((x) => x > 0);
  const lo = Math.min(-MIN_DECADES + 1, ...positive.map((x) => Math.floor(Math.log10(x) + 1e-9)));
  // Slot 0 is zero risk; decade 10^lo sits at slot 1, 10^0 (all node-time) at the right.
  const slot = (x: number) => (x <= 0 ? 0 : 1 + Math.log10(x) - lo);
  const slots = 1 - lo;
  const xt = Array.from({ length: slots + 1 }, (_, i) => i);
  const ys = [...all.map((p) => p[1]), ...references.map((r) => r.y)];
  const yt = ticks(Math.min(0, ...ys), Math.max(1, ...ys));
  const yLo = yt[0]!;
  const yHi = yt[yt.length - 1]!;
  const xOf = (s: number) => PAD.left + (s / slots) * (w - PAD.left - PAD.right);
  const yOf = (y: number) => h - PAD.bottom - ((y - yLo) / (yHi - yLo || 1)) * (h - PAD.top - PAD.bottom);
  const out = frame(a, [], yt, xOf, yOf);
  for (const s of xt) {
    const share = s === 0 ? 0 : 10 ** (s - 1 + lo);
    out.push(`<text x="${f(xOf(s))}" y="${h - PAD.bottom + 16}" text-anchor="middle">${esc(s === 0 ? '0' : `${Number((share * 100).toPrecision(3))} %`)}</text>`);
  }
  for (const r of references) {
    out.push(`<line x1="${PAD.left}" x2="${w - PAD.right}" y1="${f(yOf(r.y))}" y2="${f(yOf(r.y))}" stroke="${r.color}" stroke-width="2" stroke-dasharray="5 3"/>`);
  }
  for (const s of series) {
    if (s.frontier.length > 1) {
      const d = s.frontier.map(([x, y], i) => `${i === 0 ? 'M' : 'L'}${f(xOf(slot(x)))} ${f(yOf(y))}`).join('');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"/>`);
    }
    for (const [x, y] of s.points) out.push(`<circle cx="${f(xOf(slot(x)))}" cy="${f(yOf(y))}" r="4" fill="${s.color}"/>`);
  }
  legend(out, a, [...series, ...references.map((r) => ({ ...r, dashed: true }))]);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
