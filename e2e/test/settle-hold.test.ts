/**
 * Governed before the first Pod (issue 35), on the real API server: KubePlus creates the tenant
 * namespace `<instance>` (labeled managedby=kubeplus, annotated meta.helm.sh/release-name) inside its
 * webhook's handling of the instance CREATE and starts `helm install` into it at once, so the chart's
 * Deployments, Jobs, bare Pods and Sandboxes are created before the operator has seen the instance.
 * The webhook's hold entry (settle-hold.kubeplus.io, POST /hold) holds their Pod and Sandbox CREATEs
 * until the operator has settled the namespace (kubeplus.io/isolation-settled), and the operator
 * settles it only once node isolation is written and the sandbox policy binding is in effect.
 *
 * Here the test plays KubePlus's part in its order (namespace, then the chart's objects, then the
 * instance), with the operator's writes slowed by 5 s (an API proxy in front of it) and 20 instances
 * at once. Placement is in the admitted Pod spec, so no node is needed: a Pod admitted without it
 * is the escape. Then: an instance asking for nothing (its Pods are released; the delay measured),
 * the operator down longer than the hold (a bare Pod is refused with the message, and admitted on
 * retry once the operator is back), a namespace KubePlus stamps long after it was created (never
 * held), and the platform namespace `default` (never sent to the hold).
 */
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import {
  type ApiProxy,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  isApiStatus,
  type RunningWebhook,
  registerWebhook,
  sleep,
  startApiProxy,
  startWebhook,
  testPod,
  unregisterWebhook,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  HELM_RELEASE_NAME_ANNOTATION,
  ISOLATION_SETTLED_LABEL,
  KUBEPLUS_MANAGED_LABEL,
  KUBEPLUS_MANAGED_VALUE,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createIsolatedNamespace,
  type Mandate,
  poolMandate,
  waitForWebhookActive,
  withoutDefaultTolerations,
} from './support/node-isolation.js';
import { createAgent, policyName, readNamespace, statusMessage } from './support/operator.js';
import { type Admission, createSandbox } from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';

jest.setTimeout(600_000);

const PLATFORM_NAMESPACE = 'kubeplus';
const SANDBOX_ENFORCE = JSON.stringify({ minRuntimeClass: 'kata', enforce: true });
const INSTANCES = 20;
const SLOW_WRITES_MS = 5_000;

/** The hold's refusal (README "The hold"), exactly. */
const holdMessage = (ns: string): string =>
  `namespace ${ns} is not yet settled by kubeplus-isolation (its isolation is not yet in effect); the request can be retried`;

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
};

/** A namespace as KubePlus's helmer leaves it: labeled managedby=kubeplus, the release name (with its literal quotes). */
async function kubeplusNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespace({
    body: {
      metadata: {
        name,
        labels: { [KUBEPLUS_MANAGED_LABEL]: KUBEPLUS_MANAGED_VALUE },
        annotations: { [HELM_RELEASE_NAME_ANNOTATION]: `"agent-${name}"` },
      },
    },
  });
}

type PodAttempt = { admitted: true; pod: V1Pod; refusals: string[]; ms: number };

/**
 * Creates a bare Pod as a client that retries would: the ServiceAccount admission plugin refuses
 * Pods until the namespace's `default` ServiceAccount exists, and the hold refuses them (retryably)
 * until the namespace is settled. Every refusal's message is kept.
 */
async function createPodRetrying(kc: KubeConfig, namespace: string, name: string): Promise<PodAttempt> {
  const core = kc.makeApiClient(CoreV1Api);
  const refusals: string[] = [];
  const started = performance.now();
  for (;;) {
    try {
      const pod = await core.createNamespacedPod({ namespace, body: testPod(name) });
      return { admitted: true, pod, refusals, ms: performance.now() - started };
    } catch (error) {
      if (!isApiStatus(error, 403)) throw error;
      refusals.push(statusMessage(error));
      if (refusals.length > 400)
        throw new Error(`Pod ${namespace}/${name} refused ${refusals.length} times: ${refusals.at(-1)}`);
      await sleep(250);
    }
  }
}

/** A Sandbox below the minimum (no runtime class), created as helm would, retried past the hold's refusals. */
async function createWeakSandboxRetrying(
  kc: KubeConfig,
  namespace: string,
): Promise<{ outcome: Admission; refusals: string[] }> {
  const refusals: string[] = [];
  for (;;) {
    const outcome = await createSandbox(
      kc,
      { kind: 'Sandbox', version: 'v1beta1', namespace, name: 'weak' },
      undefined,
    );
    if (outcome.allowed || !outcome.message.includes('not yet settled by kubeplus-isolation'))
      return { outcome, refusals };
    refusals.push(outcome.message);
    if (refusals.length > 40) throw new Error(`Sandbox in ${namespace} refused ${refusals.length} times by the hold`);
    await sleep(250);
  }
}

const hasPlacement = (pod: V1Pod, mandate: Mandate): boolean =>
  Object.entries(mandate.nodeSelector).every(([k, v]) => pod.spec?.nodeSelector?.[k] === v) &&
  mandate.tolerations.every((t) =>
    withoutDefaultTolerations(pod.spec?.tolerations).some(
      (p) => p.key === t.key && p.value === t.value && p.effect === t.effect && (p.operator ?? 'Equal') === t.operator,
    ),
  );

async function holdOutcomes(webhook: RunningWebhook): Promise<Record<string, number>> {
  const text = await (await fetch(webhook.metricsUrl)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^kubeplus_webhook_hold_outcomes_total\{outcome="([a-z_]+)"\} (\d+)/gm)) {
    out[m[1] as string] = Number(m[2]);
  }
  return out;
}

describe('the hold: a KubePlus install is governed before its first Pod (real API server, operator slowed)', () => {
  let webhook: RunningWebhook | undefined;
  let proxy: ApiProxy | undefined;
  const webhookConfig = uniqueName('e2e-settle-hold');
  const tenants: string[] = [];
  const suite = operatorSuite({
    name: 'hold',
    platformNamespace: PLATFORM_NAMESPACE,
    startOperator: false,
    waitForServiceAccount: false,
    beforeOperator: async ({ cluster, kc }) => {
      webhook = await startWebhook(cluster);
      await registerWebhook(kc, {
        url: webhook.url,
        caPem: webhook.caPem,
        name: webhookConfig,
        hold: { releaseNamespace: suite.leaseNamespace },
      });
      // Both entries are in one configuration, which the API server loads as a whole.
      const pool = uniqueName('hold-probe-pool');
      const probe = await createIsolatedNamespace(kc, 'kpi-hold-probe', poolMandate(pool));
      tenants.push(probe);
      await waitForWebhookActive(kc, probe, { pool });
      proxy = await startApiProxy(cluster);
    },
    // The operator reaches the API server through the proxy, which can slow its writes.
    kubeconfigPath: () => {
      if (proxy === undefined) throw new Error('api proxy not started');
      return proxy.kubeconfigPath;
    },
    afterTeardown: async ({ kc }) => {
      await unregisterWebhook(kc, webhookConfig);
      await Promise.all(tenants.map((ns) => deleteNamespace(kc, ns)));
      await webhook?.stop();
      await proxy?.close();
    },
  });

  test(`${INSTANCES} instances at once, KubePlus's order, operator writes slowed by ${SLOW_WRITES_MS / 1000} s: every Pod admitted is placed, no Sandbox below the minimum is admitted`, async () => {
    const kc = suite.kc;
    // Every write but the Lease's (its renewals must not lose the election).
    const slow = proxy?.delay((r) => r.method !== 'GET' && !/\/leases(\/|$)/.test(r.path), SLOW_WRITES_MS);
    await suite.startOperator();
    const mandate = poolMandate(uniqueName('hold-pool'));
    const names = Array.from({ length: INSTANCES }, (_, i) => uniqueName(`hold${i}`));
    tenants.push(...names);
    const apps = kc.makeApiClient(AppsV1Api);
    const batch = kc.makeApiClient(BatchV1Api);
    const labels = { app: 'chart' };
    const template = {
      metadata: { labels },
      spec: { containers: [{ name: 'main', image: 'registry.k8s.io/pause:3.10' }] },
    };

    const installs = names.map(async (name) => {
      const started = performance.now();
      // KubePlus's webhook, during the instance CREATE: the namespace, then helm install in the background.
      await kubeplusNamespace(kc, name);
      const helm = (async () => {
        await apps.createNamespacedDeployment({
          namespace: name,
          body: { metadata: { name: 'chart' }, spec: { replicas: 3, selector: { matchLabels: labels }, template } },
        });
        await batch.createNamespacedJob({
          namespace: name,
          body: {
            metadata: { name: 'chart-job' },
            spec: {
              template: {
                metadata: { labels: { app: 'chart-job' } },
                spec: { ...template.spec, restartPolicy: 'Never' },
              },
            },
          },
        });
        const [bare, sandbox] = await Promise.all([
          createPodRetrying(kc, name, 'chart-bare'),
          createWeakSandboxRetrying(kc, name),
        ]);
        return { bare, sandbox };
      })();
      // Then the instance is stored, with both annotations.
      await createAgent(kc, PLATFORM_NAMESPACE, name, {
        [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate),
        [SANDBOX_ISOLATION_ANNOTATION]: SANDBOX_ENFORCE,
      });
      const result = await helm;
      return { name, ...result, ms: performance.now() - started };
    });
    const results = await Promise.all(installs).finally(() => slow?.());

    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    for (const { name, bare, sandbox } of results) {
      // The bare Pod: admitted only with its placement.
      expect({ pod: bare.pod.metadata?.name, placed: hasPlacement(bare.pod, mandate) }).toEqual({
        pod: 'chart-bare',
        placed: true,
      });
      // The Sandbox below the minimum: refused by the instance's policy, never admitted.
      expect(sandbox.outcome.allowed).toBe(false);
      expect(!sandbox.outcome.allowed && sandbox.outcome.message).toMatch(/ValidatingAdmissionPolicy/);
      const stored = (await custom.listNamespacedCustomObject({
        group: 'agents.x-k8s.io',
        version: 'v1beta1',
        namespace: name,
        plural: 'sandboxes',
      })) as { items: unknown[] };
      expect(stored.items).toEqual([]);
      // The controllers' Pods (3 of the Deployment, 1 of the Job): all there, all placed.
      const pods = await waitFor(
        `the 5 Pods of ${name}`,
        async (observe) => {
          const list = (await core.listNamespacedPod({ namespace: name })).items;
          observe(list.map((p) => p.metadata?.name));
          return list.length >= 5 ? list : undefined;
        },
        { timeoutMs: 240_000, intervalMs: 1_000 },
      );
      const unplaced = pods.filter((p) => !hasPlacement(p, mandate)).map((p) => p.metadata?.name);
      expect({ namespace: name, unplaced }).toEqual({ namespace: name, unplaced: [] });
      expect((await readNamespace(kc, name))?.metadata?.labels?.[ISOLATION_SETTLED_LABEL]).toBe('true');
    }
    const held = results.map((r) => r.bare.ms);
    const outcomes = await holdOutcomes(webhook as RunningWebhook);
    console.log(
      `hold under a slowed operator (${INSTANCES} instances, writes +${SLOW_WRITES_MS} ms): bare Pod admitted after median ${Math.round(median(held))} ms (min ${Math.round(Math.min(...held))}, max ${Math.round(Math.max(...held))}); refusals on the way: ${results.reduce((n, r) => n + r.bare.refusals.length, 0)}; webhook outcomes ${JSON.stringify(outcomes)}`,
    );
  });

  test('an instance asking for nothing: its Pods are released as they are, its namespace settled (delay measured)', async () => {
    const kc = suite.kc;
    const delays: number[] = [];
    for (let i = 0; i < 5; i++) {
      const name = uniqueName(`holdplain${i}`);
      tenants.push(name);
      await kubeplusNamespace(kc, name);
      // The default ServiceAccount first, so the delay measured is the hold's alone.
      await waitFor(
        `ServiceAccount default in ${name}`,
        () => kc.makeApiClient(CoreV1Api).readNamespacedServiceAccount({ name: 'default', namespace: name }),
        { timeoutMs: 30_000 },
      );
      const pod = createPodRetrying(kc, name, 'plain');
      await createAgent(kc, PLATFORM_NAMESPACE, name, {});
      const attempt = await pod;
      expect(attempt.refusals).toEqual([]);
      expect(attempt.pod.spec?.nodeSelector).toBeUndefined();
      const ns = await readNamespace(kc, name);
      expect(ns?.metadata?.labels?.[ISOLATION_SETTLED_LABEL]).toBe('true');
      expect(ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBeUndefined();
      delays.push(attempt.ms);
    }
    console.log(
      `hold for an instance with neither annotation: Pod admitted after median ${Math.round(median(delays))} ms (${delays.map(Math.round).join(', ')} ms)`,
    );
  });

  test('a sandbox policy binding takes effect after it is stored: the namespace is settled only once a weak Sandbox is refused (delay measured)', async () => {
    const kc = suite.kc;
    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    const bindingDelays: number[] = [];
    const settleDelays: number[] = [];
    for (let i = 0; i < 3; i++) {
      const name = uniqueName(`holdsbx${i}`);
      tenants.push(name);
      await kubeplusNamespace(kc, name);
      const binding = policyName(PLATFORM_NAMESPACE, name, 'enforce');
      const created = performance.now();
      await createAgent(kc, PLATFORM_NAMESPACE, name, { [SANDBOX_ISOLATION_ANNOTATION]: SANDBOX_ENFORCE });
      // When the binding is stored, and when a dry-run weak Sandbox is first refused (the test's own probes).
      const stored = await waitFor(
        `binding ${binding}`,
        async () => {
          try {
            await admission.readValidatingAdmissionPolicyBinding({ name: binding });
            return performance.now();
          } catch (error) {
            if (isApiStatus(error, 404)) return undefined;
            throw error;
          }
        },
        { timeoutMs: 60_000, intervalMs: 10 },
      );
      const inEffect = await waitFor(
        `binding ${binding} in effect`,
        async () => {
          const outcome = await createSandbox(
            kc,
            { kind: 'Sandbox', version: 'v1beta1', namespace: name, name: 'probe' },
            undefined,
            { dryRun: true },
          );
          return !outcome.allowed && outcome.message.includes('ValidatingAdmissionPolicy')
            ? performance.now()
            : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 10 },
      );
      // Settled only after that (the operator's own probe saw the same).
      const settled = await waitFor(
        `${name} settled`,
        async () =>
          (await readNamespace(kc, name))?.metadata?.labels?.[ISOLATION_SETTLED_LABEL] === 'true'
            ? performance.now()
            : undefined,
        { timeoutMs: 60_000, intervalMs: 10 },
      );
      // A Sandbox below the minimum is refused by the policy, never held (the namespace is settled).
      const weak = await createSandbox(
        kc,
        { kind: 'Sandbox', version: 'v1beta1', namespace: name, name: 'weak' },
        undefined,
      );
      expect(!weak.allowed && weak.message).toMatch(/ValidatingAdmissionPolicy/);
      bindingDelays.push(inEffect - stored);
      settleDelays.push(settled - created);
    }
    console.log(
      `sandbox policy binding: in effect median ${Math.round(median(bindingDelays))} ms after it was stored (${bindingDelays.map(Math.round).join(', ')}); namespace settled median ${Math.round(median(settleDelays))} ms after the instance was created (${settleDelays.map(Math.round).join(', ')})`,
    );
  });

  test('the operator down longer than the hold: a bare Pod is refused with the message, and admitted placed on retry once it is back', async () => {
    const kc = suite.kc;
    await suite.operator.stop();
    const mandate = poolMandate(uniqueName('hold-down-pool'));
    const name = uniqueName('holddown');
    tenants.push(name);
    await kubeplusNamespace(kc, name);
    await createAgent(kc, PLATFORM_NAMESPACE, name, { [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate) });
    await waitFor(
      `ServiceAccount default in ${name}`,
      () => kc.makeApiClient(CoreV1Api).readNamespacedServiceAccount({ name: 'default', namespace: name }),
      { timeoutMs: 30_000 },
    );
    const core = kc.makeApiClient(CoreV1Api);
    const refusal = await core.createNamespacedPod({ namespace: name, body: testPod('bare') }).then(
      () => undefined,
      (error: unknown) => ({ code: (error as { code?: number }).code, message: statusMessage(error) }),
    );
    expect(refusal?.code).toBe(403);
    expect(refusal?.message).toContain(holdMessage(name));
    await suite.startOperator();
    const retried = await createPodRetrying(kc, name, 'bare');
    expect(hasPlacement(retried.pod, mandate)).toBe(true);
  });
});

describe('the hold never holds what KubePlus did not just create (webhook with a 4 s window, no operator)', () => {
  let webhook: RunningWebhook | undefined;
  const webhookConfig = uniqueName('e2e-settle-hold-window');
  const namespaces: string[] = [];
  let kc: KubeConfig;

  // No operator and no instance CRD here: only the webhook and namespaces.
  beforeAll(async () => {
    const cluster = await connectE2eCluster();
    kc = cluster.kc;
    webhook = await startWebhook(cluster, { extraArgs: ['--hold-window=4s', '--hold-timeout=3s'] });
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: webhookConfig, hold: {} });
    const pool = uniqueName('hold-window-pool');
    const probe = await createIsolatedNamespace(kc, 'kpi-hold-window-probe', poolMandate(pool));
    namespaces.push(probe);
    await waitForWebhookActive(kc, probe, { pool });
  });

  afterAll(async () => {
    if (kc !== undefined) {
      await unregisterWebhook(kc, webhookConfig);
      await Promise.all(namespaces.map((ns) => deleteNamespace(kc, ns)));
    }
    await webhook?.stop();
  });

  test('a namespace KubePlus stamps after the window: its Pods are admitted at once, though nothing ever settles it', async () => {
    const ns = await createTestNamespace(kc, 'kpi-hold-old');
    namespaces.push(ns);
    // Older than the window before KubePlus stamps it (an instance named after an existing namespace).
    await sleep(4_500);
    const core = kc.makeApiClient(CoreV1Api);
    const current = await core.readNamespace({ name: ns });
    current.metadata = {
      ...current.metadata,
      labels: { ...current.metadata?.labels, [KUBEPLUS_MANAGED_LABEL]: KUBEPLUS_MANAGED_VALUE },
      annotations: { ...current.metadata?.annotations, [HELM_RELEASE_NAME_ANNOTATION]: `"agent-${ns}"` },
    };
    await core.replaceNamespace({ name: ns, body: current });
    const before = (await holdOutcomes(webhook as RunningWebhook)).too_old ?? 0;
    // Pods until the API server (which sees the new labels moments later) has sent one to the hold:
    // each is admitted at once, none refused, though nothing will ever settle the namespace.
    let n = 0;
    const refusals: string[] = [];
    await waitFor(
      'the hold to answer a Pod of the stamped namespace as too old to hold',
      async (observe) => {
        const pod = await createPodRetrying(kc, ns, `old-ns-pod-${n++}`);
        refusals.push(...pod.refusals);
        const tooOld = (await holdOutcomes(webhook as RunningWebhook)).too_old ?? 0;
        observe({ pods: n, tooOld: tooOld - before });
        return tooOld > before;
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(refusals).toEqual([]);
  });

  test('the platform namespace `default`, labeled and stamped as KubePlus does: never sent to the hold', async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const original = await core.readNamespace({ name: 'default' });
    const restore = { labels: { ...original.metadata?.labels }, annotations: { ...original.metadata?.annotations } };
    const stamp = async (labels: Record<string, string>, annotations: Record<string, string>) => {
      const current = await core.readNamespace({ name: 'default' });
      current.metadata = { ...current.metadata, labels, annotations };
      await core.replaceNamespace({ name: 'default', body: current });
    };
    const podName = uniqueName('hold-default');
    try {
      await stamp(
        { ...restore.labels, [KUBEPLUS_MANAGED_LABEL]: KUBEPLUS_MANAGED_VALUE },
        { ...restore.annotations, [HELM_RELEASE_NAME_ANNOTATION]: '"agent-default"' },
      );
      // The API server's namespace view follows the change within moments.
      await sleep(2_000);
      const before = await holdOutcomes(webhook as RunningWebhook);
      const total = (o: Record<string, number>) => Object.values(o).reduce((a, b) => a + b, 0);
      const pod = await createPodRetrying(kc, 'default', podName);
      expect(pod.refusals).toEqual([]);
      expect(total(await holdOutcomes(webhook as RunningWebhook)) - total(before)).toBe(0);
    } finally {
      await core.deleteNamespacedPod({ name: podName, namespace: 'default' }).catch(() => undefined);
      await stamp(restore.labels, restore.annotations);
    }
  });
});
