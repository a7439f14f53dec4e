/**
 * Admission through the hold entry (POST /hold): a Pod, Sandbox or SandboxTemplate CREATE in an unsettled
 * KubePlus namespace waits for the Holder, then is answered as usual — a Pod patched with the
 * placement its namespace now carries — or refused with a message saying it can be retried.
 *
 * Fail-open reporting stays the node-isolation entry's (it runs right after, and its own fail-open
 * warnings and metrics say why a Pod got no placement): here a namespace without a valid mandate
 * simply admits the Pod unchanged.
 */
import { type AdmissionOutcome, decide } from '../admission/admit.js';
import { type AdmissionRequest, buildRefusalResponse, buildReviewResponse, isPodCreate } from '../admission/review.js';
import { resolutionFromEntry } from '../cache/resolver.js';
import type { HoldAnswer, Holder } from './holder.js';

/** The hold's HTTP path; the chart's hold entry calls it. */
export const HOLD_PATH = '/hold';

/** The Agent Sandbox resources the hold entry registers for (besides core Pods), any version. */
export const HELD_SANDBOX_RESOURCES: readonly { group: string; resource: string }[] = [
  { group: 'agents.x-k8s.io', resource: 'sandboxes' },
  { group: 'extensions.agents.x-k8s.io', resource: 'sandboxtemplates' },
];

/** The HTTP status of a refusal: an admission denial, as the API server answers one by default. */
const REFUSAL_CODE = 403;

function isSandboxCreate(req: AdmissionRequest): boolean {
  return (
    req.operation === 'CREATE' &&
    req.subResource === undefined &&
    HELD_SANDBOX_RESOURCES.some((r) => r.group === req.resource.group && r.resource === req.resource.resource)
  );
}

/** Holds a request the hold entry sent, then answers it. Never throws or rejects. */
export function holdAdmit(req: AdmissionRequest, holder: Holder): AdmissionOutcome | Promise<AdmissionOutcome> {
  const pod = isPodCreate(req);
  if ((!pod && !isSandboxCreate(req)) || req.namespace === undefined) {
    return { result: 'skipped', patch: [], review: buildReviewResponse(req.uid) };
  }
  const answer = holder.admit(req.namespace, req.dryRun);
  if (answer instanceof Promise) return answer.then((a) => answerFor(req, pod, a));
  return answerFor(req, pod, answer);
}

function answerFor(req: AdmissionRequest, pod: boolean, answer: HoldAnswer): AdmissionOutcome {
  if (answer.kind === 'refuse') {
    return {
      result: 'refused',
      patch: [],
      detail: answer.outcome,
      review: buildRefusalResponse(req.uid, REFUSAL_CODE, 'Forbidden', answer.message),
    };
  }
  const isolation = answer.view?.isolation;
  if (pod && isolation?.state === 'valid') return decide(req, resolutionFromEntry(isolation));
  return { result: 'unchanged', patch: [], review: buildReviewResponse(req.uid) };
}
