// Answers pod CREATE reviews: which sidecars the pod gets (gateway/inject/),
// as a JSONPatch, with a warning for every sidecar that could not be added.
// The pod is always allowed: refusing a sidecar never refuses the pod.
import { planInjection, type InjectionPlan } from '../inject/pod-injection.js';
import type { TemplateEntry } from '../inject/sidecar-template.js';
import { allow, parseAdmissionReview, type AdmissionReviewResponse } from './admission-review.js';

export interface PodReviewDeps {
  templates(): readonly TemplateEntry[];
  excludedNamespaces: ReadonlySet<string>;
}

/** injected: sidecars added; unchanged: nothing to add (none wanted, or a re-invocation); refused: wanted but none could be added; skipped: not ours. */
export type PodOutcome = 'injected' | 'unchanged' | 'refused' | 'skipped';

export interface PodReviewResult {
  review: AdmissionReviewResponse;
  outcome: PodOutcome;
  namespace?: string;
  plan?: InjectionPlan;
  detail?: string;
}

/** Throws BadReviewError when the body is not an AdmissionReview at all. */
export function reviewPod(body: unknown, deps: PodReviewDeps): PodReviewResult {
  const req = parseAdmissionReview(body);
  const skip = (detail: string): PodReviewResult => ({ review: allow(req.uid), outcome: 'skipped', detail });
  if (req.kind?.kind !== 'Pod' || req.resource?.resource !== 'pods') return skip(`not a pod: ${req.kind?.kind ?? 'no kind'}`);
  if (req.operation !== 'CREATE' || req.subResource) return skip(`operation ${req.operation} ${req.subResource ?? ''} is not handled`);

  const plan = planInjection({ pod: req.object, namespace: req.namespace, templates: deps.templates(), excludedNamespaces: deps.excludedNamespaces });
  const base = { namespace: req.namespace, plan };
  if (plan.skipped) return { ...base, ...skip(plan.skipped) };
  const review = allow(req.uid, plan.ops, plan.refused.map((r) => r.warning));
  const outcome: PodOutcome = plan.injected.length > 0 ? 'injected' : plan.refused.length > 0 ? 'refused' : 'unchanged';
  return { ...base, review, outcome };
}
