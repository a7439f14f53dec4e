/**
 * Issue 35, "the right namespace" and "never a namespace that is not the tenant's", on the real
 * control plane: KubePlus as it really runs puts its instances in its own namespace, `default` in
 * its README and CI, and creates the tenant namespace `<instance>` itself (annotated
 * `meta.helm.sh/release-name: "<kind>-<instance>"`) inside its webhook's handling of the
 * instance's CREATE.
 *
 * Here a MutatingWebhookConfiguration imitates only KubePlus's REGISTRATION (rules naming the group
 * platformapi.kubeplus, clientConfig.service in `default`): it is harmless (failurePolicy Ignore,
 * a namespaceSelector matching nothing, so it is never called), and no KubePlus runs. The test
 * does what KubePlus would have done before the instance is stored: it creates the namespace
 * with the release-name annotation. The Kind is platformapi.kubeplus/v1alpha1, no status
 * subresource, labelled registered-by=kubeplus (as KubePlus registers it).
 *
 * The operator gets no --platform-namespace (the chart's new default): it must find `default`
 * from the webhook, isolate `<instance>` and never touch `default`; refuse (Warning Event
 * TenantNamespaceRefused, gauge kubeplus_operator_tenant_namespace_refused_instances{reason})
 * instances named kube-system, the release namespace (the operator's Lease namespace), or an
 * existing namespace not created for them; release what the previous operator (the last commit
 * before issue 35, built by e2e/scripts/build-previous-operator.sh) claimed on `default`; still
 * isolate a team-a instance in its own namespace; and obey the flag over the discovery.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { instanceKindCrd, isApiStatus, repoRoot, waitFor } from '@kubeplus-isolation/e2e';
import { NODE_ISOLATION_ANNOTATION, NODE_ISOLATION_ENABLED_LABEL, OWNER_ANNOTATION } from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Namespace,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { poolMandate } from './support/node-isolation.js';
import { isolationKeys, mergePatch, readNamespace, waitForNamespace } from './support/operator.js';

const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);

import { operatorSuite } from './support/operator-suite.js';

const run = promisify(execFile);
/** The last commit before issue 35 (e2e/scripts/build-previous-operator.sh builds its operator). */
const PREVIOUS_OPERATOR_REF = '5ac862d';
const APP = {
  group: 'platformapi.kubeplus',
  version: 'v1alpha1',
  plural: 'kpiguardapps',
  kind: 'KpiGuardApp',
} as const;
const APP_CRD = `${APP.plural}.${APP.group}`;
const WEBHOOK = uniqueName('kpi-guard-kubeplus-registration');
const REFUSED = 'kubeplus_operator_tenant_namespace_refused_instances';
const KUBEPLUS_NS = 'default';

const mandate = poolMandate(uniqueName('pool'));
const isolation = { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) };
const labelled = (ns: V1Namespace | undefined): boolean =>
  ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true';
/** Nothing of the operator's on it: no isolation label, resolved annotation, owner or created-for. */
const untouched = (ns: V1Namespace | undefined): boolean =>
  Object.values(isolationKeys(ns)).every((v) => v === undefined) &&
  ns?.metadata?.annotations?.['kubeplus.io/created-for'] === undefined;

async function ensureAppCrd(kc: KubeConfig): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  try {
    await ext.createCustomResourceDefinition({ body: instanceKindCrd(APP) });
  } catch (error) {
    if (!isApiStatus(error, 409)) throw error;
  }
  await waitFor(
    `CRD ${APP_CRD} to be Established`,
    async () => {
      const crd = await ext.readCustomResourceDefinition({ name: APP_CRD });
      return crd.status?.conditions?.find((c) => c.type === 'Established')?.status === 'True';
    },
    { timeoutMs: 60_000, intervalMs: 250 },
  );
}

/** KubePlus's registration shape, made harmless: never called (no namespace matches), Ignore if it were. */
async function registerKubePlusWebhook(kc: KubeConfig): Promise<void> {
  await kc.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
    body: {
      metadata: { name: WEBHOOK },
      webhooks: [
        {
          name: 'platform-as-code.crd-binding.kpi-guard.test',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Ignore',
          timeoutSeconds: 1,
          clientConfig: { service: { namespace: KUBEPLUS_NS, name: 'crd-hook-service', path: '/mutate' } },
          namespaceSelector: { matchLabels: { 'kpi-guard-never': 'true' } },
          rules: [
            {
              apiGroups: [APP.group, 'workflows.kubeplus'],
              apiVersions: ['v1alpha1'],
              resources: ['*'],
              operations: ['CREATE', 'UPDATE', 'DELETE'],
            },
          ],
        },
      ],
    },
  });
}

describe('operator: the tenant namespace beside KubePlus (issue 35), on the real control plane', () => {
  const suite = operatorSuite({
    name: 'op-guard',
    // Before the operator: it discovers the platform namespace at start.
    beforeOperator: async ({ kc }) => {
      await ensureAppCrd(kc);
      await registerKubePlusWebhook(kc);
    },
    // While an operator still runs, so it releases what it isolated.
    beforeTeardown: async () => {
      await deleteApps();
    },
    afterTeardown: async ({ kc }) => {
      await kc
        .makeApiClient(AdmissionregistrationV1Api)
        .deleteMutatingWebhookConfiguration({ name: WEBHOOK })
        .catch(() => undefined);
      await kc
        .makeApiClient(ApiextensionsV1Api)
        .deleteCustomResourceDefinition({ name: APP_CRD })
        .catch(() => undefined);
      await Promise.all(exactNamespaces.map((n) => core.deleteNamespace({ name: n }).catch(() => undefined)));
    },
  });
  let kc: KubeConfig;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;
  const exactNamespaces: string[] = [];
  const apps: { namespace: string; name: string }[] = [];

  beforeAll(() => {
    kc = suite.kc;
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
  });

  afterAll(async () => {
    // Whatever happened, `default` must not keep anything of the operator's (the unfixed operator labels it).
    const ns = await readNamespace(kc, KUBEPLUS_NS);
    expect(isolationKeys(ns)).toEqual(isolationKeys(undefined));
  });

  async function createApp(namespace: string, name: string, annotations: Record<string, string> = isolation) {
    apps.push({ namespace, name });
    await custom.createNamespacedCustomObject({
      ...APP,
      namespace,
      body: { apiVersion: `${APP.group}/${APP.version}`, kind: APP.kind, metadata: { name, annotations }, spec: {} },
    });
  }

  /** Deletes every app while the operator runs (its cleanup releases what it isolated), then strips what is left. */
  async function deleteApps(): Promise<void> {
    const all = apps.splice(0);
    await Promise.all(
      all.map(async ({ namespace, name }) => {
        await custom.deleteNamespacedCustomObject({ ...APP, namespace, name }).catch((error: unknown) => {
          if (!isApiStatus(error, 404)) throw error;
        });
        const gone = await waitFor(
          `${APP.kind} ${namespace}/${name} to be gone`,
          async () => {
            try {
              await custom.getNamespacedCustomObject({ ...APP, namespace, name });
              return false;
            } catch (error) {
              if (isApiStatus(error, 404)) return true;
              throw error;
            }
          },
          { timeoutMs: 30_000, intervalMs: 250 },
        ).catch(() => false);
        if (!gone) {
          await custom
            .patchNamespacedCustomObject(
              { ...APP, namespace, name, body: { metadata: { finalizers: null } } },
              mergePatch,
            )
            .catch(() => undefined);
        }
      }),
    );
  }

  /** A namespace of exactly this name, as KubePlus creates it for `<instance>` (release-name quoted, as KubePlus writes it). */
  async function kubeplusTenantNamespace(name: string): Promise<void> {
    exactNamespaces.push(name);
    await core.createNamespace({
      body: {
        metadata: {
          name,
          labels: { managedby: 'kubeplus' },
          annotations: { 'meta.helm.sh/release-name': `"${APP.kind.toLowerCase()}-${name}"` },
        },
      },
    });
  }

  function waitForRefusal(namespace: string, name: string, includes: string): Promise<string> {
    return waitFor(
      `a Warning TenantNamespaceRefused Event on ${APP.kind} ${namespace}/${name} saying ${JSON.stringify(includes)}`,
      async (observe) => {
        const events = await core.listNamespacedEvent({
          namespace,
          fieldSelector: `involvedObject.name=${name},involvedObject.kind=${APP.kind}`,
        });
        observe(events.items.map((e) => `${e.type} ${e.reason}: ${e.message}`));
        const hit = events.items.find(
          (e) => e.type === 'Warning' && e.reason === 'TenantNamespaceRefused' && (e.message ?? '').includes(includes),
        );
        return hit?.message;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }

  function waitForRefusedGauge(reason: string, value: number): Promise<unknown> {
    return waitFor(
      `${REFUSED}{reason="${reason}"} to be ${value}`,
      async (observe) => {
        const v = await suite.operator.metric(REFUSED, { reason });
        observe(v);
        return v === value;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  }

  test("it finds KubePlus's namespace from its webhook, isolates <instance> there and never touches default", async () => {
    const name = uniqueName('kpi-guard-shop');
    await kubeplusTenantNamespace(name);
    await createApp(KUBEPLUS_NS, name);
    const ns = await waitForNamespace(kc, name, 'to be node-isolated for the instance in default', labelled);
    expect(ns?.metadata?.annotations?.[OWNER_ANNOTATION]).toBe(`${APP.group}/${APP.kind}/${KUBEPLUS_NS}/${name}`);
    expect(untouched(await readNamespace(kc, KUBEPLUS_NS))).toBe(true);
    // It says where the namespace came from.
    const found = suite.operator.logLines().find((l) => l.msg === 'platform namespace');
    expect(found).toMatchObject({ platformNamespace: KUBEPLUS_NS, source: 'discovered' });
  });

  test('instances named kube-system, the release namespace, or an existing namespace not created for them are refused, and those namespaces stay untouched', async () => {
    const plain = await suite.tenantNamespace('kpi-guard-team-b');
    const release = suite.leaseNamespace;
    await createApp(KUBEPLUS_NS, 'kube-system');
    await createApp(KUBEPLUS_NS, release);
    await createApp(KUBEPLUS_NS, plain);

    expect(await waitForRefusal(KUBEPLUS_NS, 'kube-system', 'a system namespace')).toContain('Delete this instance');
    expect(await waitForRefusal(KUBEPLUS_NS, release, "kubeplus-isolation's own namespace")).toContain(release);
    expect(await waitForRefusal(KUBEPLUS_NS, plain, 'already exists and was not created for this instance')).toContain(
      `meta.helm.sh/release-name=${APP.kind.toLowerCase()}-${plain}`,
    );
    await waitForRefusedGauge('system-namespace', 1);
    await waitForRefusedGauge('release-namespace', 1);
    await waitForRefusedGauge('not-created-for-instance', 1);
    for (const n of ['kube-system', release, plain, KUBEPLUS_NS]) {
      expect({ n, untouched: untouched(await readNamespace(kc, n)) }).toEqual({ n, untouched: true });
    }
  });

  test('an existing namespace KubePlus stamps at the instance CREATE (it does so for an existing one too) is refused when it is older than the instance by more than 30 s', async () => {
    const old = await suite.tenantNamespace('kpi-guard-old');
    const created = Date.parse(String((await readNamespace(kc, old))?.metadata?.creationTimestamp));
    // KubePlus's webhook stamps it during the instance's CREATE; the namespace is 31 s older by then.
    await waitFor('the namespace to be more than 30 s old', async () => Date.now() - created > 31_000 || undefined, {
      timeoutMs: 40_000,
      intervalMs: 500,
    });
    await core.patchNamespace(
      {
        name: old,
        body: { metadata: { annotations: { 'meta.helm.sh/release-name': `"${APP.kind.toLowerCase()}-${old}"` } } },
      },
      mergePatch,
    );
    await createApp(KUBEPLUS_NS, old);
    expect(await waitForRefusal(KUBEPLUS_NS, old, 'existed before')).toContain('KubePlus stamps an existing namespace');
    await waitForRefusedGauge('not-created-for-instance', 2);
    expect(untouched(await readNamespace(kc, old))).toBe(true);
  });

  test('a team-a instance in its own namespace still isolates that namespace', async () => {
    const teamA = await suite.tenantNamespace('kpi-guard-team-a');
    await createApp(teamA, 'agent');
    await waitForNamespace(kc, teamA, 'to be node-isolated for its own instance', labelled);
  });

  test('upgrade: what the previous operator claimed (it labelled default for an instance in default) is released', async () => {
    // The operator before issue 35: it assumed the platform namespace kubeplus.
    const { stdout } = await run(join(repoRoot(), 'e2e', 'scripts', 'build-previous-operator.sh'), [
      PREVIOUS_OPERATOR_REF,
    ]);
    const previousEntry = stdout.trim().split('\n').at(-1) ?? '';
    await deleteApps(); // while this operator runs: the previous one sees only the instance below
    await suite.operator.stop();
    const previous = await suite.startOperator({ name: 'op-guard-previous', entry: previousEntry });
    const name = uniqueName('kpi-guard-upgraded');
    const identity = `${APP.group}/${APP.kind}/${KUBEPLUS_NS}/${name}`;
    await kubeplusTenantNamespace(name);
    await createApp(KUBEPLUS_NS, name);
    await waitForNamespace(
      kc,
      KUBEPLUS_NS,
      'to be claimed by the previous operator (the bug)',
      (n) => labelled(n) && n?.metadata?.annotations?.[OWNER_ANNOTATION] === identity,
      60_000, // it must win the Lease first
    );
    await previous.stop();
    await suite.startOperator();
    await waitForNamespace(kc, KUBEPLUS_NS, 'to be released (no key of the operator left)', untouched, 60_000);
    await waitForNamespace(kc, name, 'to be node-isolated', labelled);
  });

  test('--platform-namespace overrides the discovery', async () => {
    await deleteApps();
    await suite.operator.stop();
    const platform = await suite.tenantNamespace('kpi-guard-platform');
    const op = await suite.startOperator({ args: [`--platform-namespace=${platform}`] });
    const name = uniqueName('kpi-guard-flagged');
    await kubeplusTenantNamespace(name);
    await createApp(platform, name);
    await waitForNamespace(kc, name, 'to be node-isolated for the instance in the flagged namespace', labelled);
    // Named after the platform namespace itself.
    await createApp(platform, platform);
    await waitForRefusal(platform, platform, "KubePlus's own namespace");
    await waitForRefusedGauge('platform-namespace', 1);
    expect(untouched(await readNamespace(kc, platform))).toBe(true);
    // `default` is no longer KubePlus's here: an instance there lives in `default`, a system namespace.
    await createApp(KUBEPLUS_NS, uniqueName('kpi-guard-in-default'));
    await waitForRefusedGauge('system-namespace', 1);
    expect(untouched(await readNamespace(kc, KUBEPLUS_NS))).toBe(true);
    expect(op.logLines().find((l) => l.msg === 'platform namespace')).toMatchObject({
      platformNamespace: platform,
      source: 'flag',
    });
  });

  test("KubePlus's discovered namespace changing under a running operator ends it: exit 1, reason platform-namespace-changed", async () => {
    await deleteApps();
    await suite.operator.stop();
    const op = await suite.startOperator(); // no flag: it discovers default
    expect(op.logLines().find((l) => l.msg === 'platform namespace')).toMatchObject({
      platformNamespace: KUBEPLUS_NS,
      source: 'discovered',
    });
    const elsewhere = await suite.tenantNamespace('kpi-guard-kubeplus-moved');
    // KubePlus reinstalled in another namespace: its registration now calls a service there.
    await kc.makeApiClient(AdmissionregistrationV1Api).patchMutatingWebhookConfiguration(
      {
        name: WEBHOOK,
        body: [{ op: 'replace', path: '/webhooks/0/clientConfig/service/namespace', value: elsewhere }],
      },
      jsonPatch,
    );
    const exit = await waitFor('the operator to exit', async () => op.process.exited(), {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    expect(exit.code).toBe(1);
    expect(op.logLines().find((l) => l.reason === 'platform-namespace-changed')).toMatchObject({
      level: 'error',
      from: KUBEPLUS_NS,
      to: elsewhere,
    });
    // The restart starts from the new namespace.
    const restarted = await suite.startOperator();
    expect(restarted.logLines().find((l) => l.msg === 'platform namespace')).toMatchObject({
      platformNamespace: elsewhere,
      source: 'discovered',
    });
  });
});
