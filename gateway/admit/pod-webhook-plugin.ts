// POST /mutate/pods and /mutate/pods/required as a fastify plugin: sidecar injection on pod CREATE. Same
// robustness rules as /mutate/nodes (review-failures.ts): any input gets a
// well-formed answer, and a bug of ours lets the pod through unchanged.
import type { FastifyInstance, FastifyPluginOptions } from 'fastify';
import type { Logger } from '../../lib/log.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import { BadReviewError, deny, requestUid } from './admission-review.js';
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

  // Two paths, one per kind of webhook entry: the entry for namespaces that
  // require their sidecars calls /mutate/pods/required, where pods cannot opt
  // out. The gateway cannot see namespace labels, so the path says it.
  for (const [path, required] of [['/mutate/pods', false], ['/mutate/pods/required', true]] as const) {
    app.post(path, async (request, reply) => {
      const started = process.hrtime.bigint();
      try {
        const result = reviewPod(request.body, deps, { required });
        observe(result.outcome, secondsSince(started));
        const plan = result.plan;
        if (plan) metrics.sidecars(plan.injected, plan.refused);
        // Pod creations are rare next to heartbeats: every injection, refusal and denial is worth a line.
        if (result.outcome === 'denied') {
          log.warn({ namespace: result.namespace, path, reason: result.detail }, 'refused a pod: its namespace requires sidecars that could not be added');
        } else if (plan && (plan.injected.length > 0 || plan.refused.length > 0)) {
          log.info({ namespace: result.namespace, path, injected: plan.injected, refused: plan.refused.map((r) => r.warning) }, 'sidecars for a new pod');
        } else {
          log.debug({ namespace: result.namespace, path, outcome: result.outcome, detail: result.detail }, 'pod reviewed');
        }
        return result.review;
      } catch (err) {
        // Where sidecars are required, a bug of ours must not let the pod run
        // without them: refused, as it would be with the gateway unreachable.
        const uid = requestUid(request.body);
        if (required && uid && !(err instanceof BadReviewError)) {
          observe('error', secondsSince(started));
          log.error({ err, path }, 'pod review failed; refused the pod, its namespace requires sidecars');
          return deny(uid, `oversell: the sidecar webhook failed (${(err as Error).message}); namespace requires its sidecars, retry shortly`);
        }
        return answerReviewFailure(err, request.body, reply, observe, secondsSince(started), log);
      }
    });
  }
}
