import { describe, expect, it } from '@jest/globals';
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { PodPageSizer } from '../../src/controllers/audit/page-budget.js';
import { kubeReportStore, kubeSandboxLister } from '../../src/kube/report-store.js';
import { HttpError } from '../runtime/fakes.js';

type Call = { method: string; params: Record<string, unknown> };

/** A CustomObjectsApi answering from `answer` (a thrown HttpError is an API error), recording every call. */
function fakeApi(answer: (call: Call) => unknown): { api: CustomObjectsApi; calls: Call[] } {
  const calls: Call[] = [];
  const api = new Proxy(
    {},
    {
      get:
        (_target, method) =>
        async (params: Record<string, unknown>, _options?: unknown): Promise<unknown> => {
          const call = { method: String(method), params };
          calls.push(call);
          return answer(call);
        },
    },
  ) as unknown as CustomObjectsApi;
  return { api, calls };
}

describe('kubeReportStore', () => {
  it('reads the Report with one LIST selecting its name; a 404 there means the API is not served', async () => {
    const report = { metadata: { name: 'kubeplus-isolation', resourceVersion: '3' } };
    const served = fakeApi(() => ({ items: [report] }));
    expect(await kubeReportStore(served.api).read('team-a')).toEqual({ served: true, report });
    expect(served.calls).toEqual([
      {
        method: 'listNamespacedCustomObject',
        params: {
          group: 'openreports.io',
          version: 'v1alpha1',
          plural: 'reports',
          namespace: 'team-a',
          fieldSelector: 'metadata.name=kubeplus-isolation',
        },
      },
    ]);
    expect(await kubeReportStore(fakeApi(() => ({ items: [] })).api).read('team-a')).toEqual({
      served: true,
      report: undefined,
    });
    const missing = fakeApi(() => {
      throw new HttpError(404);
    });
    expect(await kubeReportStore(missing.api).read('team-a')).toEqual({ served: false });
    const forbidden = fakeApi(() => {
      throw new HttpError(403);
    });
    await expect(kubeReportStore(forbidden.api).read('team-a')).rejects.toMatchObject({ code: 403 });
  });

  it('lists the namespaces of its own Reports across the cluster, none when the API is not served', async () => {
    const { api, calls } = fakeApi(() => ({
      items: [{ metadata: { namespace: 'a' } }, { metadata: { namespace: 'b' } }, { metadata: {} }],
    }));
    expect(await kubeReportStore(api).listOwnNamespaces()).toEqual(['a', 'b']);
    expect(calls[0]).toMatchObject({
      method: 'listClusterCustomObject',
      params: {
        labelSelector: 'app.kubernetes.io/managed-by=kubeplus-isolation',
        fieldSelector: 'metadata.name=kubeplus-isolation',
      },
    });
    const missing = fakeApi(() => {
      throw new HttpError(404);
    });
    expect(await kubeReportStore(missing.api).listOwnNamespaces()).toEqual([]);
  });

  it('deletes idempotently', async () => {
    const gone = fakeApi(() => {
      throw new HttpError(404);
    });
    await expect(kubeReportStore(gone.api).delete('team-a')).resolves.toBeUndefined();
    expect(gone.calls[0]).toMatchObject({
      method: 'deleteNamespacedCustomObject',
      params: { namespace: 'team-a', name: 'kubeplus-isolation' },
    });
  });
});

/** A page sizer that has measured 2 KiB objects: pages stay at the caller's limit. */
function small(): PodPageSizer {
  const pages = new PodPageSizer();
  pages.observe(10, 20 * 1024);
  return pages;
}

/** Sandbox LISTs never touch the core API. */
const unusedCore = fakeApi(() => {
  throw new Error('CoreV1Api called');
}).api as unknown as CoreV1Api;

describe('kubeSandboxLister', () => {
  it('lists at the first served Agent Sandbox version, passing the page on', async () => {
    const { api, calls } = fakeApi((call) => {
      if (call.params.version === 'v1beta1') throw new HttpError(404);
      return { items: [{ metadata: { name: 's' } }], metadata: { continue: 'next' } };
    });
    expect(
      await kubeSandboxLister(api, unusedCore, small(), small()).listSandboxes('team-a', {
        limit: 500,
        continueToken: 'tok',
      }),
    ).toEqual({
      items: [{ metadata: { name: 's' } }],
      continueToken: 'next',
      apiVersion: 'agents.x-k8s.io/v1alpha1',
    });
    expect(calls.map((c) => [c.params.version, c.params.limit, c.params._continue])).toEqual([
      ['v1beta1', 500, 'tok'],
      ['v1alpha1', 500, 'tok'],
    ]);
  });

  it('is undefined when no version is served, and passes other errors on', async () => {
    const none = fakeApi(() => {
      throw new HttpError(404);
    });
    expect(await kubeSandboxLister(none.api, unusedCore).listSandboxes('team-a', { limit: 500 })).toBeUndefined();
    const forbidden = fakeApi(() => {
      throw new HttpError(403);
    });
    await expect(
      kubeSandboxLister(forbidden.api, unusedCore).listSandboxes('team-a', { limit: 500 }),
    ).rejects.toMatchObject({
      code: 403,
    });
  });

  it("lists the namespace's unfinished Pods, whatever their labels (a Sandbox's Pod is found by owner UID), passing the page on", async () => {
    const core = fakeApi(() => ({ items: [{ metadata: { name: 'p' } }], metadata: { _continue: 'more' } }));
    const lister = kubeSandboxLister(fakeApi(() => ({})).api, core.api as unknown as CoreV1Api, small(), small());
    expect(await lister.listSandboxPods('team-a', { limit: 500, continueToken: 'tok' })).toEqual({
      items: [{ metadata: { name: 'p' } }],
      continueToken: 'more',
    });
    expect(core.calls).toEqual([
      {
        method: 'listNamespacedPod',
        params: {
          namespace: 'team-a',
          limit: 500,
          _continue: 'tok',
          fieldSelector: 'status.phase!=Succeeded,status.phase!=Failed',
        },
      },
    ]);
  });

  // Issue 34: a tenant can make Sandboxes and their Pods large; 500 of the largest in one page
  // would be ~750 MiB. Each LIST asks for what its sizer says fits 8 MiB (how a page is measured:
  // test/kube/pod-lister.test.ts).
  it('pages Sandboxes and Sandbox Pods by bytes: each LIST asks for what its own sizer says fits', async () => {
    const core = fakeApi(() => ({ items: [], metadata: {} }));
    const sandboxes = fakeApi(() => ({ items: [], metadata: {} }));
    const bigPods = new PodPageSizer();
    bigPods.observe(2, 4 * 1024 * 1024); // 2 MiB a Pod: 4 fit in 8 MiB
    const bigSandboxes = new PodPageSizer();
    bigSandboxes.observe(4, 4 * 1024 * 1024); // 1 MiB a Sandbox: 8 fit
    const lister = kubeSandboxLister(sandboxes.api, core.api as unknown as CoreV1Api, bigPods, bigSandboxes);
    await lister.listSandboxPods('team-a', { limit: 500 });
    await lister.listSandboxes('team-a', { limit: 500 });
    expect(core.calls.map((c) => c.params.limit)).toEqual([4]);
    expect(sandboxes.calls.map((c) => c.params.limit)).toEqual([8]);
    // Unmeasured, a lister assumes the largest objects etcd stores: 5 a page.
    const fresh = fakeApi(() => ({ items: [], metadata: {} }));
    await kubeSandboxLister(fresh.api, unusedCore).listSandboxes('team-a', { limit: 500 });
    expect(fresh.calls.map((c) => c.params.limit)).toEqual([5]);
  });
});
