// What forwarding a review to the replica that owns its node costs the
// replica it reached (the sharded plan of docs/benchmarks.md): an HTTPS
// server that takes a review, reads the node's name from it (as a replica
// must, to find the owner), sends it on to the owner over a keep-alive HTTPS
// connection and returns the owner's answer. Run with the gateway's Node
// flags, its CPU per review is the forwarding's cost: TLS and HTTP in, out
// and back, beside which the owner's review costs what the webhook benchmark
// measures.
//
//   node --import tsx bench/forward-proxy.ts <cert.pem> <key.pem> <owner URL> <owner CA> [listen address]
// prints `listening <port>`. The address (default 127.0.0.1) must be one the certificate names.
import { Agent, createServer, request } from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';

const [certFile, keyFile, owner, ownerCa, listenAddress = '127.0.0.1'] = process.argv.slice(2);
if (!certFile || !keyFile || !owner || !ownerCa) {
  console.error('usage: forward-proxy.ts <cert.pem> <key.pem> <owner webhook URL> <owner CA PEM> [listen address]');
  process.exit(2);
}
const agent = new Agent({ keepAlive: true, maxSockets: 64, ca: readFileSync(ownerCa) });
/** request.name of an AdmissionReview, without parsing the 36 KB around it. */
const NAME = /"request"\s*:\s*\{[\s\S]*?"name"\s*:\s*"([^"]*)"/;

const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile), keepAliveTimeout: 60_000 }, (req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const body = Buffer.concat(parts);
    if (!NAME.test(body.toString('latin1', 0, Math.min(body.length, 4096)))) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('no request.name in the first 4 KiB of the review');
      return;
    }
    const out = request(owner, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } }, (answer) => {
      const back: Buffer[] = [];
      answer.on('data', (c: Buffer) => back.push(c));
      answer.on('end', () => {
        const b = Buffer.concat(back);
        res.writeHead(answer.statusCode ?? 502, { 'content-type': 'application/json', 'content-length': b.length }).end(b);
      });
    });
    out.on('error', (err) => res.writeHead(502, { 'content-type': 'text/plain' }).end(`forwarding to ${owner}: ${err.message}`));
    out.end(body);
  });
});
server.listen(0, listenAddress, () => console.log(`listening ${(server.address() as AddressInfo).port}`));
process.on('SIGTERM', () => process.exit(0));
