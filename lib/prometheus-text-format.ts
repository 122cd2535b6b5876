// The Prometheus text format's escaping and number spelling (0.0.4), shared by
// the agent's own exposition (agent/prometheus-text.ts) and the gateway's
// per-node series (gateway/metrics/node-series.ts).

/** A label value: backslash, double quote and line feed escaped. */
export const escapeLabel = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/** A HELP text: backslash and line feed escaped. */
export const escapeHelp = (v: string): string => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');

/** A sample value, with NaN and the infinities as the format spells them. */
export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/** The HELP and TYPE lines that open a metric family. */
export const familyHeader = (name: string, help: string, type: string): string => `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}\n`;
