// The webhook benchmark's reference: a bare node:https server, in its own
// process like the gateway, with the gateway's own certificate. It reads each
// request's whole body and answers one fixed AdmissionReview (allowed, no
// patch), so the load generator does the same work against it as against
// the gateway. What the gateway's p99 costs over this is fastify, the review
// reader, the decision and the patch.
//
//   node bench/bare-webhook.ts <port> <tls dir>     (prints "listening" when ready)
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { join } from 'node:path';

const [port, tlsDir] = process.argv.slice(2);
if (!port || !tlsDir) {
  console.error('usage: bare-webhook.ts <port> <tls dir with tls.crt and tls.key>');
  process.exit(2);
}
const answer = Buffer.from(JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  response: { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true },
}));
const server = createServer({ cert: readFileSync(join(tlsDir, 'tls.crt')), key: readFileSync(join(tlsDir, 'tls.key')) }, (req, res) => {
  let bytes = 0;
  req.on('data', (chunk: Buffer) => (bytes += chunk.length));
  req.on('end', () => {
    res.writeHead(bytes > 0 ? 200 : 400, { 'content-type': 'application/json', 'content-length': answer.length });
    res.end(answer);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1', () => console.log('listening'));
