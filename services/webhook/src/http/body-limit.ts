/**
 * The largest AdmissionReview the webhook reads: sized so that every Pod the API server accepts
 * is answered (issue 21: a review over the limit is a 413, and failurePolicy Ignore then admits
 * the Pod unpatched). Pure.
 *
 *   limit = objectsPerReview × JSON_ESCAPE_EXPANSION × apiServerMaxRequestBodyBytes + REVIEW_ENVELOPE_BYTES
 *
 * - apiServerMaxRequestBodyBytes: the API server refuses a request body over
 *   `--max-request-body-bytes` (3 MiB by default, k8s.io/apiserver's server config); etcd's own
 *   request limit (1.5 MiB by default) is smaller still, but it is checked after admission;
 * - JSON_ESCAPE_EXPANSION: the API server writes the review with Go's encoding/json, which
 *   escapes `<`, `>`, `&` (and U+2028/U+2029, invalid UTF-8, control characters) as `\uXXXX`:
 *   one byte of the request becomes at most six bytes of the review;
 * - objectsPerReview: a CREATE review carries `object`, an UPDATE also `oldObject`. The webhook
 *   is registered for Pod CREATE only (charts/webhook/files/webhook-entry.json): 1;
 * - REVIEW_ENVELOPE_BYTES: everything else in the review (uid, kinds, resources, names,
 *   options and the requesting user's groups and extra), generously.
 *
 * With the API server's default that is 6 × 3 MiB + 1 MiB = 19 MiB. Not covered: the fields the
 * API server's defaulting adds to a Pod sent in a compact encoding (protobuf) could, for a Pod of
 * thousands of bare containers, outgrow the sixfold bound; such a review is answered 413, which
 * is counted as a fail-open and seen by the operator's Pod watch at once.
 */

const MiB = 1024 * 1024;

/** kube-apiserver's default `--max-request-body-bytes`. */
export const DEFAULT_API_SERVER_MAX_REQUEST_BODY_BYTES = 3 * MiB;
/** Bytes of the review per byte of the request, at worst (`<` → `\u003c`). */
export const JSON_ESCAPE_EXPANSION = 6;
/** Room for the review's fields besides the object(s). */
export const REVIEW_ENVELOPE_BYTES = MiB;
/** Objects in a review of the operations the webhook is registered for (CREATE: `object` only). */
export const OBJECTS_PER_REVIEW = 1;

/** The body limit for reviews of requests of at most `apiServerMaxRequestBodyBytes`. */
export function reviewBodyLimit(apiServerMaxRequestBodyBytes: number, objectsPerReview = OBJECTS_PER_REVIEW): number {
  return objectsPerReview * JSON_ESCAPE_EXPANSION * apiServerMaxRequestBodyBytes + REVIEW_ENVELOPE_BYTES;
}
