/**
 * Agent Sandbox objects for the operator suites: Sandbox (agents.x-k8s.io) and SandboxTemplate
 * (extensions.agents.x-k8s.io) at both served versions, and what admission made of a write —
 * allowed (with the API server's `Warning` headers) or refused (status code and message).
 */
import { expect } from '@jest/globals';
import { isApiStatus, waitFor } from '@kubeplus-isolation/e2e';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NodeV1Api,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { mergePatch, statusMessage } from './operator.js';

export type SandboxKind = 'Sandbox' | 'SandboxTemplate';
/** The versions the Agent Sandbox CRDs serve, and `v1`, which a test adds (`addServedVersion`). */
export type SandboxVersion = 'v1beta1' | 'v1alpha1' | 'v1';

const RESOURCES: Record<SandboxKind, { group: string; plural: string }> = {
  Sandbox: { group: 'agents.x-k8s.io', plural: 'sandboxes' },
  SandboxTemplate: { group: 'extensions.agents.x-k8s.io', plural: 'sandboxtemplates' },
};

export interface SandboxRef {
  kind: SandboxKind;
  version: SandboxVersion;
  namespace: string;
  name: string;
}

export interface SandboxObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; uid: string; resourceVersion: string; labels?: Record<string, string> };
  spec: { podTemplate: { spec: { runtimeClassName?: string } } };
}

export type Admission =
  /** `warnings`: the texts of the response's `Warning` headers, except API deprecation notices. */
  { allowed: true; object: SandboxObject; warnings: string[] } | { allowed: false; code: number; message: string };

function params(ref: Pick<SandboxRef, 'kind' | 'version' | 'namespace'>) {
  const r = RESOURCES[ref.kind];
  return { group: r.group, version: ref.version, plural: r.plural, namespace: ref.namespace };
}

/** A minimal object of `kind` (its Pod template's runtime class unset when `runtimeClassName` is undefined). */
export function sandboxBody(ref: SandboxRef, runtimeClassName: string | undefined): Record<string, unknown> {
  return {
    apiVersion: `${RESOURCES[ref.kind].group}/${ref.version}`,
    kind: ref.kind,
    metadata: { name: ref.name },
    spec: {
      podTemplate: {
        spec: {
          ...(runtimeClassName === undefined ? {} : { runtimeClassName }),
          containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10' }],
        },
      },
    },
  };
}

/**
 * The texts of a `Warning` response header (RFC 7234 form `299 - "text"`, several joined by ', '),
 * without the API server's deprecation notices (v1alpha1 of the Agent Sandbox CRDs is deprecated,
 * which says nothing about admission policies).
 */
export function admissionWarnings(header: string | undefined): string[] {
  const texts = [...(header ?? '').matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)].map((m) =>
    (m[1] as string).replace(/\\(.)/g, '$1'),
  );
  return texts.filter((t) => !/ is deprecated; use /.test(t));
}

async function admission(call: () => Promise<{ data: unknown; headers: Record<string, string> }>): Promise<Admission> {
  try {
    const res = await call();
    return { allowed: true, object: res.data as SandboxObject, warnings: admissionWarnings(res.headers.warning) };
  } catch (error) {
    if (isApiStatus(error, 403) || isApiStatus(error, 422)) {
      return { allowed: false, code: (error as { code: number }).code, message: statusMessage(error) };
    }
    throw error;
  }
}

/** CREATE; `dryRun` runs the whole admission chain without persisting. */
export function createSandbox(
  kc: KubeConfig,
  ref: SandboxRef,
  runtimeClassName: string | undefined,
  opts: { dryRun?: boolean } = {},
): Promise<Admission> {
  return admission(() =>
    kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObjectWithHttpInfo({
      ...params(ref),
      body: sandboxBody(ref, runtimeClassName),
      ...(opts.dryRun ? { dryRun: 'All' } : {}),
    }),
  );
}

/** UPDATE (JSON merge patch) of an existing object. */
export function patchSandbox(kc: KubeConfig, ref: SandboxRef, patch: Record<string, unknown>): Promise<Admission> {
  return admission(() =>
    kc
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObjectWithHttpInfo({ ...params(ref), name: ref.name, body: patch }, mergePatch),
  );
}

export async function getSandbox(kc: KubeConfig, ref: SandboxRef): Promise<SandboxObject | undefined> {
  try {
    return (await kc
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject({ ...params(ref), name: ref.name })) as SandboxObject;
  } catch (error) {
    if (isApiStatus(error, 404)) return undefined;
    throw error;
  }
}

const describe = (a: Admission): unknown =>
  a.allowed
    ? { allowed: true, runtimeClassName: a.object.spec.podTemplate.spec.runtimeClassName, warnings: a.warnings }
    : a;

/**
 * Admission policies reach the API server's admission chain asynchronously (its policy informer,
 * then type-checking): dry-run CREATEs until `predicate` holds for the outcome, and return it.
 */
export function waitForAdmission(
  kc: KubeConfig,
  ref: SandboxRef,
  runtimeClassName: string | undefined,
  description: string,
  predicate: (a: Admission) => boolean,
  timeoutMs = 30_000,
): Promise<Admission> {
  return waitFor(
    `a dry-run ${ref.kind} ${ref.version} in ${ref.namespace} with runtimeClassName ${runtimeClassName ?? '(unset)'} ${description}`,
    async (observe) => {
      const outcome = await createSandbox(kc, ref, runtimeClassName, { dryRun: true });
      observe(describe(outcome));
      return predicate(outcome) ? outcome : undefined;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

/** Fails unless admission refused the write with 403; returns the API server's message. */
export function expectDenied(outcome: Admission, what: string): string {
  if (outcome.allowed) {
    throw new Error(
      `expected ${what} to be denied, but it was admitted with runtimeClassName ${outcome.object.spec.podTemplate.spec.runtimeClassName}`,
    );
  }
  expect(outcome.code).toBe(403);
  return outcome.message;
}

/** Fails unless admission let the write through; returns what was stored and the warnings. */
export function expectAllowed(outcome: Admission, what: string): Extract<Admission, { allowed: true }> {
  if (!outcome.allowed)
    throw new Error(`expected ${what} to be admitted, but: HTTP ${outcome.code} ${outcome.message}`);
  return outcome;
}

export const denied = (a: Admission): a is Extract<Admission, { allowed: false }> => !a.allowed;
export const allowedWithout = (a: Admission): boolean => a.allowed && a.warnings.length === 0;

/** Creates cluster RuntimeClasses for one test and deletes them again. */
export class RuntimeClasses {
  private readonly names: string[] = [];
  constructor(private readonly kc: KubeConfig) {}

  async create(name: string, handler: string): Promise<string> {
    await this.kc.makeApiClient(NodeV1Api).createRuntimeClass({ body: { metadata: { name }, handler } });
    this.names.push(name);
    return name;
  }

  async deleteAll(): Promise<void> {
    const api = this.kc.makeApiClient(NodeV1Api);
    for (const name of this.names.splice(0)) {
      try {
        await api.deleteRuntimeClass({ name });
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
    }
  }
}

/** The CustomResourceDefinition name of a Sandbox kind. */
export function crdName(kind: SandboxKind): string {
  return `${RESOURCES[kind].plural}.${RESOURCES[kind].group}`;
}

async function replaceCrd(
  kc: KubeConfig,
  name: string,
  change: (crd: V1CustomResourceDefinition) => V1CustomResourceDefinition,
): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const current = await api.readCustomResourceDefinition({ name });
  await api.replaceCustomResourceDefinition({ name, body: change(current) });
}

/**
 * Adds `version` to the kind's installed CRD as a served, non-storage copy of `like`'s schema —
 * what Agent Sandbox does when it ships a new API version — and waits until the API server serves
 * it (a dry-run CREATE at that version no longer answers 404).
 */
export async function addServedVersion(
  kc: KubeConfig,
  kind: SandboxKind,
  version: SandboxVersion,
  like: SandboxVersion,
  namespace: string,
): Promise<void> {
  await replaceCrd(kc, crdName(kind), (crd) => {
    const template = crd.spec.versions.find((v) => v.name === like);
    if (template === undefined) throw new Error(`${crdName(kind)} has no version ${like}`);
    const others = crd.spec.versions.filter((v) => v.name !== version);
    return {
      ...crd,
      spec: {
        ...crd.spec,
        versions: [...others, { ...structuredClone(template), name: version, served: true, storage: false }],
      },
    };
  });
  await waitFor(
    `${crdName(kind)} to serve ${version}`,
    async (observe) => {
      try {
        await createSandbox(kc, { kind, version, namespace, name: 'served-probe' }, 'probe', { dryRun: true });
        return true;
      } catch (error) {
        observe(String(error));
        if (isApiStatus(error, 404)) return false;
        throw error;
      }
    },
    { timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** Removes `version` from the kind's CRD again (it was never the storage version). */
export async function removeVersion(kc: KubeConfig, kind: SandboxKind, version: SandboxVersion): Promise<void> {
  await replaceCrd(kc, crdName(kind), (crd) => ({
    ...crd,
    spec: { ...crd.spec, versions: crd.spec.versions.filter((v) => v.name !== version) },
  }));
}
