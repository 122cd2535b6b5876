// How every admission route answers when it cannot review: the API server must
// get a well-formed answer fast whatever arrives. Input that is not an
// AdmissionReview gets a 4xx with a message; a bug of ours answers "allowed,
// unchanged" whenever the request uid is readable, because an exception must
// never turn into a failed kubelet heartbeat or a refused pod, whatever the
// webhook's failurePolicy says.
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from '../../lib/log.js';
import { allow, BadReviewError, requestUid, type AdmissionReviewResponse } from './admission-review.js';

export type ObserveOutcome = (outcome: 'bad-request' | 'error', seconds: number) => void;

/** Body parsing failures (invalid JSON, wrong content type, too large) of the routes of `app`. */
export function answerBodyFailures(app: FastifyInstance, observe: ObserveOutcome, log: Logger): void {
  app.setErrorHandler((err: FastifyError, _request, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    observe(status < 500 ? 'bad-request' : 'error', 0);
    if (status >= 500) log.error({ err }, 'webhook request failed');
    return reply.code(status).send({ error: status < 500 ? 'Bad Request' : 'Internal Server Error', message: err.message });
  });
}

/** The answer to a review that threw: 400 for a body that is no AdmissionReview, else allowed unchanged. */
export function answerReviewFailure(
  err: unknown,
  body: unknown,
  reply: FastifyReply,
  observe: ObserveOutcome,
  seconds: number,
  log: Logger,
): AdmissionReviewResponse | FastifyReply {
  if (err instanceof BadReviewError) {
    observe('bad-request', seconds);
    return reply.code(400).send({ error: 'Bad Request', message: err.message });
  }
  observe('error', seconds);
  log.error({ err }, 'webhook handler failed; the object was allowed unchanged');
  const uid = requestUid(body);
  if (uid) return allow(uid);
  return reply.code(500).send({ error: 'Internal Server Error', message: (err as Error).message });
}

/** Seconds since `started` (process.hrtime.bigint()). */
export const secondsSince = (started: bigint): number => Number(process.hrtime.bigint() - started) / 1e9;
