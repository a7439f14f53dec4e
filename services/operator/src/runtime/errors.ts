/**
 * Classification of errors raised by Kubernetes API calls (their status from
 * @kubeplus-isolation/service `httpStatusOf`).
 *
 * client-node 2.x throws `ApiException` (`code` = HTTP status); its watch throws errors with
 * `statusCode`; other HTTP stacks use `status` or `response.statusCode`. Like apimachinery's
 * `errors.IsConflict`/`IsNotFound`, these helpers look at the status only, never at messages.
 */
import { httpStatusOf } from '@kubeplus-isolation/service';

/** 409: an optimistic-concurrency conflict (stale resourceVersion) or AlreadyExists. */
export function isConflict(err: unknown): boolean {
  return httpStatusOf(err) === 409;
}

export function isNotFound(err: unknown): boolean {
  return httpStatusOf(err) === 404;
}

/** 403: the request's identity lacks the RBAC for it. */
export function isForbidden(err: unknown): boolean {
  return httpStatusOf(err) === 403;
}
