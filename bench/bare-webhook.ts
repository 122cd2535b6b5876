// The webhook benchmark's reference: a bare node:https server, in its own
// process like the gateway, with the gateway's own certificate. It reads each
// request's whole body and answers one fixed AdmissionReview (allowed, no
// patch), so the load generator does the same work against it as against
// the gateway. What the gateway's p99 costs over this is fastify, the review
// reader, the decision and the patch.
//
// With "review" it also does the review's own work and nothing else: the
// body read as the webhook reads it (review-reader.ts), reviewNode() against
// a store with the benchmark node's usage (webhook.ts benchReviewDeps), and
// the AdmissionReview it returns as the answer. Between the two, what a
// review costs whatever server carries it; between this and the gateway,
// what fastify, the metrics and the logs cost.
//
//   node bench/bare-webhook.ts <port> <tls dir> [review]    (prints "listening" when ready)
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { join } from 'node:path';
import { reviewNode } from '../gateway/admit/node-review.js';
import { NODE_REVIEW_FIELDS, readJsonFields } from '../gateway/admit/review-reader.js';
import { benchReviewDeps } from './review-body.js';

const [port, tlsDir, mode] = process.argv.slice(2);
if (!port || !tlsDir || (mode !== undefined && mode !== 'review')) {
  console.error('usage: bare-webhook.ts <port> <tls dir with tls.crt and tls.key> [review]');
  process.exit(2);
}
const fixed: Buffer = Buffer.from(JSON.stringify({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  response: { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true },
}));
const deps = mode === 'review' ? benchReviewDeps(1) : undefined;
const answer = (body: Buffer): Buffer => (deps ? Buffer.from(JSON.stringify(reviewNode(readJsonFields(body, NODE_REVIEW_FIELDS), deps).review)) : fixed);

const server = createServer({ cert: readFileSync(join(tlsDir, 'tls.crt')), key: readFileSync(join(tlsDir, 'tls.key')) }, (req, res) => {
  const chunks: Buffer[] = [];
  let bytes = 0;
  req.on('data', (chunk: Buffer) => {
    // Without the review the body is only counted, as in the reference's first runs.
    if (deps) chunks.push(chunk);
    bytes += chunk.length;
  });
  req.on('end', () => {
    let status = bytes > 0 ? 200 : 400;
    let out = fixed;
    try {
      if (status === 200) out = answer(Buffer.concat(chunks, bytes));
    } catch {
      status = 400;
    }
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': out.length });
    res.end(out);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), '127.0.0.1', () => console.log('listening'));
// An exit rather than death by the signal, so that --cpu-prof writes its profile.
process.on('SIGTERM', () => process.exit(0));
