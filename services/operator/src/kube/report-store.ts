/**
 * The compliance reports' API calls on @kubernetes/client-node: the Report of a namespace
 * (openreports.io/v1alpha1, named `kubeplus-isolation`) read with a LIST by name — a LIST never
 * answers 404 for a served resource, so its 404 says the API is not served, unambiguously, in the
 * same one request — and created, replaced or deleted; the namespaces holding one (a LIST across
 * the cluster, by label and name); a paginated LIST of a namespace's
 * Sandboxes at the first Agent Sandbox version the API server serves; and a paginated LIST of the
 * namespace's unfinished Pods (what the Sandboxes run: each Pod's controller owner reference says
 * whose it is).
 */
import { httpStatusOf } from '@kubeplus-isolation/service';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '@kubeplus-isolation/spec';
import type { CoreV1Api, CustomObjectsApi, KubernetesObject } from '@kubernetes/client-node';
import { PodPageSizer } from '../controllers/audit/page-budget.js';
import {
  type ExistingReport,
  REPORT_GROUP,
  REPORT_NAME,
  REPORT_PLURAL,
  REPORT_VERSION,
} from '../controllers/compliance/openreport.js';
import type { ReportStore, SandboxLister } from '../controllers/compliance/reporter.js';
import { SANDBOX_RESOURCES } from '../desired/agent-sandbox.js';
import { listUnfinishedPods, sizedPodPage } from './pod-lister.js';

const REPORT = { group: REPORT_GROUP, version: REPORT_VERSION, plural: REPORT_PLURAL };

export function kubeReportStore(api: CustomObjectsApi): ReportStore {
  return {
    async read(namespace) {
      try {
        const list = (await api.listNamespacedCustomObject({
          ...REPORT,
          namespace,
          fieldSelector: `metadata.name=${REPORT_NAME}`,
        })) as { items?: ExistingReport[] };
        return { served: true, report: list.items?.[0] };
      } catch (err) {
        if (httpStatusOf(err) === 404) return { served: false };
        throw err;
      }
    },
    async create(report) {
      await api.createNamespacedCustomObject({ ...REPORT, namespace: report.metadata.namespace, body: report });
    },
    async replace(report) {
      await api.replaceNamespacedCustomObject({
        ...REPORT,
        namespace: report.metadata.namespace,
        name: report.metadata.name,
        body: report,
      });
    },
    async listOwnNamespaces() {
      try {
        const list = (await api.listClusterCustomObject({
          ...REPORT,
          labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE}`,
          fieldSelector: `metadata.name=${REPORT_NAME}`,
        })) as { items?: Array<{ metadata?: { namespace?: string } }> };
        return (list.items ?? []).flatMap((r) => r.metadata?.namespace ?? []);
      } catch (err) {
        if (httpStatusOf(err) === 404) return [];
        throw err;
      }
    },
    async delete(namespace) {
      try {
        await api.deleteNamespacedCustomObject({ ...REPORT, namespace, name: REPORT_NAME });
      } catch (err) {
        if (httpStatusOf(err) !== 404) throw err;
      }
    },
  };
}

const SANDBOX = SANDBOX_RESOURCES.find((r) => r.kind === 'Sandbox');

/**
 * The reports' LISTs of a namespace's Sandboxes and Sandbox Pods. Both are paged by bytes as well
 * as by count (controllers/audit/page-budget.ts, issue 34): a tenant can make either large (a
 * Sandbox embeds a Pod template), and 500 of the largest in one response would be ~750 MiB.
 * Each kind learns its own size.
 */
export function kubeSandboxLister(
  api: CustomObjectsApi,
  core: CoreV1Api,
  podPages: PodPageSizer = new PodPageSizer(),
  sandboxPages: PodPageSizer = new PodPageSizer(),
): SandboxLister {
  if (SANDBOX === undefined) throw new Error('no Sandbox resource known');
  const { group, resource, versions } = SANDBOX;
  return {
    // Every unfinished Pod, not only those with the controller's tracking label: a Pod owned by
    // a Sandbox's UID under another kind need not carry it (issue 36).
    listSandboxPods: (namespace, page) => listUnfinishedPods(core, namespace, page, undefined, podPages),
    async listSandboxes(namespace, { limit, continueToken }) {
      for (const version of versions) {
        try {
          const list = await sizedPodPage(sandboxPages, limit, async (sized, options) => {
            const page = (await api.listNamespacedCustomObject(
              { group, version, namespace, plural: resource, limit: sized, _continue: continueToken },
              options,
            )) as { items?: KubernetesObject[]; metadata?: { continue?: string } };
            return { items: page.items ?? [], continueToken: page.metadata?.continue };
          });
          return {
            items: list.items,
            continueToken: list.continueToken,
            apiVersion: `${group}/${version}`,
          };
        } catch (err) {
          // 404: this version is not served (or no Agent Sandbox CRD at all): try the next.
          if (httpStatusOf(err) !== 404) throw err;
        }
      }
      return undefined;
    },
  };
}
