// Kubelet-shaped nodes/status reviews posted to a gateway's webhook over
// HTTPS (test/helpers' postHttps, verified against its CA): how a benchmark
// gives nodes the raw allocatable their decisions start from.
import { Agent } from 'node:https';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { postHttps } from '../test/helpers/gateway.js';
import type { GatewayProcess } from './processes.js';
import { reviewBody } from './webhook.js';

/** One 36 KB review for each of `names`, a few at a time over kept-alive connections. */
export async function reviewEveryNode(gw: Pick<GatewayProcess, 'ports' | 'tlsDir'>, names: readonly string[]): Promise<void> {
  const target = { ports: gw.ports, ca: readFileSync(join(gw.tlsDir, 'ca.crt'), 'utf8') };
  const PLACEHOLDER = 'bench-node-placeholder';
  const template = reviewBody(PLACEHOLDER);
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++]!;
      const answer = await postHttps(target, '/mutate/nodes', template.replaceAll(PLACEHOLDER, name), undefined, agent);
      if (answer.status !== 200) throw new Error(`webhook answered ${answer.status} for ${name}: ${answer.body.slice(0, 300)}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: 8 }, worker));
  } finally {
    agent.destroy();
  }
}
