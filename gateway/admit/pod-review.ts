// Answers pod CREATE reviews: which sidecars the pod gets (gateway/inject/),
// as a JSONPatch, with a warning for every sidecar that could not be added.
// A refused sidecar never refuses the pod, except in a namespace that requires
// its sidecars (/mutate/pods/required): there a default template that cannot
// be added refuses the pod, rather than letting it run without.
import { planInjection, type InjectionPlan } from '../inject/pod-injection.js';
import type { TemplateEntry } from '../inject/sidecar-template.js';
import { allow, deny, parseAdmissionReview, type AdmissionReviewDenial, type AdmissionReviewResponse } from './admission-review.js';

export interface PodReviewDeps {
  templates(): readonly TemplateEntry[];
  excludedNamespaces: ReadonlySet<string>;
}


/**
 * injected: sidecars added; unchanged: nothing to add (none wanted, or a re-invocation);
 * refused: wanted but none could be added; denied: the pod is refused (required namespace);
 * skipped: not ours.
 */
export type PodOutcome = 'injected' | 'unchanged' | 'refused' | 'denied' | 'skipped';

export interface PodReviewResult {
  review: AdmissionReviewResponse | AdmissionReviewDenial;
  outcome: PodOutcome;
  namespace?: string;
  plan?: InjectionPlan;
  detail?: string;
}

export interface PodReviewOptions {
  /** The call came through the entry for namespaces labelled oversell.io/inject=required: the pod cannot opt out. */
  required?: boolean;
}


/** Throws BadReviewError when the body is not an AdmissionReview at all. */
export function reviewPod(body: unknown, deps: PodReviewDeps, options: PodReviewOptions = {}): PodReviewResult {
  const req = parseAdmissionReview(body);
  const skip = (detail: string): PodReviewResult => ({ review: allow(req.uid), outcome: 'skipped', detail });
  if (req.kind?.kind !== 'Pod' || req.resource?.resource !== 'pods') return skip(`not a pod: ${req.kind?.kind ?? 'no kind'}`);
  if (req.operation !== 'CREATE' || req.subResource) return skip(`operation ${req.operation} ${req.subResource ?? ''} is not handled`);

  const plan = planInjection({
    pod: req.object,
    namespace: req.namespace,
    templates: deps.templates(),
    excludedNamespaces: deps.excludedNamespaces,
    required: options.required === true,
  });
  const base = { namespace: req.namespace, plan };
  if (plan.skipped) return { ...base, ...skip(plan.skipped) };
  const warnings = plan.refused.map((r) => r.warning);
  if (plan.denied) return { ...base, review: deny(req.uid, plan.denied, warnings), outcome: 'denied', detail: plan.denied };
  const review = allow(req.uid, plan.ops, warnings);
  const outcome: PodOutcome = plan.injected.length > 0 ? 'injected' : plan.refused.length > 0 ? 'refused' : 'unchanged';
  return { ...base, review, outcome };
}
