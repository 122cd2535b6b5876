// POST /mutate/nodes as a fastify plugin. Whatever arrives, the API server gets
// a well-formed answer fast: an AdmissionReview (allowed, with or without a
// patch) or a 4xx with a message. The kubelet's heartbeat is never blocked by us.
import type { FastifyInstance, FastifyPluginOptions } from 'fastify';
import type { Logger } from '../../lib/log.js';
import { OncePer } from '../../lib/once-per.js';
import type { GatewayMetrics } from '../metrics/metrics.js';
import { reviewNode, type NodeReviewDeps } from './node-review.js';
import type { NodeObservation } from '../decide/policy.js';
import { NODE_REVIEW_FIELDS, readJsonFields } from './review-reader.js';
import { answerBodyFailures, answerReviewFailure, secondsSince } from './review-failures.js';

export interface WebhookPluginOptions extends FastifyPluginOptions {
  deps: NodeReviewDeps;
  /**
   * Keeps what a real (not dry-run) kubelet write said about its node, for
   * the query API to decide from. Only without a cluster: with one, the node
   * watch reads the same inputs from the stored objects (ingest/node-watch.ts).
   */
  observe?(node: string, observed: NodeObservation): void;
  /**
   * Whether reviews set the per-node gauges. Off when the caller cannot be
   * known to be the API server (no client certificate required) and the node
   * watch sets them from what the API server stored: anyone who reaches the
   * port could otherwise post reviews that move a node's gauges and alerts.
   */
  perNodeMetrics?: boolean;
  metrics: GatewayMetrics;
  log: Logger;
}

/** Says "grant changed" at info level, at most once per node per interval, so 500 calls/s do not flood the log. */
export class ChangeLog {
  readonly #last = new Map<string, { key: string; at: number }>();
  constructor(
    private readonly log: Logger,
    private readonly intervalMs = 30_000,
    private readonly now: () => number = Date.now,
  ) {}

  note(node: string, key: string, fields: Record<string, unknown>): boolean {
    const prev = this.#last.get(node);
    const t = this.now();
    if (prev?.key === key || (prev && t - prev.at < this.intervalMs)) return false;
    this.#last.set(node, { key, at: t });
    this.log.info({ node, ...fields }, 'allocatable grant changed');
    return true;
  }
}

/** Says a node's write was passed untouched, at most once per node and reason per interval: a kubelet writes every 10 s. */
export class UntouchedLog {
  readonly #once: OncePer;
  constructor(
    private readonly log: Logger,
    intervalMs = 300_000,
    now: () => number = Date.now,
  ) {
    this.#once = new OncePer(intervalMs, now);
  }

  note(node: string, reason: string, detail: string | undefined): boolean {
    if (!this.#once.take(`${node}\u0000${reason}`)) return false;
    this.log.warn(
      { node, reason, detail },
      reason === 'not-kubelet'
        ? 'node status write passed unchanged: only the node\'s own kubelet (system:node:<name>) is inflated; check the webhook\'s matchConditions'
        : 'node status write passed unchanged: the kubelet\'s raw allocatable could not be established (docs/security.md)',
    );
    return true;
  }
}

export async function webhookPlugin(app: FastifyInstance, options: WebhookPluginOptions): Promise<void> {
  const { deps, metrics, log, observe: keep } = options;
  const perNode = options.perNodeMetrics ?? true;
  const changes = new ChangeLog(log);
  const untouched = new UntouchedLog(log);

  const observe = (outcome: string, seconds: number) => metrics.observeWebhook(outcome, seconds);
  answerBodyFailures(app, observe, log);
  // Only what reviewNode() reads is built (review-reader.ts); this plugin's
  // context is its own, so the pod webhook keeps fastify's whole-body parser.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    try {
      done(null, readJsonFields(body as Buffer, NODE_REVIEW_FIELDS));
    } catch (err) {
      done(err as Error, undefined);
    }
  });

  app.post('/mutate/nodes', async (request, reply) => {
    const started = process.hrtime.bigint();
    const seconds = () => secondsSince(started);
    try {
      const result = reviewNode(request.body, deps);
      metrics.observeWebhook(result.outcome, seconds());
      if (result.outcome === 'not-kubelet' || result.outcome === 'unverified') {
        const reason = result.unverified ?? result.outcome;
        metrics.untouched(reason);
        if (result.node) untouched.note(result.node, reason, result.detail);
      }
      // A dry run leaves no trace in what the gateway keeps: no observation, no gauges, no change log.
      if (keep && result.observed && result.node && !result.dryRun) keep(result.node, result.observed);
      if (result.decision && result.node && result.outcome !== 'no-data' && !result.dryRun) {
        const d = result.decision;
        if (perNode) {
          metrics.decision(result.node, 'cpu', d.cpu);
          metrics.decision(result.node, 'memory', d.memory);
        } else {
          metrics.decisionCounted('cpu', d.cpu.decidedBy);
          metrics.decisionCounted('memory', d.memory.decidedBy);
        }
        changes.note(result.node, `${d.cpu.applied}/${d.memory.applied}`, {
          cpu: `${d.cpu.raw}m->${d.cpu.applied}m (${d.cpu.decidedBy})`,
          memory: `${d.memory.raw}->${d.memory.applied} (${d.memory.decidedBy})`,
          reason: d.reason,
        });
      }
      log.debug({ node: result.node, outcome: result.outcome, detail: result.detail, reason: result.decision?.reason }, 'node reviewed');
      return result.review;
    } catch (err) {
      return answerReviewFailure(err, request.body, reply, observe, seconds(), log);
    }
  });
}
