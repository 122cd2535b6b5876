// POST /mutate/pods as a fastify plugin: sidecar injection on pod CREATE. Same
// robustness rules as /mutate/nodes (review-failures.ts): any input gets a
// well-formed answer, and a bug of ours lets the pod through unchanged.
import type { FastifyInstance, FastifyPluginOptions } from 'fastify';
import type { Logger } from '../../lib/log.js';
import type { GatewayMetrics } from '../http/metrics.js';
import { reviewPod, type PodReviewDeps } from './pod-review.js';
import { answerBodyFailures, answerReviewFailure, secondsSince } from './review-failures.js';

export interface PodWebhookPluginOptions extends FastifyPluginOptions {
  deps: PodReviewDeps;
  metrics: GatewayMetrics;
  log: Logger;
}

export async function podWebhookPlugin(app: FastifyInstance, options: PodWebhookPluginOptions): Promise<void> {
  const { deps, metrics, log } = options;
  const observe = (outcome: string, seconds: number) => metrics.observePodWebhook(outcome, seconds);
  answerBodyFailures(app, observe, log);

  app.post('/mutate/pods', async (request, reply) => {
    const started = process.hrtime.bigint();
    try {
      const result = reviewPod(request.body, deps);
      observe(result.outcome, secondsSince(started));
      const plan = result.plan;
      if (plan) metrics.sidecars(plan.injected, plan.refused);
      // Pod creations are rare next to heartbeats: every injection and refusal is worth a line.
      if (plan && (plan.injected.length > 0 || plan.refused.length > 0)) {
        log.info({ namespace: result.namespace, injected: plan.injected, refused: plan.refused.map((r) => r.warning) }, 'sidecars for a new pod');
      } else {
        log.debug({ namespace: result.namespace, outcome: result.outcome, detail: result.detail }, 'pod reviewed');
      }
      return result.review;
    } catch (err) {
      return answerReviewFailure(err, request.body, reply, observe, secondsSince(started), log);
    }
  });
}
