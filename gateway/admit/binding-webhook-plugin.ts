// POST /validate/bindings as a fastify plugin: the protected-room check on
// pods/binding (binding-review.ts). Same robustness rules as the other
// admission routes (review-failures.ts): any input gets a well-formed answer,
// and a bug of ours lets the binding through.
import type { FastifyInstance, FastifyPluginOptions } from 'fastify';
import type { Logger } from '../../lib/log.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import { reviewBinding, type BindingReviewDeps } from './binding-review.js';
import { answerBodyFailures, answerReviewFailure, secondsSince } from './review-failures.js';

export interface BindingWebhookPluginOptions extends FastifyPluginOptions {
  deps: BindingReviewDeps;
  metrics: GatewayMetrics;
  log: Logger;
}

export async function bindingWebhookPlugin(app: FastifyInstance, options: BindingWebhookPluginOptions): Promise<void> {
  const { deps, metrics, log } = options;
  const observe = (outcome: string, seconds: number) => metrics.observeBindingWebhook(outcome, seconds);
  answerBodyFailures(app, observe, log);
  app.post('/validate/bindings', async (request, reply) => {
    const started = process.hrtime.bigint();
    try {
      const result = await reviewBinding(request.body, deps);
      observe(result.outcome, secondsSince(started));
      // A refusal is rare and is the scheduler's to retry: worth a line each.
      if (result.outcome === 'denied') log.info({ node: result.node, pod: result.pod, reason: result.detail }, 'refused a protected pod\'s binding: no raw room on the node');
      else if (result.outcome === 'unknown') log.warn({ node: result.node, pod: result.pod, reason: result.detail }, 'binding allowed unchecked');
      else log.debug({ node: result.node, pod: result.pod, outcome: result.outcome, detail: result.detail }, 'binding reviewed');
      return result.review;
    } catch (err) {
      return answerReviewFailure(err, request.body, reply, observe, secondsSince(started), log);
    }
  });
}
