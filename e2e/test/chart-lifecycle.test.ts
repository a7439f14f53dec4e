/**
 * Day 2 of the chart on the real node, as an SRE and a platform team live it (issue: the chart's
 * life on a real cluster). One real node and one release, in order:
 *
 * - the chart of the previous version (PREVIOUS_VERSION, read from its git tag) is installed, then
 *   upgraded to this one while Pod CREATEs go on: every Pod admitted meanwhile carries the mandate,
 *   and the Helm-generated certificate is taken over by the operator with the same CA (caBundle
 *   unchanged);
 * - `helm upgrade --set webhook.replicas=3` changes the webhook Deployment only: the operator's
 *   Pods are the same Pods;
 * - a rolling upgrade of the webhook (a config change) under continuous Pod CREATEs: every Pod
 *   admitted during the roll carries the mandate (maxUnavailable 0, readiness that means synced,
 *   a shutdown that keeps serving until the endpoint is gone);
 * - deleting the leader operator Pod: the other replica takes the Lease and isolates a new
 *   instance within the lease duration plus a few seconds; no duplicate or orphan objects;
 * - deleting every webhook Pod at once while Pods are created: they are admitted unpatched (fail
 *   open, as designed), the operator's audit reports each (Warning Event on the instance, the
 *   kubeplus_operator_unisolated_pods gauge, one result each in the namespace's OpenReports
 *   Report: the cluster had no OpenReports CRDs, the chart installs them with
 *   operator.reports.installCrds), and once the webhook is back new Pods are patched;
 * - `helm test` passes, run by a cluster-admin user not in system:masters (issue 39): its Pod's
 *   dry-run Pod in a throw-away isolated namespace carries the mandate;
 * - `helm uninstall`: the pre-delete hook stops the operator and removes what it generated (the
 *   Reports included) and the finalizer releases up to 0.2.0 added (put back here while the
 *   operator is stopped, as an upgrade from 0.2.0 can leave it); afterwards instances delete at
 *   once and no generated object remains; installed again with uninstall.keepGeneratedObjects=true,
 *   a hook that fails (its RBAC broken) fails `helm uninstall` visibly (its Job's log says why) and
 *   succeeds once fixed and run again; the generated objects stay and the finalizer goes;
 * - what keepGeneratedObjects=true keeps and what stops (the chart README's "Uninstall"): the
 *   sandbox policies go on refusing, the namespaces stay labeled, but the webhook configuration
 *   and the NodeIsolation CRD (with its objects) go, so a Pod is admitted unplaced; installed
 *   again under a stream of stored Pod CREATEs, every Pod of the still-labeled namespace admitted
 *   without its placement (the gap's and the re-install's) is in its Report and the
 *   PodsNotIsolated Event.
 *
 * Pod CREATEs under load are server-side dry runs (admission runs in full, nothing is stored),
 * except during the outage, where the audit needs stored Pods.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  getSecureMetrics,
  installSandboxCrds,
  parsePrometheusText,
  type RealNodeCluster,
  repoRoot,
  sumMetric,
  waitFor,
} from '@kubeplus-isolation/e2e';
import {
  FINALIZER,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  NodeV1Api,
  RbacAuthorizationV1Api,
  type V1Pod,
} from '@kubernetes/client-node';
import { createAgent } from './support/operator.js';
import { createSandbox } from './support/operator-sandbox.js';
import {
  admitDryRunWhile,
  CHART,
  carriesPoolMandate,
  cloudAdminHelmArgs,
  helm,
  INSTANCE_GROUP_VALUES,
  isolateTenant,
  kubectl,
  PLATFORM_NS,
  poolMandate,
  prepareChartNode,
  RELEASE_NS,
  releaseMetricsToken,
  startProjectNode,
  tenantPod,
} from './support/real-node.js';

const run = promisify(execFile);
/**
 * The release before this one (CHANGELOG.md), whose chart the upgrade starts from, read from its git
 * tag (`git clone` brings tags; main when the real-node work began). On a release, move it to the
 * version released before and revisit the steps below that depend on what that chart did (its
 * Helm-generated certificate, its plain-HTTP probes).
 */
const PREVIOUS_VERSION = '0.1.0';
const PREVIOUS_TAG = `v${PREVIOUS_VERSION}`;
/**
 * The commit PREVIOUS_TAG names, recorded here too: a CI checkout may fetch no tags (a shallow or
 * tagless clone), and the commit is in every clone's history. Where the tag exists it must name this
 * commit (a moved tag fails the run rather than testing another chart).
 */
const PREVIOUS_COMMIT = 'be69b2613ff791ac296c28246da4af1efc690764';

/** The previous release's commit: from its tag when the clone has tags, else the recorded one. */
async function previousReleaseCommit(): Promise<string> {
  const tagged = await run('git', [
    '-C',
    repoRoot(),
    'rev-parse',
    '--verify',
    '--quiet',
    `${PREVIOUS_TAG}^{commit}`,
  ]).then(
    (r) => r.stdout.trim(),
    () => '',
  );
  if (tagged !== '' && tagged !== PREVIOUS_COMMIT) {
    throw new Error(`git tag ${PREVIOUS_TAG} names ${tagged}, not the recorded release commit ${PREVIOUS_COMMIT}`);
  }
  await run('git', ['-C', repoRoot(), 'cat-file', '-e', `${PREVIOUS_COMMIT}^{commit}`]).catch(() => {
    throw new Error(
      `the previous release's commit ${PREVIOUS_COMMIT} (${PREVIOUS_TAG}) is not in this clone: a shallow clone needs \`git fetch --unshallow\``,
    );
  });
  return PREVIOUS_COMMIT;
}
const RELEASE = 'kpi';
const POOL = 'team-a-pool';
const MANDATE = poolMandate(POOL);
/** The operator's leader-election lease duration (the chart's default). */
const LEASE_DURATION_S = 15;
const VALUES = [
  ...INSTANCE_GROUP_VALUES,
  // The fail-open audit every 5 s instead of 5 min, so the outage test sees its report soon.
  '--set',
  'operator.extraArgs[0]=--audit-interval=5s',
];

/** This checkout's chart: VALUES, and the OpenReports CRDs from the chart (the cluster has none). */
const THIS_CHART = [...VALUES, '--set', 'operator.reports.installCrds=true'];
const OPENREPORTS_CRDS = ['reports.openreports.io', 'clusterreports.openreports.io'];

const carriesMandate = (pod: V1Pod): boolean => carriesPoolMandate(POOL, pod);

const podBody = (name: string, parked = false): V1Pod => tenantPod(name, { parked });

describe('the chart over its life on a real node', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let previousChartDir: string;
  const tenant = 'team-a';

  const helmNs = (...args: string[]): Promise<string> => helm(cluster, '--namespace', RELEASE_NS, ...args);

  const admitWhile = (done: () => boolean) => admitDryRunWhile(cluster.cp.kc, tenant, POOL, done);

  const podsOf = async (component: 'webhook' | 'operator'): Promise<V1Pod[]> =>
    (await core.listNamespacedPod({ namespace: RELEASE_NS, labelSelector: `app.kubernetes.io/name=${component}` }))
      .items;

  const leaseHolder = async (): Promise<string> =>
    (
      await cluster.cp.kc
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ name: `${RELEASE}-operator`, namespace: RELEASE_NS })
    ).spec?.holderIdentity ?? '';

  beforeAll(async () => {
    const previousCommit = await previousReleaseCommit();
    // The previous release's own images, as its chart names them (its repository and version),
    // built once per commit into the cache (e2e/scripts/build-previous-images.sh).
    const previousImages = (
      await run(join(repoRoot(), 'e2e', 'scripts', 'build-previous-images.sh'), [previousCommit], {
        maxBuffer: 64 << 20,
      })
    ).stdout
      .trim()
      .split('\n')
      .at(-1) as string;
    cluster = await startProjectNode(['webhook', 'operator'].map((s) => join(previousImages, `${s}.tar`)));
    // Inside the run's own directory: removed when the cluster stops, and by the next run's sweep
    // when this one is killed (a directory of its own under /tmp outlived a killed run).
    previousChartDir = mkdtempSync(join(cluster.cp.dir, 'previous-chart-'));
    const { stdout } = await run(
      'git',
      ['-C', repoRoot(), 'archive', '--format=tar', previousCommit, 'deploy/kubeplus-isolation'],
      {
        encoding: 'buffer',
        maxBuffer: 64 << 20,
      },
    );
    await new Promise<void>((resolve, reject) => {
      const tar = execFile('tar', ['-x', '-C', previousChartDir], (error) => (error ? reject(error) : resolve()));
      tar.stdin?.end(stdout);
    });
    // The tag names that version's chart.
    expect(readFileSync(join(previousChartDir, 'deploy', 'kubeplus-isolation', 'Chart.yaml'), 'utf8')).toMatch(
      new RegExp(`^version: ${PREVIOUS_VERSION.replace(/\./g, '\\.')}$`, 'm'),
    );
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    apps = cluster.cp.kc.makeApiClient(AppsV1Api);
    await prepareChartNode(cluster, { pool: POOL });
    // No OpenReports CRDs: this chart installs them (operator.reports.installCrds, THIS_CHART), so
    // the Reports below prove that a fresh cluster with the value on gets Reports (issue 39).
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test(`the previous release's chart (${PREVIOUS_VERSION}, git tag ${PREVIOUS_TAG}) upgrades to this one without an admission gap`, async () => {
    await helmNs(
      'install',
      RELEASE,
      join(previousChartDir, 'deploy', 'kubeplus-isolation'),
      ...VALUES,
      // The previous release runs its own images (built from its commit; the node has both sets).
      '--wait',
      '--timeout',
      '180s',
    );
    await isolateTenant(cluster, tenant, MANDATE);
    // The previous chart generated the certificate with Helm; this one's default has the operator
    // keep it, seeded from the Helm-generated Secret so the CA and caBundle do not change.
    const admission = cluster.cp.kc.makeApiClient(AdmissionregistrationV1Api);
    const caBundle = async (): Promise<string | undefined> =>
      (await admission.readMutatingWebhookConfiguration({ name: `${RELEASE}-webhook` })).webhooks?.[0]?.clientConfig
        ?.caBundle;
    const bundleBefore = await caBundle();
    const helmSecret = await core.readNamespacedSecret({ name: `${RELEASE}-webhook-tls`, namespace: RELEASE_NS });
    let upgraded = false;
    const upgrade = helmNs('upgrade', RELEASE, CHART, ...THIS_CHART, '--wait', '--timeout', '180s').finally(() => {
      upgraded = true;
    });
    const load = await admitWhile(() => upgraded);
    await upgrade;
    process.stderr.write(
      `[lifecycle] chart upgrade: ${load.admitted} Pods admitted during it, ${load.unpatched.length} without the mandate\n`,
    );
    expect(load.admitted).toBeGreaterThan(0);
    expect(load.unpatched).toEqual([]);
    // The OpenReports CRDs came with this chart, kept on uninstall (every tool's Reports live in them).
    for (const crd of OPENREPORTS_CRDS) {
      expect(
        await kubectl(cluster, 'get', 'crd', crd, '-o', 'jsonpath={.metadata.annotations.helm\\.sh/resource-policy}'),
      ).toBe('keep');
    }
    const history = await helmNs('history', RELEASE, '--max', '2');
    expect(history).toMatch(new RegExp(`superseded\\s+kubeplus-isolation-${PREVIOUS_VERSION}\\s`));
    expect(history).toMatch(
      new RegExp(`deployed\\s+kubeplus-isolation-${readFileSync(join(repoRoot(), 'VERSION'), 'utf8').trim()}\\s`),
    );
    const certs = await core.readNamespacedSecret({ name: `${RELEASE}-webhook-certs`, namespace: RELEASE_NS });
    expect(certs.data?.['ca.crt']).toBe(helmSecret.data?.['ca.crt']);
    expect(certs.data?.['ca.key']).toBe(helmSecret.data?.['ca.key']);
    expect(await caBundle()).toBe(bundleBefore);
    await expect(core.readNamespacedSecret({ name: `${RELEASE}-webhook-tls`, namespace: RELEASE_NS })).rejects.toThrow(
      /404|not found/i,
    );
  });

  test('helm upgrade --set webhook.replicas=3 scales the webhook only; the operator Pods and certificates stay', async () => {
    // The live operator Pods: the previous upgrade's --wait returns while an old one may still be terminating.
    const liveOperatorPods = async (): Promise<(string | undefined)[]> =>
      (await podsOf('operator'))
        .filter((p) => !p.metadata?.deletionTimestamp)
        .map((p) => p.metadata?.uid)
        .sort();
    const operatorBefore = await liveOperatorPods();
    const operatorGeneration = (
      await apps.readNamespacedDeployment({ name: `${RELEASE}-operator`, namespace: RELEASE_NS })
    ).metadata?.generation;
    // What the operator wrote (the certificates, the caBundle) is rendered back unchanged.
    const certificates = async (): Promise<unknown> => [
      (await core.readNamespacedSecret({ name: `${RELEASE}-webhook-certs`, namespace: RELEASE_NS })).data,
      (
        await cluster.cp.kc
          .makeApiClient(AdmissionregistrationV1Api)
          .readMutatingWebhookConfiguration({ name: `${RELEASE}-webhook` })
      ).webhooks?.map((w) => w.clientConfig.caBundle),
    ];
    const certificatesBefore = await certificates();
    await helmNs(
      'upgrade',
      RELEASE,
      CHART,
      '--reuse-values',
      '--set',
      'webhook.replicas=3',
      '--wait',
      '--timeout',
      '180s',
    );
    expect(await certificates()).toEqual(certificatesBefore);
    const webhook = await apps.readNamespacedDeployment({ name: `${RELEASE}-webhook`, namespace: RELEASE_NS });
    expect(webhook.status?.readyReplicas).toBe(3);
    const operator = await apps.readNamespacedDeployment({ name: `${RELEASE}-operator`, namespace: RELEASE_NS });
    expect(operator.metadata?.generation).toBe(operatorGeneration);
    expect(await liveOperatorPods()).toEqual(operatorBefore);
    process.stderr.write(`[lifecycle] ${await kubectl(cluster, 'get', 'deploy', '-n', RELEASE_NS)}\n`);
  });

  test('a rolling upgrade of the webhook under continuous Pod CREATEs admits every Pod with the mandate', async () => {
    const before = (await podsOf('webhook')).map((p) => p.metadata?.name).sort();
    let rolled = false;
    const roll = helmNs(
      'upgrade',
      RELEASE,
      CHART,
      '--reuse-values',
      '--set',
      'webhook.logLevel=debug',
      '--wait',
      '--timeout',
      '180s',
    ).finally(() => {
      rolled = true;
    });
    const load = await admitWhile(() => rolled);
    await roll;
    // --wait returns once the new ReplicaSet is available; the old Pods may still be draining.
    const after = await waitFor(
      'only new webhook Pods left',
      async () => {
        const pods = (await podsOf('webhook')).filter((p) => !p.metadata?.deletionTimestamp);
        return pods.length === 3 && pods.every((p) => !before.includes(p.metadata?.name)) ? pods : undefined;
      },
      { timeoutMs: 60_000 },
    );
    process.stderr.write(
      `[lifecycle] webhook roll: ${load.admitted} Pods admitted during it, ${load.unpatched.length} without the mandate\n`,
    );
    expect(after).toHaveLength(3);
    expect(load.admitted).toBeGreaterThan(0);
    expect(load.unpatched).toEqual([]);
  });

  test('deleting the leader operator Pod: the other replica takes the Lease and isolates a new instance in time', async () => {
    const holder = await leaseHolder();
    const leader = (await podsOf('operator')).find((p) => holder.startsWith(p.metadata?.name ?? '\0'));
    expect(leader).toBeDefined();
    const started = performance.now();
    await core.deleteNamespacedPod({ name: leader?.metadata?.name ?? '', namespace: RELEASE_NS });
    // The old leader drains (and may still reconcile) until it releases the Lease on its way
    // out: the instance is created once another replica holds it (the standby, or the Pod that
    // replaces the deleted one, whichever acquires first), so the new leader isolates it.
    const newHolder = await waitFor(
      'another replica to take the Lease',
      async (observe) => {
        const h = await leaseHolder();
        observe(h);
        return h !== '' && !h.startsWith(leader?.metadata?.name ?? '\0') ? h : undefined;
      },
      { timeoutMs: (LEASE_DURATION_S + 30) * 1000, intervalMs: 100 },
    );
    const instance = 'team-c';
    await createAgent(cluster.cp.kc, PLATFORM_NS, instance, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
    });
    await waitFor(
      `namespace ${instance} isolated by the new leader`,
      async () =>
        (await core.readNamespace({ name: instance }).catch(() => undefined))?.metadata?.labels?.[
          NODE_ISOLATION_ENABLED_LABEL
        ] === 'true' || undefined,
      { timeoutMs: (LEASE_DURATION_S + 30) * 1000 },
    );
    const seconds = (performance.now() - started) / 1000;
    process.stderr.write(
      `[lifecycle] failover: another replica held the Lease and isolated a new instance ${seconds.toFixed(1)} s after the leader Pod was deleted (lease ${LEASE_DURATION_S} s)\n`,
    );
    expect(newHolder).not.toBe(holder);
    expect(seconds).toBeLessThan(LEASE_DURATION_S + 5);
    const classes = (await cluster.cp.kc.makeApiClient(NodeV1Api).listRuntimeClass()).items.filter((rc) =>
      rc.metadata?.name?.startsWith('kubeplus-sandbox-'),
    );
    expect(classes.map((rc) => rc.metadata?.name).sort()).toEqual([`kubeplus-sandbox-${instance}`]);
  });

  /** The namespace's compliance Report (OpenReports), if there is one. */
  const readReport = async (
    namespace: string,
  ): Promise<
    | {
        summary?: { fail?: number };
        results?: Array<{ policy: string; result: string; resources?: Array<{ name: string }> }>;
      }
    | undefined
  > => {
    const text = await kubectl(
      cluster,
      'get',
      'reports.openreports.io',
      'kubeplus-isolation',
      '-n',
      namespace,
      '-o',
      'json',
    ).catch(() => '');
    return text ? JSON.parse(text) : undefined;
  };

  test('every webhook Pod deleted at once: Pods are admitted unpatched and audited; once back, Pods are patched', async () => {
    // Every webhook Pod: those of an earlier rollout still terminating may vanish before their
    // DELETE arrives (a 404 here failed CI once): gone is what the DELETE asks for.
    const webhookPods = (await podsOf('webhook')).map((p) => p.metadata?.name ?? '');
    await Promise.all(
      webhookPods.map((name) =>
        core.deleteNamespacedPod({ name, namespace: RELEASE_NS, gracePeriodSeconds: 0 }).catch((e: unknown) => {
          if ((e as { code?: number }).code !== 404) throw e;
        }),
      ),
    );
    const created: V1Pod[] = [];
    let back = false;
    // Until the webhook is back and the last three Pods were patched (the recovery itself may
    // still admit one unpatched while replicas come up).
    const lastThreePatched = (): boolean => created.length >= 3 && created.slice(-3).every(carriesMandate);
    for (let i = 0; created.length < 200 && !(back && lastThreePatched()); i++) {
      created.push(await core.createNamespacedPod({ namespace: tenant, body: podBody(`outage-${i}`, true) }));
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (!back) {
        back =
          (await apps.readNamespacedDeployment({ name: `${RELEASE}-webhook`, namespace: RELEASE_NS })).status
            ?.readyReplicas === 3;
      }
    }
    const unpatched = created.filter((p) => !carriesMandate(p)).map((p) => p.metadata?.name ?? '');
    const patchedAfter = created.slice(created.findLastIndex((p) => !carriesMandate(p)) + 1);
    process.stderr.write(
      `[lifecycle] outage: ${created.length} Pods created, ${unpatched.length} admitted unpatched, then ${patchedAfter.length} patched\n`,
    );
    expect(unpatched.length).toBeGreaterThan(0);
    expect(patchedAfter.length).toBeGreaterThanOrEqual(3);
    expect(patchedAfter.every(carriesMandate)).toBe(true);

    // The audit (every 5 s here) reports them: the leader's gauge and a Warning on the instance.
    const token = await releaseMetricsToken(cluster, RELEASE);
    const gauge = async (): Promise<number> => {
      let total = 0;
      for (const pod of await podsOf('operator')) {
        // The chart's secure metrics, read as Prometheus reads them.
        const { text } = await getSecureMetrics(pod.status?.podIP ?? '', 8080, token).catch(() => ({ text: '' }));
        total += sumMetric(parsePrometheusText(text), 'kubeplus_operator_unisolated_pods');
      }
      return total;
    };
    await waitFor(
      'the audit to count every unpatched Pod',
      async (observe) => {
        const n = await gauge();
        observe(n);
        return n === unpatched.length || undefined;
      },
      { timeoutMs: 60_000 },
    );
    const event = await waitFor(
      `a PodsNotIsolated Event on the instance counting ${unpatched.length} Pods`,
      async () =>
        (
          await core.listNamespacedEvent({ namespace: PLATFORM_NS, fieldSelector: 'reason=PodsNotIsolated' })
        ).items.find((e) => e.involvedObject.name === tenant && e.message?.startsWith(`${unpatched.length} Pod`)),
      { timeoutMs: 60_000 },
    );
    expect(event.type).toBe('Warning');
    process.stderr.write(
      `[lifecycle] ${await kubectl(cluster, 'get', 'events', '-n', PLATFORM_NS, '--field-selector', 'reason=PodsNotIsolated')}\n`,
    );
    // And the compliance Report of the tenant namespace lists each of them (OpenReports format).
    const report = await waitFor(
      `the Report of ${tenant} failing ${unpatched.length} Pods`,
      async (observe) => {
        const r = await readReport(tenant);
        observe(r?.summary);
        return r?.summary?.fail === unpatched.length ? r : undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(new Set(report.results?.map((r) => `${r.policy}/${r.result}`))).toEqual(new Set(['node-isolation/fail']));
    expect(report.results?.flatMap((r) => r.resources?.map((x) => x.name) ?? []).sort()).toEqual([...unpatched].sort());
    process.stderr.write(`[lifecycle] ${await kubectl(cluster, 'get', 'reports', '-A')}\n`);
  });

  test('helm test passes as a cluster-admin user not in system:masters: the test Pod sees a dry-run Pod admitted with the mandate, and cleans up', async () => {
    // Issue 39: run as a cloud admin (bound to cluster-admin, not in system:masters), whose hook
    // writes (an isolated namespace, its NodeIsolation) the tamper guard must let through.
    const asCloudAdmin = await cloudAdminHelmArgs(cluster);
    // No --logs: a passing test's Pod is deleted at once (hook-succeeded); a failing one stays.
    const out = await helmNs('test', RELEASE, '--timeout', '180s', ...asCloudAdmin).catch(async (error: Error) => {
      const log = await kubectl(cluster, 'logs', '-n', RELEASE_NS, 'kpi-kubeplus-isolation-helm-test').catch(String);
      throw new Error(`${error.message}\nthe test Pod's log:\n${log}`);
    });
    process.stderr.write(`[lifecycle] ${out}\n`);
    expect(out).toMatch(/Phase:\s+Succeeded/);
    expect(out).toMatch(/TEST SUITE:\s+kpi-kubeplus-isolation-helm-test/);
    // hook-succeeded: the throw-away namespace is deleted (the namespace controller finalizes it).
    await waitFor(
      'the helm test namespace to go',
      async () => {
        const ns = await core.readNamespace({ name: 'kpi-kubeplus-isolation-helm-test' }).catch(() => undefined);
        return ns === undefined || ns.metadata?.deletionTimestamp !== undefined || undefined;
      },
      { timeoutMs: 60_000 },
    );
  });

  const generated = async (): Promise<string[]> => {
    const selector = 'app.kubernetes.io/managed-by=kubeplus-isolation';
    const rcs = (await cluster.cp.kc.makeApiClient(NodeV1Api).listRuntimeClass({ labelSelector: selector })).items;
    const vaps = JSON.parse(
      await kubectl(
        cluster,
        'get',
        'validatingadmissionpolicies,validatingadmissionpolicybindings,reports.openreports.io',
        '--all-namespaces',
        '-l',
        selector,
        '-o',
        'json',
      ),
    ) as { items: { kind: string; metadata: { name: string; namespace?: string } }[] };
    return [
      ...rcs.map((rc) => `RuntimeClass/${rc.metadata?.name}`),
      ...vaps.items.map((o) => `${o.kind}/${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`),
    ].sort();
  };
  const agentFinalizers = async (name: string): Promise<string[]> =>
    (
      JSON.parse(await kubectl(cluster, 'get', 'agent', name, '-n', PLATFORM_NS, '-o', 'json')) as {
        metadata: { finalizers?: string[] };
      }
    ).metadata.finalizers ?? [];

  /**
   * An instance as an upgrade from 0.2.0 can leave it: the operator stopped (it would take the
   * finalizer off at once; it never adds one), then the finalizer of releases up to 0.2.0 put on.
   */
  const legacyFinalizerWhileStopped = async (name: string): Promise<void> => {
    await kubectl(cluster, 'scale', 'deployment', `${RELEASE}-operator`, '-n', RELEASE_NS, '--replicas=0');
    await waitFor(
      'the operator Deployment to have no Pods',
      async (observe) => {
        const d = await apps.readNamespacedDeployment({ name: `${RELEASE}-operator`, namespace: RELEASE_NS });
        observe(d.status);
        return (d.status?.replicas ?? 0) === 0;
      },
      { timeoutMs: 60_000 },
    );
    expect(await agentFinalizers(name)).toEqual([]);
    await kubectl(
      cluster,
      'patch',
      'agent',
      name,
      '-n',
      PLATFORM_NS,
      '--type=merge',
      '-p',
      JSON.stringify({ metadata: { finalizers: [FINALIZER] } }),
    );
  };

  test('helm uninstall: the pre-delete hook removes what the operator generated and the legacy finalizer', async () => {
    expect(await generated()).toEqual(expect.arrayContaining(['RuntimeClass/kubeplus-sandbox-team-c']));
    await legacyFinalizerWhileStopped('team-a');
    expect(await agentFinalizers('team-a')).toContain(FINALIZER);
    const out = await helmNs('uninstall', RELEASE, '--wait', '--timeout', '180s').catch(async (error: Error) => {
      const log = await kubectl(cluster, 'logs', '-n', RELEASE_NS, `job/${RELEASE}-operator-uninstall`).catch(String);
      throw new Error(`${error.message}\nthe hook Job's log:\n${log}`);
    });
    process.stderr.write(`[lifecycle] ${out}\n`);
    expect(await generated()).toEqual([]);
    for (const ns of [tenant, 'team-c']) {
      const n = await core.readNamespace({ name: ns });
      expect({
        ns,
        labels: n.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL],
        deleting: n.metadata?.deletionTimestamp,
      }).toEqual({
        ns,
        labels: undefined,
        deleting: undefined,
      });
      expect(Object.keys(n.metadata?.annotations ?? {}).filter((k) => k.startsWith('kubeplus.io/'))).toEqual([]);
    }
    expect(await agentFinalizers('team-a')).toEqual([]);
    expect(await agentFinalizers('team-c')).toEqual([]);
    // With no operator left, deleting an instance completes at once.
    await kubectl(cluster, 'delete', 'agent', 'team-c', '-n', PLATFORM_NS, '--timeout=20s');
    // Nothing of the release or its hooks is left in its namespace (Pods go with their owners).
    await waitFor(
      `nothing left in ${RELEASE_NS}`,
      async (observe) => {
        const left = (
          await kubectl(cluster, 'get', 'jobs,pods,roles,deployments', '-n', RELEASE_NS, '-o', 'name')
        ).trim();
        observe(left);
        return left === '' || undefined;
      },
      { timeoutMs: 60_000 },
    );
  });

  test('a failing hook is visible and retryable; keepGeneratedObjects=true keeps the generated objects and removes the legacy finalizer', async () => {
    // `helm uninstall` kept the OpenReports CRDs (helm.sh/resource-policy: keep); installed again,
    // the release takes them back.
    for (const crd of OPENREPORTS_CRDS) expect(await kubectl(cluster, 'get', 'crd', crd, '-o', 'name')).toContain(crd);
    await helmNs(
      'install',
      RELEASE,
      CHART,
      ...THIS_CHART,
      '--set',
      'operator.uninstall.keepGeneratedObjects=true',
      '--set',
      'operator.uninstall.backoffLimit=0',
      '--wait',
      '--timeout',
      '180s',
    );
    await createAgent(cluster.cp.kc, PLATFORM_NS, 'team-d', {
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
    });
    await waitFor(
      "the operator to generate team-d's RuntimeClass",
      async () => (await generated()).includes('RuntimeClass/kubeplus-sandbox-team-d') || undefined,
      { timeoutMs: 60_000 },
    );
    await legacyFinalizerWhileStopped('team-d');
    const before = await generated();

    // Break the hook: without its instance RBAC the operator's account cannot list Agents.
    const rbac = cluster.cp.kc.makeApiClient(RbacAuthorizationV1Api);
    const binding = await rbac.readClusterRoleBinding({ name: `${RELEASE}-operator-instances` });
    await rbac.deleteClusterRoleBinding({ name: `${RELEASE}-operator-instances` });
    const failed = await helmNs('uninstall', RELEASE, '--wait', '--timeout', '120s').then(
      () => 'succeeded',
      (error: Error) => error.message,
    );
    expect(failed).toContain(`job ${RELEASE}-operator-uninstall failed: BackoffLimitExceeded`);
    const jobLog = await kubectl(cluster, 'logs', '-n', RELEASE_NS, `job/${RELEASE}-operator-uninstall`);
    process.stderr.write(`[lifecycle] the failed hook's log:\n${jobLog}\n`);
    expect(jobLog).toMatch(/forbidden/i);
    expect(await agentFinalizers('team-d')).toContain(FINALIZER);

    // Fix the cause and run it again.
    await rbac.createClusterRoleBinding({
      body: { ...binding, metadata: { name: binding.metadata?.name, labels: binding.metadata?.labels } },
    });
    await helmNs('uninstall', RELEASE, '--wait', '--timeout', '180s');
    expect(await generated()).toEqual(before);
    expect(await agentFinalizers('team-d')).toEqual([]);
    await kubectl(cluster, 'delete', 'agent', 'team-d', '-n', PLATFORM_NS, '--timeout=20s');
  });

  test('keepGeneratedObjects=true: the sandbox policies stay, node isolation stops; a re-install admits no Pod of a still-labeled namespace unreported', async () => {
    const kept = 'team-k';
    // The Agent Sandbox CRDs, so the kept sandbox policy has something to judge.
    await installSandboxCrds(cluster.cp.kc);
    const values = [...THIS_CHART, '--set', 'global.nodeIsolation.engine=both'];
    const crds = async (): Promise<string> =>
      kubectl(cluster, 'get', 'crd', 'nodeisolations.isolation.kubeplus.io', '-o', 'name').catch(() => '');
    await helmNs(
      'install',
      RELEASE,
      CHART,
      ...values,
      '--set',
      'operator.uninstall.keepGeneratedObjects=true',
      '--wait',
      '--timeout',
      '180s',
    );
    await createAgent(cluster.cp.kc, PLATFORM_NS, kept, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
    });
    await waitFor(
      `the operator to isolate ${kept}: label, RuntimeClass, policy, NodeIsolation parameter`,
      async (observe) => {
        const ns = await core.readNamespace({ name: kept }).catch(() => undefined);
        const param = await kubectl(cluster, 'get', 'nodeisolations', '-n', kept, '-o', 'name').catch(() => '');
        const objects = await generated();
        observe({ label: ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL], param, objects });
        return (
          (ns?.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
            param.trim() === 'nodeisolation.isolation.kubeplus.io/node-isolation' &&
            objects.includes(`RuntimeClass/kubeplus-sandbox-${kept}`) &&
            objects.some((o) => o.startsWith('ValidatingAdmissionPolicyBinding/'))) ||
          undefined
        );
      },
      { timeoutMs: 60_000 },
    );
    await waitFor(
      'ServiceAccount default in the tenant namespace',
      () => core.readNamespacedServiceAccount({ name: 'default', namespace: kept }),
      { timeoutMs: 30_000 },
    );
    // Reports are left out: the audit may still write one before the hook stops the operator.
    const generatedButReports = async (): Promise<string[]> =>
      (await generated()).filter((o) => !o.startsWith('Report/'));
    const before = await generatedButReports();
    expect(
      carriesMandate(await core.createNamespacedPod({ namespace: kept, body: podBody('before'), dryRun: 'All' })),
    ).toBe(true);

    await helmNs('uninstall', RELEASE, '--wait', '--timeout', '180s');
    // What stays: the generated objects, the namespace's label and resolved annotation.
    expect(await generatedButReports()).toEqual(before);
    const ns = await core.readNamespace({ name: kept });
    expect(ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
    expect(ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]).toBeDefined();
    expect(await agentFinalizers(kept)).toEqual([]);
    // What stops: the webhook configuration and the policy engine (its CRD, so every NodeIsolation).
    const adm = cluster.cp.kc.makeApiClient(AdmissionregistrationV1Api);
    expect((await adm.listMutatingWebhookConfiguration()).items.map((m) => m.metadata?.name)).not.toContain(
      `${RELEASE}-webhook`,
    );
    expect((await adm.listMutatingAdmissionPolicy()).items.map((m) => m.metadata?.name)).toEqual([]);
    await waitFor('the NodeIsolation CRD to be gone', async () => (await crds()) === '' || undefined, {
      timeoutMs: 60_000,
    });
    // So a Pod of the still-labeled namespace is admitted without its placement, and nothing counts it yet.
    const gap = await core.createNamespacedPod({ namespace: kept, body: podBody('gap', true) });
    expect(carriesMandate(gap)).toBe(false);
    // Sandbox isolation goes on: the kept policy still refuses a Sandbox without a runtime class.
    const sandbox = await createSandbox(
      cluster.cp.kc,
      { kind: 'Sandbox', version: 'v1beta1', namespace: kept, name: 'weak' },
      undefined,
      { dryRun: true },
    );
    process.stderr.write(`[lifecycle] a Sandbox after the uninstall: ${JSON.stringify(sandbox)}\n`);
    expect(sandbox.allowed).toBe(false);
    expect(sandbox.allowed ? '' : sandbox.message).toContain('ValidatingAdmissionPolicy');

    // Re-install under a stream of stored Pod CREATEs in the still-labeled namespace.
    let installing = true;
    const created: V1Pod[] = [];
    const stream = (async () => {
      for (let i = 0; installing && created.length < 150; i++) {
        created.push(await core.createNamespacedPod({ namespace: kept, body: podBody(`reinstall-${i}`, true) }));
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    try {
      await helmNs('install', RELEASE, CHART, ...values, '--wait', '--timeout', '180s');
    } finally {
      installing = false;
      await stream;
    }
    const unplaced = [gap, ...created].filter((p) => !carriesMandate(p)).map((p) => p.metadata?.name ?? '');
    process.stderr.write(
      `[lifecycle] re-install: ${created.length} Pods created while installing, ${unplaced.length - 1} of them (and the gap Pod) admitted without the mandate\n`,
    );
    // Every Pod admitted without the mandate is counted and reported by the re-installed operator.
    const report = await waitFor(
      `the Report of ${kept} failing exactly the ${unplaced.length} unplaced Pods`,
      async (observe) => {
        const r = await readReport(kept);
        const names = (r?.results ?? []).flatMap((x) => x.resources?.map((res) => res.name) ?? []).sort();
        observe({ summary: r?.summary, names });
        return JSON.stringify(names) === JSON.stringify([...unplaced].sort()) ? r : undefined;
      },
      { timeoutMs: 90_000 },
    );
    expect(new Set(report.results?.map((r) => `${r.policy}/${r.result}`))).toEqual(new Set(['node-isolation/fail']));
    await waitFor(
      `a PodsNotIsolated Event on ${kept} counting ${unplaced.length} Pods`,
      async () =>
        (
          await core.listNamespacedEvent({ namespace: PLATFORM_NS, fieldSelector: 'reason=PodsNotIsolated' })
        ).items.find((e) => e.involvedObject.name === kept && e.message?.startsWith(`${unplaced.length} Pod`)),
      { timeoutMs: 60_000 },
    );
    // And once installed, the namespace's Pods get the mandate again, the parameter is back.
    expect(
      carriesMandate(await core.createNamespacedPod({ namespace: kept, body: podBody('after'), dryRun: 'All' })),
    ).toBe(true);
    await waitFor(
      'the NodeIsolation parameter written again',
      async () =>
        (await kubectl(cluster, 'get', 'nodeisolations', '-n', kept, '-o', 'name').catch(() => '')).trim() || undefined,
      { timeoutMs: 30_000 },
    );
  });
});
