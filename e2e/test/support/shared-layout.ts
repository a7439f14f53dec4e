/**
 * What the shared sandbox policy layout (`--sandbox-policy-layout shared`) leaves in the cluster,
 * and how a suite removes it: its ONE ValidatingAdmissionPolicy (and MutatingAdmissionPolicy),
 * the SandboxIsolation parameters and their CRD. Nothing of the shared layout may outlive a suite:
 * a later suite's operator would see the shared policies as objects the operator manages (they
 * carry managed-by).
 */
import { isApiStatus, waitFor } from '@kubeplus-isolation/e2e';
import {
  SANDBOX_ISOLATION_PARAMS_API_VERSION,
  SANDBOX_ISOLATION_PARAMS_RESOURCE,
  SHARED_SANDBOX_POLICY_COMPONENT,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  KubernetesObjectApi,
} from '@kubernetes/client-node';
import { mutatingPolicies } from './operator.js';

const [PARAMS_GROUP = '', PARAMS_VERSION = ''] = SANDBOX_ISOLATION_PARAMS_API_VERSION.split('/');
/** The SandboxIsolation parameters' resource, for CustomObjectsApi. */
export const PARAMS = {
  group: PARAMS_GROUP,
  version: PARAMS_VERSION,
  plural: SANDBOX_ISOLATION_PARAMS_RESOURCE,
} as const;
export const PARAMS_CRD_NAME = `${PARAMS.plural}.${PARAMS.group}`;

/** Deletes what the shared layout leaves in the cluster (the operator stopped first), and waits until it is gone. */
export async function removeSharedLayout(kc: KubeConfig): Promise<void> {
  const selector = `app.kubernetes.io/component=${SHARED_SANDBOX_POLICY_COMPONENT}`;
  const adm = kc.makeApiClient(AdmissionregistrationV1Api);
  const objects = KubernetesObjectApi.makeApiClient(kc);
  const ignoreMissing = (error: unknown): void => {
    if (!isApiStatus(error, 404)) throw error;
  };
  for (const p of (await adm.listValidatingAdmissionPolicy({ labelSelector: selector })).items) {
    await adm.deleteValidatingAdmissionPolicy({ name: p.metadata?.name ?? '' }).catch(ignoreMissing);
  }
  for (const p of await mutatingPolicies(kc, selector)) {
    await objects
      .delete({ apiVersion: p.apiVersion, kind: p.kind, metadata: { name: p.o.metadata?.name ?? '' } })
      .catch(ignoreMissing);
  }
  await kc
    .makeApiClient(CustomObjectsApi)
    .deleteCollectionClusterCustomObject({ ...PARAMS })
    .catch(ignoreMissing);
  await kc
    .makeApiClient(ApiextensionsV1Api)
    .deleteCustomResourceDefinition({ name: PARAMS_CRD_NAME })
    .catch(ignoreMissing);
  await waitFor(
    "the shared layout's policies and CRD to be gone",
    async (observe) => {
      const left = [
        ...(await adm.listValidatingAdmissionPolicy({ labelSelector: selector })).items.map((p) => p.metadata?.name),
        ...(await mutatingPolicies(kc, selector)).map((p) => p.o.metadata?.name),
      ];
      const crd = await kc
        .makeApiClient(ApiextensionsV1Api)
        .readCustomResourceDefinition({ name: PARAMS_CRD_NAME })
        .then(
          () => true,
          () => false,
        );
      observe({ left, crd });
      return left.length === 0 && !crd;
    },
    { timeoutMs: 60_000 },
  );
}
