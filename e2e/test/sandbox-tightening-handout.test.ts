/**
 * Issue 36, path 1: "handed out after a tightening". RuntimeClass.handler is immutable, so raising
 * a tenant's minimum re-creates `kubeplus-sandbox-<instance>` with a stronger handler, and a
 * platform class can be deleted and re-created with another. A warm-pool Sandbox created BEFORE
 * that keeps the class NAME, which is still allowed, and its Pod runs the OLD handler. A
 * SandboxClaim adopting it (the claim controller resets its ownerReferences, the claim becoming its
 * controller: sandboxclaim_controller.go completeAdoption, v1.0.1) was judged by class name only,
 * so the claimant got the old handler.
 *
 * Proven here on the real API server with the operator, no node and no Agent Sandbox controller
 * (the harness installs the CRDs): the test makes the SandboxWarmPool, the warm Sandboxes it
 * "owns" and the SandboxClaim, and sends the adoption UPDATE the claim controller sends.
 *
 * - a Sandbox created before its class got its current handler is NOT handed out (refused, with a
 *   message naming the class and the time), in both policy layouts;
 * - a Sandbox created after it is handed out as before;
 * - the operator deletes the stale warm Sandbox (so the pool re-creates it under the current
 *   handler, and the claim's retries end: see DESIGN.md), saying so in a StaleWarmSandboxDeleted
 *   Event on the instance;
 * - the same when a platform class is deleted and re-created with a stronger handler.
 */
import { beforeAll, describe, expect, test } from '@jest/globals';
import { installCrds, isApiStatus, sandboxIsolationParamsCrd, waitFor } from '@kubeplus-isolation/e2e';
import { SANDBOX_ISOLATION_ANNOTATION } from '@kubeplus-isolation/spec';
import { CustomObjectsApi, type KubeConfig, NodeV1Api } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import {
  createAgent,
  mergePatch,
  patchAgent,
  runtimeClassName,
  statusMessage,
  waitForEvent,
} from './support/operator.js';
import {
  createSandbox,
  denied,
  RuntimeClasses,
  type SandboxRef,
  waitForAdmission,
} from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';
import { removeSharedLayout } from './support/shared-layout.js';

const LAYOUTS = ['per-instance', 'shared'] as const;
const annotation = (minRuntimeClass: string): string => JSON.stringify({ minRuntimeClass, enforce: true });
const EXT = { group: 'extensions.agents.x-k8s.io', version: 'v1beta1' } as const;
const SANDBOXES = { group: 'agents.x-k8s.io', version: 'v1beta1', plural: 'sandboxes' } as const;
const WARM_POOL_LABEL = 'agents.x-k8s.io/warm-pool-sandbox';
/** Holds a deleted Sandbox, so the test still sees it (and can try to hand it out) once the operator deleted it. */
const HOLD = 'e2e.kubeplus.io/hold';

interface Meta {
  name: string;
  uid: string;
  creationTimestamp: string;
  deletionTimestamp?: string;
  finalizers?: string[];
}

/** An outcome of an UPDATE: admitted, or refused with the API server's message. */
type Outcome = { admitted: true } | { admitted: false; code: number; message: string };

describe.each(LAYOUTS)(
  'a Sandbox started before its class got its current handler is never handed out (%s layout)',
  (layout) => {
    const suite = operatorSuite({
      name: `op-handout-${layout === 'shared' ? 's' : 'p'}`,
      waitForServiceAccount: false,
      args: [`--sandbox-policy-layout=${layout}`],
      ...(layout === 'shared'
        ? {
            beforeOperator: async ({ kc }) => {
              await installCrds(kc, [sandboxIsolationParamsCrd()]);
            },
            afterTeardown: ({ kc }) => removeSharedLayout(kc),
          }
        : {}),
    });
    let kc: KubeConfig;
    let custom: CustomObjectsApi;
    const held: Array<{ namespace: string; name: string }> = [];
    beforeAll(() => {
      kc = suite.kc;
      custom = kc.makeApiClient(CustomObjectsApi);
    });
    /** Releases what the test held, so its namespace can go. */
    const release = async (): Promise<void> => {
      for (const h of held.splice(0)) {
        await custom
          .patchNamespacedCustomObject({ ...SANDBOXES, ...h, body: { metadata: { finalizers: null } } }, mergePatch)
          .catch((error: unknown) => {
            if (!isApiStatus(error, 404)) throw error;
          });
      }
    };

    const createExt = async (namespace: string, plural: string, body: Record<string, unknown>): Promise<Meta> =>
      ((await custom.createNamespacedCustomObject({ ...EXT, plural, namespace, body })) as { metadata: Meta }).metadata;

    /** A SandboxWarmPool (nothing reconciles it here: no Agent Sandbox controller runs). */
    const warmPool = (namespace: string, name: string): Promise<Meta> =>
      createExt(namespace, 'sandboxwarmpools', {
        apiVersion: `${EXT.group}/${EXT.version}`,
        kind: 'SandboxWarmPool',
        metadata: { name },
        spec: { replicas: 0, sandboxTemplateRef: { name: 'template' } },
      });
    const claim = (namespace: string, name: string, pool: string): Promise<Meta> =>
      createExt(namespace, 'sandboxclaims', {
        apiVersion: `${EXT.group}/${EXT.version}`,
        kind: 'SandboxClaim',
        metadata: { name },
        spec: { warmPoolRef: { name: pool } },
      });
    const controllerRef = (kind: string, owner: Meta) => ({
      apiVersion: `${EXT.group}/${EXT.version}`,
      kind,
      name: owner.name,
      uid: owner.uid,
      controller: true,
      blockOwnerDeletion: true,
    });

    /** A Sandbox as the pool controller makes it: controller-owned by the pool, labelled a warm-pool Sandbox; held. */
    const warmSandbox = async (namespace: string, name: string, pool: Meta, runtimeClass: string): Promise<Meta> => {
      const created = (await custom.createNamespacedCustomObject({
        ...SANDBOXES,
        namespace,
        body: {
          apiVersion: `${SANDBOXES.group}/${SANDBOXES.version}`,
          kind: 'Sandbox',
          metadata: {
            name,
            labels: { [WARM_POOL_LABEL]: 'pool-hash' },
            ownerReferences: [controllerRef('SandboxWarmPool', pool)],
            finalizers: [HOLD],
          },
          spec: {
            podTemplate: {
              spec: {
                runtimeClassName: runtimeClass,
                containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10' }],
              },
            },
          },
        },
      })) as { metadata: Meta };
      held.push({ namespace, name });
      return created.metadata;
    };
    const readSandbox = async (namespace: string, name: string): Promise<Meta | undefined> => {
      try {
        return ((await custom.getNamespacedCustomObject({ ...SANDBOXES, namespace, name })) as { metadata: Meta })
          .metadata;
      } catch (error) {
        if (isApiStatus(error, 404)) return undefined;
        throw error;
      }
    };

    /**
     * The claim controller's adoption write (completeAdoption): ownerReferences reset to the claim
     * as controller, the warm-pool label removed. `dryRun`: judged by the whole admission chain,
     * nothing stored.
     */
    const handOut = async (namespace: string, name: string, to: Meta, dryRun: boolean): Promise<Outcome> => {
      try {
        await custom.patchNamespacedCustomObject(
          {
            ...SANDBOXES,
            namespace,
            name,
            body: {
              metadata: { ownerReferences: [controllerRef('SandboxClaim', to)], labels: { [WARM_POOL_LABEL]: null } },
            },
            ...(dryRun ? { dryRun: 'All' } : {}),
          },
          mergePatch,
        );
        return { admitted: true };
      } catch (error) {
        if (isApiStatus(error, 403) || isApiStatus(error, 422)) {
          return { admitted: false, code: (error as { code: number }).code, message: statusMessage(error) };
        }
        throw error;
      }
    };
    /**
     * Dry runs until the hand-out is refused saying `wanted` (policies reach the admission chain
     * asynchronously); then the real one, which must be refused the same way.
     */
    const expectRefusedHandOut = async (namespace: string, name: string, to: Meta, wanted: string): Promise<string> => {
      await waitFor(
        `handing out Sandbox ${namespace}/${name} to be refused: ${wanted}`,
        async (observe) => {
          const outcome = await handOut(namespace, name, to, true);
          observe(outcome);
          return !outcome.admitted && outcome.message.includes(wanted);
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      const outcome = await handOut(namespace, name, to, false);
      if (outcome.admitted) throw new Error(`Sandbox ${namespace}/${name} was handed out`);
      expect(outcome.code).toBe(403);
      expect(outcome.message).toContain(wanted);
      return outcome.message;
    };
    /** Kubernetes' RFC 3339 form of a creationTimestamp (seconds, `Z`). */
    const rfc3339 = (at: Date): string => at.toISOString().replace(/\.\d{3}Z$/, 'Z');
    const classCreated = async (name: string): Promise<Date> => {
      const rc = await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name });
      const at = rc.metadata?.creationTimestamp;
      if (at === undefined) throw new Error(`RuntimeClass ${name} has no creationTimestamp`);
      return new Date(at);
    };
    /**
     * Until the API server's clock is past the second after `since`: creationTimestamps have second
     * granularity, so an object made now is dated strictly after `since` (a wait, not an assertion).
     */
    const afterSecondOf = async (since: Date): Promise<void> => {
      const due = since.getTime() + 1_100 - Date.now();
      if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
    };
    const ref = (namespace: string, name: string): SandboxRef => ({
      kind: 'Sandbox',
      version: 'v1beta1',
      namespace,
      name,
    });
    const handlerIs = (name: string, handler: string) =>
      waitFor(
        `RuntimeClass ${name} with handler ${handler}`,
        async () => (await kc.makeApiClient(NodeV1Api).readRuntimeClass({ name })).handler === handler,
        { timeoutMs: 30_000 },
      );

    test('a tightening re-creates the own class: its warm Sandbox from before is refused to a claim and deleted by the operator; one from after is handed out', async () => {
      const rcs = new RuntimeClasses(kc);
      try {
        const ns = await suite.tenantNamespace('kpi-handout-own');
        const instance = uniqueName('handout-own');
        const own = runtimeClassName(instance);
        // The platform's gVisor class: allowed at minimum runsc, not at kata (the probe of which policy is in force).
        const gvisor = await rcs.create(uniqueName('kpi-gvisor'), 'runsc');
        await createAgent(kc, ns, instance, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('runsc') });
        await handlerIs(own, 'runsc');
        await waitForAdmission(kc, ref(ns, 'probe'), gvisor, 'to be admitted under runsc', (a) => a.allowed);
        const pool = await warmPool(ns, 'pool');
        // Started under the runsc handler (after the class's second, so only the tightening makes it stale).
        await afterSecondOf(await classCreated(own));
        const stale = await warmSandbox(ns, 'warm-before', pool, own);

        // Raise the minimum: the own class is re-created with the kata handler; its NAME stays allowed.
        await patchAgent(kc, ns, instance, { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: annotation('kata') } });
        await handlerIs(own, 'kata');
        const since = await classCreated(own);
        expect(new Date(stale.creationTimestamp).getTime()).toBeLessThanOrEqual(since.getTime());
        await waitForAdmission(kc, ref(ns, 'probe'), gvisor, 'to be refused under kata', denied);
        await waitForAdmission(kc, ref(ns, 'probe'), own, 'to be admitted under kata', (a) => a.allowed);

        const taker = await claim(ns, 'claim-1', 'pool');
        const message = await expectRefusedHandOut(
          ns,
          'warm-before',
          taker,
          `Sandbox warm-before was created before RuntimeClass "${own}" got its current handler (${rfc3339(since)}), so it may run the old one; it is not handed out: delete it so that it is re-created`,
        );
        expect(message).toContain(
          `namespace "${ns}" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation)`,
        );

        // The operator deletes the stale warm Sandbox (held here by a finalizer, so it is still seen).
        const event = await waitForEvent(kc, ns, instance, 'StaleWarmSandboxDeleted', (m) => m.includes('warm-before'));
        expect(event.type).toBe('Normal');
        expect(event.message).toContain(own);
        expect((await readSandbox(ns, 'warm-before'))?.deletionTimestamp).toBeDefined();

        // A warm Sandbox made after the class got its handler runs it: handed out as before, and kept.
        await afterSecondOf(since);
        await warmSandbox(ns, 'warm-after', pool, own);
        expect(await handOut(ns, 'warm-after', taker, false)).toEqual({ admitted: true });
        expect((await readSandbox(ns, 'warm-after'))?.deletionTimestamp).toBeUndefined();
      } finally {
        await release();
        await rcs.deleteAll();
      }
    });

    test('a platform class deleted and re-created with a stronger handler: its warm Sandbox from before is refused and deleted; one from after is handed out', async () => {
      const rcs = new RuntimeClasses(kc);
      try {
        const ns = await suite.tenantNamespace('kpi-handout-plat');
        const instance = uniqueName('handout-plat');
        const platform = await rcs.create(uniqueName('kpi-platform'), 'runc');
        // At minimum runc any class is allowed: a warm Sandbox on the runc platform class.
        await createAgent(kc, ns, instance, { [SANDBOX_ISOLATION_ANNOTATION]: annotation('runc') });
        await handlerIs(runtimeClassName(instance), 'runc');
        await waitForAdmission(kc, ref(ns, 'probe'), undefined, 'to be refused (unset)', denied);
        const pool = await warmPool(ns, 'pool');
        await warmSandbox(ns, 'warm-before', pool, platform);
        await patchAgent(kc, ns, instance, { annotations: { [SANDBOX_ISOLATION_ANNOTATION]: annotation('runsc') } });
        await waitForAdmission(kc, ref(ns, 'probe'), platform, 'to be refused under runsc', denied);

        // The platform re-creates its class with a gVisor handler: its NAME is allowed again.
        await kc.makeApiClient(NodeV1Api).deleteRuntimeClass({ name: platform });
        await waitFor(
          `RuntimeClass ${platform} gone`,
          async () =>
            kc
              .makeApiClient(NodeV1Api)
              .readRuntimeClass({ name: platform })
              .then(
                () => false,
                (error: unknown) => isApiStatus(error, 404),
              ),
          { timeoutMs: 30_000 },
        );
        await kc
          .makeApiClient(NodeV1Api)
          .createRuntimeClass({ body: { metadata: { name: platform }, handler: 'runsc' } });
        const since = await classCreated(platform);
        await waitForAdmission(kc, ref(ns, 'probe'), platform, 'to be admitted again', (a) => a.allowed);

        const taker = await claim(ns, 'claim-1', 'pool');
        const message = await expectRefusedHandOut(
          ns,
          'warm-before',
          taker,
          `Sandbox warm-before was created before RuntimeClass "${platform}" got its current handler (${rfc3339(since)})`,
        );
        expect(message).toContain('requires sandbox runtime runsc or stronger');
        await waitForEvent(kc, ns, instance, 'StaleWarmSandboxDeleted', (m) => m.includes('warm-before'));
        expect((await readSandbox(ns, 'warm-before'))?.deletionTimestamp).toBeDefined();

        await afterSecondOf(since);
        await warmSandbox(ns, 'warm-after', pool, platform);
        expect(await handOut(ns, 'warm-after', taker, false)).toEqual({ admitted: true });
        // CREATE is judged as before: a new Sandbox on the class is admitted.
        expect((await createSandbox(kc, ref(ns, 'fresh'), platform)).allowed).toBe(true);
      } finally {
        await release();
        await rcs.deleteAll();
      }
    });
  },
);
