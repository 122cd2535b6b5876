// Durations as operators write them in flags and env: "40s", "1m30s", "500ms", or bare milliseconds.

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(text: string, flag = 'duration'): number {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  const parts = [...t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== t) {
    throw new Error(`${flag}: ${JSON.stringify(text)} is not a duration; use forms like 500ms, 40s, 1m30s`);
  }
  return Math.round(parts.reduce((ms, p) => ms + Number(p[1]) * (UNIT_MS[p[2] ?? 'ms'] ?? 1), 0));
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)}s`;
  return `${Math.floor(ms / 60_000)}m${Math.round((ms % 60_000) / 1000)}s`;
}
