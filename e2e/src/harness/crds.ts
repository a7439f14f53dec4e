import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  loadAllYaml,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { isApiStatus } from './node-api.js';
import { openReportsCrdsDir, repoRoot, sandboxCrdsDir } from './repo.js';
import { waitFor } from './wait.js';

export interface InstallOptions {
  timeoutMs?: number;
}

/**
 * Loads every CustomResourceDefinition from the *.yaml files in `dir` and, unless `keepConversion`
 * (the Agent Sandbox controller runs: agent-sandbox.ts), removes their conversion webhook
 * (strategy None), as envtest does: nothing would serve it, and the versions share the fields
 * this project reads.
 */
export function loadCrds(dir: string, opts: { keepConversion?: boolean } = {}): V1CustomResourceDefinition[] {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))
    .sort();
  const crds = files.flatMap((file) =>
    (loadAllYaml(readFileSync(join(dir, file), 'utf8')) as V1CustomResourceDefinition[]).filter(
      (doc) => doc?.kind === 'CustomResourceDefinition',
    ),
  );
  if (crds.length === 0) throw new Error(`no CustomResourceDefinition in ${dir}`);
  if (!opts.keepConversion) for (const crd of crds) crd.spec.conversion = { strategy: 'None' };
  return crds;
}

/** Creates or replaces `crds` and waits until every one is Established with its names accepted. */
export async function installCrds(
  kc: KubeConfig,
  crds: readonly V1CustomResourceDefinition[],
  timeoutMs = 60_000,
): Promise<string[]> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  const names = await Promise.all(
    crds.map(async (crd) => {
      const name = crd.metadata?.name;
      if (!name) throw new Error(`CustomResourceDefinition without metadata.name (${crd.spec.names.plural})`);
      try {
        await api.createCustomResourceDefinition({ body: crd });
      } catch (error) {
        if (!isApiStatus(error, 409)) throw error;
        const current = await api.readCustomResourceDefinition({ name });
        await api.replaceCustomResourceDefinition({
          name,
          body: { ...crd, metadata: { ...crd.metadata, resourceVersion: current.metadata?.resourceVersion } },
        });
      }
      return name;
    }),
  );
  await waitFor(
    `CustomResourceDefinitions ${names.join(', ')} to be Established`,
    async (observe) => {
      const current = await Promise.all(names.map((name) => api.readCustomResourceDefinition({ name })));
      const notReady = current.filter(
        (crd) =>
          !['Established', 'NamesAccepted'].every((type) =>
            crd.status?.conditions?.some((c) => c.type === type && c.status === 'True'),
          ),
      );
      observe(notReady.map((crd) => ({ name: crd.metadata?.name, conditions: crd.status?.conditions })));
      return notReady.length === 0;
    },
    { timeoutMs, intervalMs: 200 },
  );
  await waitForStorage(kc, crds, timeoutMs);
  return names;
}

/**
 * Established is not yet served: a CRD whose storage changed (a new stored version, a schema) has
 * its storage re-created, and until the API server's cache for it is filled again a request for its
 * resources answers 429 "storage is (re)initializing" (or 404 while the new handler is not yet
 * installed), as any client of a just-updated CRD sees. Waits until a list of each CRD's storage
 * version answers anything else, so that a caller's next request reaches the storage.
 */
async function waitForStorage(
  kc: KubeConfig,
  crds: readonly V1CustomResourceDefinition[],
  timeoutMs: number,
): Promise<void> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  // The storage version if it is served (a list of it needs no conversion), else any served one.
  const targets = crds.flatMap((crd) => {
    const served = crd.spec.versions.filter((v) => v.served);
    const version = (served.find((v) => v.storage) ?? served[0])?.name;
    return version ? [{ group: crd.spec.group, version, plural: crd.spec.names.plural }] : [];
  });
  if (targets.length === 0) return;
  await waitFor(
    `the storage of ${targets.map((t) => `${t.plural}.${t.group}/${t.version}`).join(', ')} to serve`,
    async (observe) => {
      const waiting: string[] = [];
      await Promise.all(
        targets.map(async (t) => {
          try {
            await custom.listClusterCustomObject({ ...t, limit: 1 });
          } catch (error) {
            if (isApiStatus(error, 429) || isApiStatus(error, 404)) waiting.push(`${t.plural}.${t.group}/${t.version}`);
          }
        }),
      );
      observe(waiting);
      return waiting.length === 0;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

/** Installs the Agent Sandbox CRDs (sandboxCrdsDir(): shared fixtures, or KUBEPLUS_SANDBOX_CRDS_DIR). */
export function installSandboxCrds(kc: KubeConfig, dir = sandboxCrdsDir()): Promise<string[]> {
  return installCrds(kc, loadCrds(dir));
}

/** Installs the OpenReports CRDs (Report, ClusterReport) from the pinned module (openReportsCrdsDir()). */
export function installOpenReportsCrds(kc: KubeConfig, dir = openReportsCrdsDir()): Promise<string[]> {
  return installCrds(kc, loadCrds(dir));
}

/** An instance Kind for the operator: namespaced, one version, any spec. */
export interface InstanceKind {
  group: string;
  kind: string;
  plural: string;
  /** Default `v1`. */
  version?: string;
}

/**
 * The CustomResourceDefinition of an instance Kind as KubePlus registers it: labelled
 * `registered-by: kubeplus` (which makes the operator watch it), namespaced, a permissive schema.
 */
export function instanceKindCrd(k: InstanceKind): V1CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${k.plural}.${k.group}`, labels: { 'registered-by': 'kubeplus' } },
    spec: {
      group: k.group,
      names: { kind: k.kind, plural: k.plural, singular: k.kind.toLowerCase(), listKind: `${k.kind}List` },
      scope: 'Namespaced',
      versions: [
        {
          name: k.version ?? 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
        },
      ],
    },
  };
}

/**
 * The SandboxIsolation CRD of sandbox isolation's shared policy layout, from the file the chart
 * installs (deploy/kubeplus-isolation/charts/operator/files/sandbox-isolation-crd.yaml).
 */
export function sandboxIsolationParamsCrd(): V1CustomResourceDefinition {
  const path = join(
    repoRoot(),
    'deploy',
    'kubeplus-isolation',
    'charts',
    'operator',
    'files',
    'sandbox-isolation-crd.yaml',
  );
  const [crd] = loadAllYaml(readFileSync(path, 'utf8')) as V1CustomResourceDefinition[];
  if (crd?.kind !== 'CustomResourceDefinition') throw new Error(`${path}: not a CustomResourceDefinition`);
  return crd;
}
