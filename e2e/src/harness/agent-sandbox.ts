import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  type V1CustomResourceDefinition,
  type V1Deployment,
} from '@kubernetes/client-node';
import { type InstallOptions, installCrds, loadCrds } from './crds.js';
import { isApiStatus } from './node-api.js';
import { sandboxCrdsDir } from './repo.js';
import { waitFor } from './wait.js';

/** Where upstream's manifests put the controller. */
export const AGENT_SANDBOX_NAMESPACE = 'agent-sandbox-system';
export const AGENT_SANDBOX_DEPLOYMENT = 'agent-sandbox-controller';

/** The controller image `build-components.sh node` assembles (agent-sandbox-controller-image.tar). */
export function agentSandboxImage(version: string): string {
  return `kubeplus-isolation.local/agent-sandbox-controller:${version}`;
}

/** The pinned module's version, from its directory name in the Go module cache (`…/agent-sandbox@v1.0.1`). */
export function agentSandboxVersion(moduleDir: string): string {
  const match = /@(v[^/]+)$/.exec(moduleDir);
  if (!match?.[1]) throw new Error(`cannot read the agent-sandbox version from ${moduleDir}`);
  return match[1];
}

/**
 * Upstream's manifests (k8s/ of the pinned module: the controller, its RBAC, the extensions' RBAC),
 * as the project deploys them: the Deployment's `ko://` image placeholder (upstream's deployment
 * scripts replace it) becomes the locally built image, never pulled, with `--extensions` so
 * SandboxTemplate, SandboxClaim and SandboxWarmPool work, and a restricted security context. Pure.
 */
export function agentSandboxManifests(
  moduleDir: string,
  image: string,
  nodeSelector?: Record<string, string>,
): KubernetesObject[] {
  const read = (file: string): KubernetesObject[] =>
    (loadAllYaml(readFileSync(join(moduleDir, 'k8s', file), 'utf8')) as (KubernetesObject | null)[]).filter(
      (doc): doc is KubernetesObject => doc !== null && typeof doc === 'object' && 'kind' in doc,
    );
  const docs = [
    ...read('controller.yaml'),
    ...read('rbac.generated.yaml'),
    ...read('extensions.yaml'),
    ...read('extensions-rbac.generated.yaml'),
  ];
  const deployments = docs.filter((d) => d.kind === 'Deployment') as V1Deployment[];
  if (deployments.length !== 1) throw new Error(`expected one Deployment in ${moduleDir}/k8s/controller.yaml`);
  const container = deployments[0]?.spec?.template.spec?.containers[0];
  if (!container?.image?.startsWith('ko://')) {
    throw new Error(`the controller's image is not upstream's ko:// placeholder: ${container?.image}`);
  }
  const podSpec = deployments[0]?.spec?.template.spec;
  if (nodeSelector !== undefined && podSpec) podSpec.nodeSelector = { ...podSpec.nodeSelector, ...nodeSelector };
  container.image = image;
  container.imagePullPolicy = 'Never';
  container.args = [...(container.args ?? []), '--extensions'];
  container.securityContext = {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
    runAsNonRoot: true,
    runAsUser: 65532,
    seccompProfile: { type: 'RuntimeDefault' },
  };
  return docs;
}

/** The CRDs among `crds` that convert through a webhook (the controller's, before v1.0). Pure. */
export function convertingCrds(crds: readonly V1CustomResourceDefinition[]): string[] {
  return crds.filter((crd) => crd.spec.conversion?.strategy === 'Webhook').map((crd) => crd.metadata?.name ?? '');
}

/** The versions the pinned release's Sandbox CRD serves, storage version first (v1.0.x: v1beta1 only). Pure. */
export function servedSandboxVersions(crds: readonly V1CustomResourceDefinition[]): string[] {
  const sandbox = crds.find((crd) => crd.spec.group === 'agents.x-k8s.io' && crd.spec.names.kind === 'Sandbox');
  if (!sandbox) throw new Error("no Sandbox CRD (agents.x-k8s.io) among the pinned release's CRDs");
  return sandbox.spec.versions
    .filter((v) => v.served)
    .sort((a, b) => Number(b.storage) - Number(a.storage))
    .map((v) => v.name);
}

async function createAll(kc: KubeConfig, docs: readonly KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const doc of docs) {
    try {
      await api.create(doc);
    } catch (error) {
      if (!isApiStatus(error, 409)) throw error;
    }
  }
}

/**
 * Runs the upstream Agent Sandbox controller on a cluster with a real node (the image imported by
 * startRealNodeCluster): its CRDs from the pinned module UNMODIFIED, its RBAC and Deployment as
 * agentSandboxManifests() adapts them. Resolves once the controller is available and, for a
 * release whose CRDs convert through the controller (v0.5.x: v1alpha1 beside v1beta1; the
 * controller puts its CA into them at start and serves /convert behind its Service, which an API
 * server with aggregator routing calls at the Pod's IP), every such CRD carries its caBundle.
 * v1.0.x serves v1beta1 only, with no conversion stanza and no webhook: nothing to wait for there.
 */
export async function installAgentSandbox(
  kc: KubeConfig,
  opts: InstallOptions & {
    /** Where the controller's Pod may run (e.g. the real node, beside fake ones that run nothing). */
    nodeSelector?: Record<string, string>;
  } = {},
): Promise<{ crds: string[]; version: string; converting: string[] }> {
  const crdsDir = sandboxCrdsDir();
  const moduleDir = dirname(dirname(crdsDir));
  const version = agentSandboxVersion(moduleDir);
  const image = agentSandboxImage(version);
  // CRDs first: the controller patches its CA into them once, at start, and skips a CRD it does
  // not find ("CRD not found, skipping patch", cmd/agent-sandbox-controller/tls.go) — a controller
  // that starts before its CRDs exist never converts them.
  const loaded = loadCrds(crdsDir, { keepConversion: true });
  const converting = convertingCrds(loaded);
  const crds = await installCrds(kc, loaded);
  await createAll(kc, agentSandboxManifests(moduleDir, image, opts.nodeSelector));
  const timeoutMs = opts.timeoutMs ?? 120_000;
  const apps = kc.makeApiClient(AppsV1Api);
  await waitFor(
    `the Agent Sandbox controller Deployment to be available`,
    async (observe) => {
      const d = await apps.readNamespacedDeployment({
        name: AGENT_SANDBOX_DEPLOYMENT,
        namespace: AGENT_SANDBOX_NAMESPACE,
      });
      observe(d.status);
      return (d.status?.availableReplicas ?? 0) >= 1 || undefined;
    },
    { timeoutMs },
  );
  if (converting.length === 0) return { crds, version, converting };
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  await waitFor(
    'the controller to put its CA into every CRD’s conversion webhook',
    async (observe) => {
      const missing: string[] = [];
      for (const name of converting) {
        const crd = await ext.readCustomResourceDefinition({ name });
        if (!crd.spec.conversion?.webhook?.clientConfig?.caBundle) missing.push(name);
      }
      observe(missing);
      return missing.length === 0 || undefined;
    },
    { timeoutMs },
  );
  return { crds, version, converting };
}
