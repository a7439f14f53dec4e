/**
 * The Kubernetes minor of the run's shared control plane (the version matrix: KUBEPLUS_ISOLATION_K8S)
 * and what does not apply on it. Read when a suite loads, so a case that does not apply is reported
 * by jest as skipped, with the reason in its name, never silently passed.
 */
import { describe, test } from '@jest/globals';
import { e2eStatePath, minorOf, nodeMinor, policyApiSupport, readState } from '@kubeplus-isolation/e2e';

/** The shared control plane's minor, e.g. 1.30. */
export const SHARED_MINOR = minorOf(readState(e2eStatePath()).kubernetesVersion);
/** It is the newest pinned minor (the real node's). */
export const NEWEST = SHARED_MINOR === nodeMinor();
/** MutatingAdmissionPolicy v1 is served (1.36+): the node-isolation policy engine and advisory defaulting. */
export const POLICY_ENGINE_SERVED = policyApiSupport(SHARED_MINOR).mutatingV1;
export const POLICY_ENGINE_WHY =
  'the admission-policy engine is a MutatingAdmissionPolicy v1 (Kubernetes 1.36+); the chart refuses it on older clusters';

type Body = () => void;
type Fn = () => Promise<void>;

/** `describe` where `applies`, else a skipped describe whose name says why. */
export function describeIf(applies: boolean, why: string): (name: string, body: Body) => void {
  return applies ? describe : (name, body) => describe.skip(`${name} [skipped on ${SHARED_MINOR}: ${why}]`, body);
}

/** `test` where `applies`, else a skipped test whose name says why. */
export function testIf(applies: boolean, why: string): (name: string, fn: Fn, timeout?: number) => void {
  return applies ? test : (name, fn, timeout) => test.skip(`${name} [skipped on ${SHARED_MINOR}: ${why}]`, fn, timeout);
}
