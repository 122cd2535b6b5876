// admission.k8s.io/v1 AdmissionReview: the envelope, read defensively. Anything
// the API server sends is untrusted until checked here.
import { isObject, type JsonPatchOp } from '../../lib/json.js';

export interface AdmissionRequest {
  uid: string;
  kind: { group?: string; version?: string; kind?: string } | undefined;
  resource: { group?: string; version?: string; resource?: string } | undefined;
  subResource: string | undefined;
  operation: string | undefined;
  name: string | undefined;
  /** The object's namespace as the API server resolved it; the object itself may not carry one on CREATE. */
  namespace: string | undefined;
  object: unknown;
  userInfo: { username?: string } | undefined;
  /** The API server will not persist the result: nothing may be kept because of it. */
  dryRun: boolean;
}

export interface AdmissionReviewResponse {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: true;
    patchType?: 'JSONPatch';
    patch?: string;
    warnings?: string[];
  };
}

/** The answer that refuses the request; the API server shows status.message to its client. */
export interface AdmissionReviewDenial {
  apiVersion: 'admission.k8s.io/v1';
  kind: 'AdmissionReview';
  response: { uid: string; allowed: false; status: { code: 403; reason: 'Forbidden'; message: string }; warnings?: string[] };
}

/** The body is not an AdmissionReview we can answer at all; the webhook replies 400. */
export class BadReviewError extends Error {
  override name = 'BadReviewError';
}

export function parseAdmissionReview(body: unknown): AdmissionRequest {
  if (!isObject(body)) throw new BadReviewError('body must be a JSON object (an admission.k8s.io/v1 AdmissionReview)');
  if (body.apiVersion !== 'admission.k8s.io/v1' || body.kind !== 'AdmissionReview') {
    throw new BadReviewError(
      `expected apiVersion admission.k8s.io/v1 and kind AdmissionReview, got ${JSON.stringify(body.apiVersion)} ${JSON.stringify(body.kind)}; ` +
        'list only "v1" in the webhook\'s admissionReviewVersions',
    );
  }
  const req = body.request;
  if (!isObject(req)) throw new BadReviewError('AdmissionReview has no request object');
  if (typeof req.uid !== 'string' || req.uid.length === 0) throw new BadReviewError('AdmissionReview request.uid is missing');
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return {
    uid: req.uid,
    kind: isObject(req.kind) ? (req.kind as AdmissionRequest['kind']) : undefined,
    resource: isObject(req.resource) ? (req.resource as AdmissionRequest['resource']) : undefined,
    subResource: str(req.subResource),
    operation: str(req.operation),
    name: str(req.name),
    namespace: str(req.namespace),
    object: req.object,
    userInfo: isObject(req.userInfo) ? (req.userInfo as AdmissionRequest['userInfo']) : undefined,
    dryRun: req.dryRun === true,
  };
}

/** Warnings reach the client of the request (kubectl prints them, the API sends them as Warning headers). */
export function allow(uid: string, patch?: JsonPatchOp[], warnings?: string[]): AdmissionReviewResponse {
  const response: AdmissionReviewResponse['response'] = { uid, allowed: true };
  if (patch && patch.length > 0) {
    // patch and patchType go together or not at all.
    response.patchType = 'JSONPatch';
    response.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  if (warnings && warnings.length > 0) response.warnings = warnings;
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}

/** The request uid of a body that may not be a valid AdmissionReview, so a failure can still be answered in kind. */
export function requestUid(body: unknown): string | undefined {
  const uid = isObject(body) && isObject(body.request) ? body.request.uid : undefined;
  return typeof uid === 'string' && uid.length > 0 ? uid : undefined;
}

export function deny(uid: string, message: string, warnings: string[] = []): AdmissionReviewDenial {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid, allowed: false, status: { code: 403, reason: 'Forbidden', message }, ...(warnings.length > 0 && { warnings }) },
  };
}
