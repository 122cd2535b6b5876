// Kubernetes label selector strings ("a=b,c!=d,e in (x,y),f notin (z),g,!h"),
// parsed into the structured form matchLabels/matchExpressions use.

/** The structured form (metav1.LabelSelector): matchLabels and matchExpressions. */
export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

export class SelectorError extends Error {
  override name = 'SelectorError';
}

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;
const VALUE = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?)?$/;

function key(k: string, text: string): string {
  if (!KEY.test(k) || k.length > 316) throw new SelectorError(`${JSON.stringify(text)}: ${JSON.stringify(k)} is not a valid label key`);
  return k;
}

function value(v: string, text: string): string {
  if (!VALUE.test(v) || v.length > 63) throw new SelectorError(`${JSON.stringify(text)}: ${JSON.stringify(v)} is not a valid label value`);
  return v;
}

/** Splits on commas outside parentheses. */
function requirements(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of text) {
    if (ch === '(') depth += 1;
    if (ch === ')') depth -= 1;
    if (depth < 0) throw new SelectorError(`${JSON.stringify(text)}: unbalanced parentheses`);
    if (ch === ',' && depth === 0) {
      out.push(cur.trim());
      cur = '';
    } else cur += ch;
  }
  if (depth !== 0) throw new SelectorError(`${JSON.stringify(text)}: unbalanced parentheses`);
  out.push(cur.trim());
  return out;
}

/** Throws SelectorError with what is wrong; an empty string selects everything (undefined). */
export function parseLabelSelector(text: string): LabelSelector | undefined {
  if (text.trim() === '') return undefined;
  const matchExpressions: NonNullable<LabelSelector['matchExpressions']> = [];
  for (const req of requirements(text)) {
    if (req === '') throw new SelectorError(`${JSON.stringify(text)}: empty requirement`);
    let m: RegExpExecArray | null;
    if ((m = /^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/.exec(req))) {
      const values = (m[3] ?? '').split(',').map((v) => value(v.trim(), text));
      matchExpressions.push({ key: key(m[1] ?? '', text), operator: m[2] === 'in' ? 'In' : 'NotIn', values });
    } else if ((m = /^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/.exec(req))) {
      matchExpressions.push({ key: key(m[1] ?? '', text), operator: m[2] === '!=' ? 'NotIn' : 'In', values: [value(m[3] ?? '', text)] });
    } else if ((m = /^!\s*(\S+)$/.exec(req))) {
      matchExpressions.push({ key: key(m[1] ?? '', text), operator: 'DoesNotExist' });
    } else if (KEY.test(req)) {
      matchExpressions.push({ key: req, operator: 'Exists' });
    } else {
      throw new SelectorError(`${JSON.stringify(text)}: cannot parse ${JSON.stringify(req)}; use forms like a=b, a!=b, a in (x,y), a notin (x), a, !a`);
    }
  }
  return { matchExpressions };
}

/**
 * Whether labels satisfy a selector. An empty selector (no labels, no
 * expressions) selects nothing here, unlike Kubernetes' own: everything that
 * takes one (an OversellPolicy's nodeSelector, spec.protect.namespaceSelector)
 * refuses it, and nothing is selected by accident.
 */
export function selectorMatches(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    switch (e.operator) {
      case 'In':
        if (!has || !(e.values ?? []).includes(value ?? '')) return false;
        break;
      case 'NotIn':
        if (has && (e.values ?? []).includes(value ?? '')) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false;
    }
  }
  return Object.keys(selector.matchLabels ?? {}).length + (selector.matchExpressions?.length ?? 0) > 0;
}
