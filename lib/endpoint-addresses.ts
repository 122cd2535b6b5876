// The gateway replicas an EndpointSlice lists, as agents dial them: every
// ready address on the port named "grpc" (or the slice's only port), as
// "ip:port" ("[ip]:port" for IPv6). Agents stream to these; a sharded gateway
// hashes node names over the same strings (lib/rendezvous.ts), so both sides
// agree on a node's owners.
import type { V1EndpointSlice } from '@kubernetes/client-node';

export function addressesOf(slices: readonly V1EndpointSlice[]): string[] {
  const out = new Set<string>();
  for (const slice of slices) {
    const port = slice.ports?.find((p) => p.name === 'grpc') ?? (slice.ports?.length === 1 ? slice.ports[0] : undefined);
    if (!port?.port) continue;
    for (const ep of slice.endpoints ?? []) {
      if (ep.conditions?.ready === false) continue;
      for (const a of ep.addresses ?? []) out.add(a.includes(':') ? `[${a}]:${port.port}` : `${a}:${port.port}`);
    }
  }
  return [...out].sort();
}
