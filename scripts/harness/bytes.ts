// Bytes as the demos print them for a reader: binary units, a fixed number of
// decimals, Kubernetes' suffix (12.25Gi), so a figure lines up with the
// quantities next to it.

export const GIB = 1024 ** 3;

/** 13153337344 -> "12.25Gi" with 2 decimals. */
export function gib(bytes: number | bigint, decimals: number): string {
  return `${(Number(bytes) / GIB).toFixed(decimals)}Gi`;
}
