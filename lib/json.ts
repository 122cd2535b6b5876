// JSON from outside (AdmissionReviews, objects from the API server) read
// defensively, and the JSON Patch written back. Both the node webhook
// (gateway/admit) and sidecar injection (gateway/inject) build on these.

/** A JSON object: not null, not an array. */
export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One RFC 6902 operation, of the kinds the gateway writes. */
export interface JsonPatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

/** RFC 6901: "~" and "/" inside a key. */
export function pointerEscape(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}
