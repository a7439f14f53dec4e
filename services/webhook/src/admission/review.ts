/**
 * AdmissionReview (admission.k8s.io/v1) in and out: pure validation of what the API server
 * sends, and the response it expects back. Only v1 is spoken: the webhook registration
 * lists `admissionReviewVersions: ["v1"]`, so the API server never sends anything else.
 */
import { ADMISSION_REVIEW_API_VERSION, ADMISSION_REVIEW_KIND, DNS1123_SUBDOMAIN_MAX } from '@kubeplus-isolation/spec';
import type { Operation } from 'fast-json-patch';
import { isObject } from './json.js';
import type { InvalidReviewReason } from './metric-labels.js';

/** Real UIDs are 36-character UUIDs; anything far longer is not from an API server. */
export const MAX_UID_LENGTH = 128;
/** The only patch type admission.k8s.io/v1 knows. */
const PATCH_TYPE = 'JSONPatch';

const OPERATIONS = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'] as const;
export type AdmissionOperation = (typeof OPERATIONS)[number];

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** The parts of `request` the webhook reads; everything else is ignored. */
export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  subResource: string | undefined;
  operation: AdmissionOperation;
  namespace: string | undefined;
  name: string | undefined;
  object: unknown;
  dryRun: boolean;
}

export interface AdmissionResponse {
  uid: string;
  /** false only from the hold (hold/holder.ts): a request refused until its namespace is settled. */
  allowed: boolean;
  /** With allowed false: what the client is told (`message`) and the HTTP status it gets. */
  status?: { code: number; reason: string; message: string };
  patchType?: typeof PATCH_TYPE;
  /** base64 of the JSON-encoded RFC 6902 patch. */
  patch?: string;
  /** Shown to the client that created the Pod (kubectl prints them as "Warning: ..."). */
  warnings?: string[];
}

export interface AdmissionReviewResponse {
  apiVersion: typeof ADMISSION_REVIEW_API_VERSION;
  kind: typeof ADMISSION_REVIEW_KIND;
  response: AdmissionResponse;
}

export type ParsedReview =
  | { ok: true; request: AdmissionRequest }
  | { ok: false; code: InvalidReviewReason; message: string };

function optionalString(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function invalid(code: InvalidReviewReason, message: string): ParsedReview {
  return { ok: false, code, message };
}

function readGvk(v: unknown): GroupVersionKind | undefined {
  if (!isObject(v)) return undefined;
  const { group, version, kind } = v;
  if (typeof group !== 'string' || typeof version !== 'string' || typeof kind !== 'string') return undefined;
  return { group, version, kind };
}

function readGvr(v: unknown): GroupVersionResource | undefined {
  if (!isObject(v)) return undefined;
  const { group, version, resource } = v;
  if (typeof group !== 'string' || typeof version !== 'string' || typeof resource !== 'string') return undefined;
  return { group, version, resource };
}

function describe(v: unknown): string {
  if (v === undefined) return 'missing';
  const s = JSON.stringify(v);
  return s.length > 64 ? `${s.slice(0, 61)}...` : s;
}

/** Validates a decoded request body as an admission.k8s.io/v1 AdmissionReview. Never throws. */
export function parseAdmissionReview(body: unknown): ParsedReview {
  if (!isObject(body)) return invalid('not_an_object', 'body must be a JSON object (an AdmissionReview)');
  if (body.apiVersion !== ADMISSION_REVIEW_API_VERSION) {
    return invalid(
      'invalid_api_version',
      `apiVersion must be "${ADMISSION_REVIEW_API_VERSION}", got ${describe(body.apiVersion)}; register the webhook with admissionReviewVersions: ["v1"]`,
    );
  }
  if (body.kind !== ADMISSION_REVIEW_KIND) {
    return invalid('invalid_kind', `kind must be "${ADMISSION_REVIEW_KIND}", got ${describe(body.kind)}`);
  }
  const req = body.request;
  if (!isObject(req)) return invalid('missing_request', 'request must be an object');
  const uid = req.uid;
  if (typeof uid !== 'string' || uid === '' || uid.length > MAX_UID_LENGTH) {
    return invalid('invalid_uid', `request.uid must be a non-empty string of at most ${MAX_UID_LENGTH} characters`);
  }
  const operation = req.operation;
  if (typeof operation !== 'string' || !(OPERATIONS as readonly string[]).includes(operation)) {
    return invalid('invalid_operation', `request.operation must be one of ${OPERATIONS.join(', ')}`);
  }
  const kind = readGvk(req.kind);
  const resource = readGvr(req.resource);
  if (kind === undefined || resource === undefined) {
    return invalid(
      'invalid_request_kind',
      'request.kind must be {group, version, kind} and request.resource {group, version, resource}',
    );
  }
  const object = req.object;
  if (operation === 'CREATE' && !isObject(object)) {
    return invalid('missing_object', 'request.object must be an object for a CREATE');
  }
  const request: AdmissionRequest = {
    uid,
    kind,
    resource,
    subResource: optionalString(req.subResource),
    operation: operation as AdmissionOperation,
    namespace: optionalString(req.namespace),
    name: optionalString(req.name),
    object,
    dryRun: req.dryRun === true,
  };
  if (isPodCreate(request) && request.namespace === undefined) {
    return invalid('missing_namespace', 'request.namespace must be set for a Pod CREATE');
  }
  return { ok: true, request };
}

/** The only request this webhook mutates: CREATE of a core/v1 Pod itself (not a subresource). */
export function isPodCreate(req: AdmissionRequest): boolean {
  return (
    req.operation === 'CREATE' &&
    req.subResource === undefined &&
    req.resource.group === '' &&
    req.resource.version === 'v1' &&
    req.resource.resource === 'pods' &&
    req.kind.group === '' &&
    req.kind.version === 'v1' &&
    req.kind.kind === 'Pod'
  );
}

/**
 * The review to answer with: always allowed (this webhook never rejects), with the patch only
 * when it changes something — an empty patch is omitted, not sent as `[]`.
 */
export function buildReviewResponse(
  uid: string,
  patch: readonly Operation[] = [],
  warnings: readonly string[] = [],
): AdmissionReviewResponse {
  const response: AdmissionResponse = { uid, allowed: true };
  if (patch.length > 0) {
    response.patchType = PATCH_TYPE;
    response.patch = Buffer.from(JSON.stringify(patch)).toString('base64');
  }
  if (warnings.length > 0) response.warnings = [...warnings];
  return { apiVersion: ADMISSION_REVIEW_API_VERSION, kind: ADMISSION_REVIEW_KIND, response };
}

/**
 * Identity of the Pod for logs: its name, or its generateName when the name is not yet assigned.
 * Cut to the longest object name Kubernetes accepts before it reaches a log line.
 */
export function podIdentity(req: AdmissionRequest): { pod?: string; generateName?: string } {
  const meta = isObject(req.object) && isObject(req.object.metadata) ? req.object.metadata : {};
  const pod = (req.name ?? optionalString(meta.name))?.slice(0, DNS1123_SUBDOMAIN_MAX);
  const generateName = optionalString(meta.generateName)?.slice(0, DNS1123_SUBDOMAIN_MAX);
  const out: { pod?: string; generateName?: string } = {};
  if (pod !== undefined) out.pod = pod;
  else if (generateName !== undefined) out.generateName = generateName;
  return out;
}

/** A refusal (the hold's only): `code` and `message` reach the client that made the request. */
export function buildRefusalResponse(
  uid: string,
  code: number,
  reason: string,
  message: string,
): AdmissionReviewResponse {
  return {
    apiVersion: ADMISSION_REVIEW_API_VERSION,
    kind: ADMISSION_REVIEW_KIND,
    response: { uid, allowed: false, status: { code, reason, message } },
  };
}
