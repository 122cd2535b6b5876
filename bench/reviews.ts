// Kubelet-shaped nodes/status reviews posted to a gateway's webhook over
// HTTPS, verified against its CA: how a benchmark gives nodes the raw
// allocatable their decisions start from.
import { Agent, request } from 'node:https';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { reviewBody } from './webhook.js';

export function postReview(port: number, ca: string, body: string, agent?: Agent): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1', servername: 'localhost', port, path: '/mutate/nodes', method: 'POST', ca, ...(agent && { agent }),
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** One 36 KB review for each of `names`, a few at a time over kept-alive connections. */
export async function reviewEveryNode(port: number, tlsDir: string, names: readonly string[]): Promise<void> {
  const ca = readFileSync(join(tlsDir, 'ca.crt'), 'utf8');
  const PLACEHOLDER = 'bench-node-placeholder';
  const template = reviewBody(PLACEHOLDER);
  const agent = new Agent({ keepAlive: true, maxSockets: 8 });
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const name = names[next++]!;
      const answer = await postReview(port, ca, template.replaceAll(PLACEHOLDER, name), agent);
      if (answer.status !== 200) throw new Error(`webhook answered ${answer.status} for ${name}: ${answer.body.slice(0, 300)}`);
    }
  };
  try {
    await Promise.all(Array.from({ length: 8 }, worker));
  } finally {
    agent.destroy();
  }
}
