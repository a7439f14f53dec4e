/**
 * The umbrella chart (deploy/kubeplus-isolation) installed with `helm` on the real control plane:
 *
 * - its workload Pods are admitted in a namespace enforcing the restricted Pod Security Standard;
 * - the webhook process runs as the chart's own ServiceAccount (TokenRequest), with the chart's
 *   RBAC and the chart-generated serving certificate, behind the chart's
 *   MutatingWebhookConfiguration (clientConfig.url points at the local process), and mutates Pods;
 * - the operator's ServiceAccount holds exactly the access the chart's RBAC describes;
 * - the tamper guard denies a tenant (a real client-certificate user) every change of isolation
 *   state, while the operator's own token, admins and ordinary namespace edits get through, and
 *   the operator itself is confined; a cloud admin (bound to cluster-admin by a ClusterRoleBinding,
 *   not in system:masters) repairs a namespace and writes the helm test hook's objects, a group
 *   given the chart's tamper-override ClusterRole does too, and a tenant bound to cluster-admin by a
 *   RoleBinding in its own namespace is still refused (issue 39);
 * - with global.nodeIsolation.engine=both, the chart's admission-policy engine too: the operator
 *   writes each namespace's NodeIsolation parameter under the chart's RBAC, and the guard keeps
 *   tenants from changing it;
 * - with the Helm-generated certificate (webhook.tls.mode helm), `helm upgrade` keeps the CA (and
 *   caBundle) stable and re-issues a stale leaf with the same CA;
 * - `helm uninstall` leaves nothing of the release behind.
 */
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  connectE2eCluster,
  createTestNamespace,
  deleteNamespace,
  freePorts,
  installCrds,
  installOpenReportsCrds,
  instanceKindCrd,
  isApiStatus,
  loadKubeConfig,
  type RunningService,
  refusedLogLines,
  repoRoot,
  startService,
  testPod,
  waitFor,
  writeServiceAccountKubeconfig,
} from '@kubeplus-isolation/e2e';
import {
  FINALIZER as CLEANUP,
  ISOLATION_SETTLED_LABEL,
  ISOLATION_SETTLED_VALUE,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  NODE_ISOLATION_ANNOTATION as NODE,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_NAME_LABEL,
  SANDBOX_ISOLATION_ANNOTATION as SANDBOX,
} from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  ApiException,
  ApiextensionsV1Api,
  AppsV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  loadAllYaml,
  NodeV1Api,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
} from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { POLICY_ENGINE_SERVED } from './support/versions.js';

const run = promisify(execFile);
// The chart's admission-policy engine needs MutatingAdmissionPolicy v1 (Kubernetes 1.36+; the chart
// refuses it on older clusters, deploy/test/node-isolation-engine.test.ts): on an older minor (the
// version matrix) this suite installs the webhook engine alone, and the policy engine's checks are
// replaced by their absence (no NodeIsolation rights, objects or CRD).
const POLICY_ENGINE = POLICY_ENGINE_SERVED;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const CHART = join(repoRoot(), 'deploy', 'kubeplus-isolation');
const INSTANCE_GROUP = 'e2e.isolation.kubeplus.io';

/** The API server's Status message of a failed call (client-node 2.x ApiException body). */
function statusMessage(error: unknown): string {
  if (!(error instanceof ApiException)) return String(error);
  const body = error.body as unknown;
  try {
    const parsed = (typeof body === 'string' ? JSON.parse(body) : body) as { message?: string };
    return parsed.message ?? String(body);
  } catch {
    return String(body);
  }
}

/** Resolves to the Status message of a 403; fails if the call succeeds or fails otherwise. */
async function forbidden(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (error) {
    if (isApiStatus(error, 403)) return statusMessage(error);
    throw error;
  }
  throw new Error('expected 403 Forbidden, but the request succeeded');
}

describe('the umbrella Helm chart on a real control plane', () => {
  let cluster: Cluster;
  let admin: KubeConfig;
  let helmBin: string;
  const release = uniqueName('kpi');
  const tenantUser = uniqueName('tenant');
  /** A platform identity exempted from the instance guard only (as KubePlus's own ServiceAccounts would be). */
  const platformUser = uniqueName('platform');
  /**
   * Issue 39: a cloud admin (EKS access entry, GKE, AKS Entra ID): bound cluster-wide to
   * cluster-admin by a ClusterRoleBinding, in no group the chart names (never system:masters).
   */
  const cloudAdmin = uniqueName('cloud-admin');
  /** A tenant whose RoleBinding in its own namespace grants cluster-admin there (and only there). */
  const namespaceAdmin = uniqueName('ns-admin');
  /** A platform group given the chart's tamper-override ClusterRole (tamperProtection.rbacOverride.subjects). */
  const overrideGroup = uniqueName('platform-admins');
  const overrideUser = uniqueName('repairer');
  let releaseNs = '';
  let installed = false;
  let webhookPort = 0;
  let webhookMetricsPort = 0;
  let webhook: RunningService | undefined;
  const namespaces: string[] = [];
  const valuesFile = (): string => join(cluster.dir, `${release}-values.json`);

  const operatorUser = (): string => `system:serviceaccount:${releaseNs}:${release}-operator`;

  async function helm(...args: string[]): Promise<string> {
    try {
      const { stdout } = await run(
        helmBin,
        [...args, '--kubeconfig', cluster.kubeconfigPath, '--namespace', releaseNs],
        {
          maxBuffer: 64 * 1024 * 1024,
        },
      );
      return stdout;
    } catch (error) {
      const e = error as { stderr?: string; message: string };
      throw new Error(`helm ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}`);
    }
  }

  async function tlsSecret(): Promise<Record<string, string>> {
    const secret = await admin.makeApiClient(CoreV1Api).readNamespacedSecret({
      name: `${release}-webhook-tls`,
      namespace: releaseNs,
    });
    return Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]),
    );
  }

  async function caBundle(): Promise<string> {
    const mwc = await admin
      .makeApiClient(AdmissionregistrationV1Api)
      .readMutatingWebhookConfiguration({ name: `${release}-webhook` });
    return Buffer.from(mwc.webhooks?.[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8');
  }

  /** A kubeconfig authenticating as one of the chart's ServiceAccounts (bound token, TokenRequest). */
  async function serviceAccountKc(component: 'webhook' | 'operator'): Promise<KubeConfig> {
    const path = await writeServiceAccountKubeconfig(cluster, {
      namespace: releaseNs,
      serviceAccount: `${release}-${component}`,
      path: join(cluster.dir, `${release}-${component}.kubeconfig`),
      create: false,
    });
    return loadKubeConfig(path);
  }

  beforeAll(async () => {
    cluster = await connectE2eCluster();
    admin = cluster.kc;
    helmBin = join(cluster.state.assetsDir, 'helm');
    releaseNs = await createTestNamespace(admin, 'kpi-chart', {
      labels: {
        'pod-security.kubernetes.io/enforce': 'restricted',
        'pod-security.kubernetes.io/enforce-version': 'latest',
      },
    });
    namespaces.push(releaseNs);
    // Both at once: reserved one after the other, the second could be the first handed out again.
    [webhookPort = 0, webhookMetricsPort = 0] = await freePorts(2);
    writeFileSync(
      valuesFile(),
      JSON.stringify({
        // The Helm-generated certificate (tls.mode helm): this suite proves that mode's upgrade
        // behaviour; the operator-kept default is proven on the real node (webhook-certificates.test.ts).
        webhook: {
          clientConfig: { url: `https://127.0.0.1:${webhookPort}/mutate/pods` },
          timeoutSeconds: 5,
          tls: { mode: 'helm' },
        },
        operator: { instanceGroups: [{ group: INSTANCE_GROUP, resources: ['widgets'] }] },
        tamperProtection: {
          instances: { exemptUsers: [platformUser] },
          rbacOverride: { subjects: [{ kind: 'Group', name: overrideGroup }] },
        },
        // Both engines: every webhook check below still holds, and the policy engine's objects,
        // RBAC and guard are exercised too.
        global: { nodeIsolation: { engine: POLICY_ENGINE ? 'both' : 'webhook' } },
      }),
    );
    await helm('install', release, CHART, '--values', valuesFile());
    installed = true;
  });

  afterAll(async () => {
    await webhook?.stop();
    if (installed) await helm('uninstall', release, '--no-hooks', '--wait', '--timeout', '120s');
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    for (const call of [
      () => rbac.deleteClusterRoleBinding({ name: tenantUser }),
      () => rbac.deleteClusterRoleBinding({ name: cloudAdmin }),
      () => rbac.deleteClusterRoleBinding({ name: overrideUser }),
      () => rbac.deleteClusterRole({ name: tenantUser }),
    ]) {
      try {
        await call();
      } catch (error) {
        if (!isApiStatus(error, 404)) throw error;
      }
    }
    await Promise.all(namespaces.map((ns) => deleteNamespace(admin, ns)));
  });

  test('workload Pods are admitted under the restricted Pod Security Standard', async () => {
    const core = admin.makeApiClient(CoreV1Api);
    // The namespace really enforces: a Pod without the restricted settings is refused there.
    expect(
      await forbidden(core.createNamespacedPod({ namespace: releaseNs, body: testPod('unrestricted'), dryRun: 'All' })),
    ).toMatch(/violates PodSecurity "restricted:latest"/);
    // The ReplicaSet controller creates every replica of both Deployments (no FailedCreate).
    const apps = admin.makeApiClient(AppsV1Api);
    for (const component of ['webhook', 'operator']) {
      const deployment = await apps.readNamespacedDeployment({ name: `${release}-${component}`, namespace: releaseNs });
      const want = deployment.spec?.replicas ?? 0;
      expect(want).toBe(2);
      await waitFor(
        `${want} ${component} Pods created in ${releaseNs}`,
        async (observe) => {
          const pods = await core.listNamespacedPod({
            namespace: releaseNs,
            labelSelector: `app.kubernetes.io/instance=${release},app.kubernetes.io/component=${component}`,
          });
          const events = await core.listNamespacedEvent({ namespace: releaseNs });
          const failed = events.items.filter((e) => e.reason === 'FailedCreate').map((e) => e.message);
          if (failed.length > 0) throw new Error(`Pod creation failed: ${failed.join('; ')}`);
          observe(`${pods.items.length} Pods`);
          return pods.items.length === want;
        },
        { timeoutMs: 60_000, intervalMs: 500 },
      );
    }
  });

  test('the webhook runs as the chart’s ServiceAccount with the chart’s certificate and mutates Pods', async () => {
    const tls = await tlsSecret();
    expect(await caBundle()).toBe(tls['ca.crt']);
    const certFile = join(cluster.dir, `${release}-tls.crt`);
    const keyFile = join(cluster.dir, `${release}-tls.key`);
    writeFileSync(certFile, tls['tls.crt'] as string, { mode: 0o600 });
    writeFileSync(keyFile, tls['tls.key'] as string, { mode: 0o600 });
    const saKubeconfig = await writeServiceAccountKubeconfig(cluster, {
      namespace: releaseNs,
      serviceAccount: `${release}-webhook`,
      path: join(cluster.dir, `${release}-webhook.kubeconfig`),
      create: false,
    });
    // Readiness requires the Namespace informer to have synced: proof that the chart's RBAC suffices.
    webhook = await startService(cluster, {
      name: `${release}-webhook`,
      entry: join(repoRoot(), 'services', 'webhook', 'dist', 'main.js'),
      args: [
        '--bind-address=127.0.0.1',
        `--port=${webhookPort}`,
        `--metrics-port=${webhookMetricsPort}`,
        `--tls-cert-file=${certFile}`,
        `--tls-key-file=${keyFile}`,
        `--kubeconfig=${saKubeconfig}`,
        '--shutdown-delay=0',
      ],
      readiness: { url: `https://127.0.0.1:${webhookPort}/readyz`, tls: { caPem: tls['ca.crt'] as string } },
    });

    const spec = {
      nodeSelector: { pool: `${release}-pool` },
      tolerations: [{ key: 'dedicated', operator: 'Equal', value: `${release}-pool`, effect: 'NoSchedule' }],
    };
    const isolated = await createTestNamespace(admin, 'kpi-isolated', {
      labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
      annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(spec) },
    });
    const plain = await createTestNamespace(admin, 'kpi-plain');
    namespaces.push(isolated, plain);
    const core = admin.makeApiClient(CoreV1Api);
    await waitFor(
      'the chart’s webhook configuration to mutate a Pod in the isolated namespace',
      async (observe) => {
        const pod = await core.createNamespacedPod({ namespace: isolated, body: testPod('probe'), dryRun: 'All' });
        observe(JSON.stringify({ nodeSelector: pod.spec?.nodeSelector, tolerations: pod.spec?.tolerations }));
        return pod.spec?.nodeSelector?.pool === spec.nodeSelector.pool;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    const pod = await core.createNamespacedPod({ namespace: isolated, body: testPod('mutated'), dryRun: 'All' });
    expect(pod.spec?.tolerations).toEqual(
      expect.arrayContaining([expect.objectContaining(spec.tolerations[0] as object)]),
    );
    const untouched = await core.createNamespacedPod({ namespace: plain, body: testPod('plain'), dryRun: 'All' });
    expect(untouched.spec?.nodeSelector).toBeUndefined();

    // The webhook's identity reads namespaces and can write nothing.
    const asWebhook = (await serviceAccountKc('webhook')).makeApiClient(CoreV1Api);
    await asWebhook.readNamespace({ name: isolated });
    await forbidden(asWebhook.patchNamespace({ name: plain, body: { metadata: { labels: { x: 'y' } } } }, mergePatch));
    await forbidden(asWebhook.listNamespacedSecret({ namespace: releaseNs }));
    await forbidden(asWebhook.listPodForAllNamespaces());
  });

  test('the operator’s ServiceAccount holds exactly the access its chart RBAC describes', async () => {
    const authz = (await serviceAccountKc('operator')).makeApiClient(AuthorizationV1Api);
    const can = async (verb: string, group: string, resource: string, namespace = '', name = ''): Promise<boolean> => {
      const review = await authz.createSelfSubjectAccessReview({
        body: { spec: { resourceAttributes: { verb, group, resource, namespace, name } } },
      });
      return review.status?.allowed === true;
    };
    const expectations: [string, string, string, string, string, boolean][] = [
      ['list', 'apiextensions.k8s.io', 'customresourcedefinitions', '', '', true],
      ['create', 'apiextensions.k8s.io', 'customresourcedefinitions', '', '', false],
      ['watch', INSTANCE_GROUP, 'widgets', '', '', true],
      ['patch', INSTANCE_GROUP, 'widgets', 'team-a', 'w', true],
      ['update', INSTANCE_GROUP, 'widgets', 'team-a', 'w', false],
      ['delete', INSTANCE_GROUP, 'widgets', 'team-a', 'w', false],
      ['list', 'other.example.com', 'widgets', '', '', false],
      ['create', '', 'namespaces', '', '', true],
      ['patch', '', 'namespaces', '', 'team-a', true],
      ['delete', '', 'namespaces', '', 'team-a', true],
      ['update', '', 'namespaces', '', 'team-a', false],
      ['create', 'node.k8s.io', 'runtimeclasses', '', '', true],
      ['update', 'node.k8s.io', 'runtimeclasses', '', 'x', true],
      ['patch', 'node.k8s.io', 'runtimeclasses', '', 'x', false],
      ['create', 'admissionregistration.k8s.io', 'validatingadmissionpolicybindings', '', '', true],
      ['create', 'admissionregistration.k8s.io', 'mutatingadmissionpolicies', '', '', true],
      ['create', 'admissionregistration.k8s.io', 'mutatingwebhookconfigurations', '', '', false],
      ['create', '', 'events', 'team-a', '', true],
      // The admission-policy engine's parameters (engine=both): owned objects, PUT not PATCH.
      ['create', 'isolation.kubeplus.io', 'nodeisolations', 'team-a', '', POLICY_ENGINE],
      ['update', 'isolation.kubeplus.io', 'nodeisolations', 'team-a', 'node-isolation', POLICY_ENGINE],
      ['delete', 'isolation.kubeplus.io', 'nodeisolations', 'team-a', 'node-isolation', POLICY_ENGINE],
      ['watch', 'isolation.kubeplus.io', 'nodeisolations', '', '', POLICY_ENGINE],
      ['patch', 'isolation.kubeplus.io', 'nodeisolations', 'team-a', 'node-isolation', false],
      ['create', 'coordination.k8s.io', 'leases', releaseNs, '', true],
      ['update', 'coordination.k8s.io', 'leases', releaseNs, `${release}-operator`, true],
      ['update', 'coordination.k8s.io', 'leases', releaseNs, 'someone-else', false],
      ['create', 'coordination.k8s.io', 'leases', 'kube-system', '', false],
      ['get', '', 'secrets', releaseNs, `${release}-webhook-tls`, false],
      ['list', '', 'secrets', '', '', false],
      // Pods: list (the fail-open audit) and a cluster-wide watch of new ones, never read one or write.
      ['list', '', 'pods', 'team-a', '', true],
      // The audit's watch of new Pods (audit/pod-admissions.ts): cluster-wide, no get or write.
      ['watch', '', 'pods', '', '', true],
      ['get', '', 'pods', 'team-a', 'p', false],
      ['delete', '', 'pods', 'team-a', 'p', false],
      ['patch', '', 'pods', 'team-a', 'p', false],
      // Compliance reports (reports.enabled, the default): its Reports, PUT not PATCH; Sandboxes listed only.
      ['list', 'openreports.io', 'reports', '', '', true],
      ['create', 'openreports.io', 'reports', 'team-a', '', true],
      ['update', 'openreports.io', 'reports', 'team-a', 'kubeplus-isolation', true],
      ['delete', 'openreports.io', 'reports', 'team-a', 'kubeplus-isolation', true],
      ['patch', 'openreports.io', 'reports', 'team-a', 'kubeplus-isolation', false],
      ['watch', 'openreports.io', 'reports', '', '', false],
      ['list', 'agents.x-k8s.io', 'sandboxes', 'team-a', '', true],
      ['update', 'agents.x-k8s.io', 'sandboxes', 'team-a', 's', false],
      ['bind', 'rbac.authorization.k8s.io', 'clusterroles', '', '', false],
      ['impersonate', '', 'users', '', '', false],
      // Issue 39: the guards exempt whoever RBAC allows this verb cluster-wide; never the operator
      // (its confinement would be void), in no namespace either.
      ['override', 'isolation.kubeplus.io', 'tamperprotection', '', '', false],
      ['override', 'isolation.kubeplus.io', 'tamperprotection', 'team-a', '', false],
    ];
    const actual = await Promise.all(
      expectations.map(async ([verb, group, resource, namespace, name]) => [
        verb,
        group,
        resource,
        namespace,
        name,
        await can(verb, group, resource, namespace, name),
      ]),
    );
    expect(actual).toEqual(expectations);
  });

  test('the operator can create admission policies and bindings with its RBAC alone', async () => {
    const asOperator = (await serviceAccountKc('operator')).makeApiClient(AdmissionregistrationV1Api);
    const name = uniqueName('kpi-probe');
    // dryRun: the full create path (authorization, admission, validation) without persisting.
    await asOperator.createValidatingAdmissionPolicy({
      dryRun: 'All',
      body: {
        metadata: { name, labels: { [MANAGED_BY_LABEL]: 'kubeplus-isolation' } },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            resourceRules: [
              { apiGroups: ['agents.x-k8s.io'], apiVersions: ['*'], operations: ['CREATE'], resources: ['sandboxes'] },
            ],
          },
          validations: [{ expression: 'true' }],
        },
      },
    });
    await asOperator.createValidatingAdmissionPolicyBinding({
      dryRun: 'All',
      body: {
        metadata: { name, labels: { [MANAGED_BY_LABEL]: 'kubeplus-isolation' } },
        spec: { policyName: name, validationActions: ['Deny'] },
      },
    });
  });

  describe('tamper protection', () => {
    let tenant: CoreV1Api;
    let tenantNode: NodeV1Api;
    let operator: CoreV1Api;
    let operatorNode: NodeV1Api;
    let tenantNs = '';
    const guard = (): string => `${release}-kubeplus-isolation-namespace-guard`;

    beforeAll(async () => {
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createClusterRole({
        body: {
          metadata: { name: tenantUser },
          rules: [
            { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'update', 'patch', 'delete'] },
            // Issue 38: both subresources write the whole object's metadata, labels and annotations included.
            { apiGroups: [''], resources: ['namespaces/status', 'namespaces/finalize'], verbs: ['update', 'patch'] },
            { apiGroups: ['node.k8s.io'], resources: ['runtimeclasses'], verbs: ['get', 'update', 'patch', 'delete'] },
            // As if a platform had granted it: the guard, not RBAC, must be what refuses.
            {
              apiGroups: ['isolation.kubeplus.io'],
              resources: ['nodeisolations'],
              verbs: ['get', 'create', 'update', 'patch', 'delete'],
            },
            // A tenant that may write its own instances (an instance outside the platform namespace).
            {
              apiGroups: [INSTANCE_GROUP],
              resources: ['widgets'],
              verbs: ['get', 'create', 'update', 'patch', 'delete'],
            },
            // A Kind of an instance group with a /status subresource, as controllers grant it.
            { apiGroups: [INSTANCE_GROUP], resources: ['gadgets/status'], verbs: ['update', 'patch'] },
            // A platform that lets tenants write compliance Reports (their own tools' findings).
            {
              apiGroups: ['openreports.io'],
              resources: ['reports'],
              verbs: ['get', 'list', 'create', 'update', 'patch', 'delete', 'deletecollection'],
            },
          ],
        },
      });
      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name: tenantUser },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: tenantUser },
          subjects: [
            { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: tenantUser },
            // The same rights: only the instance guard's exemption tells the two apart.
            { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: platformUser },
          ],
        },
      });
      const cert = await cluster.issueClientCert(tenantUser, ['tenants']);
      const tenantKc = loadKubeConfig(
        cluster.writeKubeconfig(join(cluster.dir, `${tenantUser}.kubeconfig`), tenantUser, cert),
      );
      tenant = tenantKc.makeApiClient(CoreV1Api);
      tenantNode = tenantKc.makeApiClient(NodeV1Api);
      const operatorKc = await serviceAccountKc('operator');
      operator = operatorKc.makeApiClient(CoreV1Api);
      operatorNode = operatorKc.makeApiClient(NodeV1Api);
      tenantNs = await createTestNamespace(admin, 'kpi-tenant', {
        labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true', team: 'a' },
        annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"a"}}' },
      });
      namespaces.push(tenantNs);
      // Policies reach the API server's admission asynchronously: wait until the guard denies.
      await waitFor(
        'the namespace guard to be enforced',
        async () => {
          try {
            await tenant.patchNamespace(
              {
                name: tenantNs,
                body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'false' } } },
                dryRun: 'All',
              },
              mergePatch,
            );
            return false;
          } catch (error) {
            if (isApiStatus(error, 403)) return statusMessage(error).includes(guard());
            throw error;
          }
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
    });

    const patchLabels = (api: CoreV1Api, name: string, labels: Record<string, string | null>) =>
      api.patchNamespace({ name, body: { metadata: { labels } } }, mergePatch);
    const patchAnnotations = (api: CoreV1Api, name: string, annotations: Record<string, string | null>) =>
      api.patchNamespace({ name, body: { metadata: { annotations } } }, mergePatch);

    test('a tenant can neither change, remove nor forge the isolation label and annotation', async () => {
      const changed = await forbidden(patchLabels(tenant, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: 'false' }));
      expect(changed).toContain(
        `Namespace ${tenantNs}: label(s) ${NODE_ISOLATION_ENABLED_LABEL} are kubeplus-isolation state`,
      );
      expect(changed).toContain(operatorUser());
      expect(changed).toContain('system:masters');
      // Issue 39: the message names the RBAC way through, so a cloud admin knows what to check.
      expect(changed).toContain('override tamperprotection.isolation.kubeplus.io cluster-wide');
      await forbidden(patchLabels(tenant, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: null }));
      expect(
        await forbidden(
          patchAnnotations(tenant, tenantNs, { [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"b"}}' }),
        ),
      ).toContain(`annotation(s) ${NODE_ISOLATION_RESOLVED_ANNOTATION}`);
      await forbidden(patchAnnotations(tenant, tenantNs, { [NODE_ISOLATION_RESOLVED_ANNOTATION]: null }));
      const plain = await createTestNamespace(admin, 'kpi-tenant-plain');
      namespaces.push(plain);
      await forbidden(patchLabels(tenant, plain, { [NODE_ISOLATION_ENABLED_LABEL]: 'true' }));
      await forbidden(patchLabels(tenant, plain, { [MANAGED_BY_LABEL]: 'kubeplus-isolation' }));
      const ns = await admin.makeApiClient(CoreV1Api).readNamespace({ name: tenantNs });
      expect(ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
    });

    test('neither namespaces/status nor namespaces/finalize lets a tenant change the isolation label or annotation', async () => {
      // The API server's status and finalize strategies keep the old spec (resp. status) but take
      // the new metadata: a tenant granted either subresource could otherwise strip the label or
      // rewrite the mandate (issue 38). Other labels still change through them (shown first, so
      // this test proves the subresources do write metadata on this minor).
      const core = admin.makeApiClient(CoreV1Api);
      await tenant.patchNamespaceStatus(
        { name: tenantNs, body: { metadata: { labels: { 'via-status': 'yes' } } } },
        mergePatch,
      );
      const finalizeWith = async (
        api: CoreV1Api,
        edit: (m: { labels: Record<string, string>; annotations: Record<string, string> }) => void,
      ) => {
        const current = await core.readNamespace({ name: tenantNs });
        const metadata = {
          ...current.metadata,
          labels: { ...current.metadata?.labels },
          annotations: { ...current.metadata?.annotations },
        };
        edit(metadata);
        return api.replaceNamespaceFinalize({ name: tenantNs, body: { ...current, metadata } });
      };
      await finalizeWith(tenant, (m) => {
        m.labels['via-finalize'] = 'yes';
      });
      const written = await core.readNamespace({ name: tenantNs });
      expect(written.metadata?.labels).toEqual(expect.objectContaining({ 'via-status': 'yes', 'via-finalize': 'yes' }));

      const viaStatus = await forbidden(
        tenant.patchNamespaceStatus(
          { name: tenantNs, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: null } } } },
          mergePatch,
        ),
      );
      expect(viaStatus).toContain(
        `Namespace ${tenantNs}: label(s) ${NODE_ISOLATION_ENABLED_LABEL} are kubeplus-isolation state`,
      );
      expect(
        await forbidden(
          tenant.patchNamespaceStatus(
            {
              name: tenantNs,
              body: {
                metadata: { annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"b"}}' } },
              },
            },
            mergePatch,
          ),
        ),
      ).toContain(`annotation(s) ${NODE_ISOLATION_RESOLVED_ANNOTATION}`);
      expect(
        await forbidden(
          finalizeWith(tenant, (m) => {
            delete m.labels[NODE_ISOLATION_ENABLED_LABEL];
          }),
        ),
      ).toContain(`label(s) ${NODE_ISOLATION_ENABLED_LABEL} are kubeplus-isolation state`);
      expect(
        await forbidden(
          finalizeWith(tenant, (m) => {
            m.annotations[NODE_ISOLATION_RESOLVED_ANNOTATION] = '{"nodeSelector":{"pool":"b"}}';
          }),
        ),
      ).toContain(`annotation(s) ${NODE_ISOLATION_RESOLVED_ANNOTATION}`);
      const ns = await core.readNamespace({ name: tenantNs });
      expect(ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
      expect(ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]).toBe('{"nodeSelector":{"pool":"a"}}');
    });

    test("a custom resource's /status cannot change its metadata: the instance guard need not match it", async () => {
      // The instance guard matches every resource of the instance groups but no subresource: that
      // holds only if the API server ignores metadata in a /status write of a custom resource.
      const ext = admin.makeApiClient(ApiextensionsV1Api);
      const crdName = `gadgets.${INSTANCE_GROUP}`;
      const crd = instanceKindCrd({ group: INSTANCE_GROUP, kind: 'Gadget', plural: 'gadgets' });
      const [version] = crd.spec.versions;
      if (version) version.subresources = { status: {} };
      // Not `registered-by: kubeplus`: no operator is to take it for an instance Kind.
      crd.metadata = { name: crdName };
      await installCrds(admin, [crd]);
      const objects = admin.makeApiClient(CustomObjectsApi);
      const at = { group: INSTANCE_GROUP, version: 'v1', plural: 'gadgets', namespace: tenantNs, name: 'g-1' };
      try {
        await objects.createNamespacedCustomObject({
          ...at,
          body: {
            apiVersion: `${INSTANCE_GROUP}/v1`,
            kind: 'Gadget',
            metadata: { name: at.name, annotations: { [NODE]: '{"nodeSelector":{"pool":"a"}}' } },
            spec: {},
          },
        });
        const tenantObjects = loadKubeConfig(join(cluster.dir, `${tenantUser}.kubeconfig`)).makeApiClient(
          CustomObjectsApi,
        );
        await tenantObjects.patchNamespacedCustomObjectStatus(
          {
            ...at,
            body: {
              metadata: { annotations: { [NODE]: '{"nodeSelector":{"pool":"b"}}', 'via-status': 'yes' } },
              status: { seen: true },
            },
          },
          mergePatch,
        );
        const stored = (await objects.getNamespacedCustomObject(at)) as {
          metadata: { annotations?: Record<string, string> };
          status?: unknown;
        };
        expect(stored.status).toEqual({ seen: true });
        expect(stored.metadata.annotations).toEqual({ [NODE]: '{"nodeSelector":{"pool":"a"}}' });
      } finally {
        await objects.deleteNamespacedCustomObject(at).catch(() => undefined);
        await ext.deleteCustomResourceDefinition({ name: crdName }).catch(() => undefined);
      }
    });

    test('a tenant still edits every other label and annotation of its namespace', async () => {
      await patchLabels(tenant, tenantNs, { team: 'b', cost: 'center-7' });
      await patchAnnotations(tenant, tenantNs, { 'example.com/owner': 'alice' });
      const ns = await admin.makeApiClient(CoreV1Api).readNamespace({ name: tenantNs });
      expect(ns.metadata?.labels).toEqual(
        expect.objectContaining({ team: 'b', cost: 'center-7', [NODE_ISOLATION_ENABLED_LABEL]: 'true' }),
      );
    });

    test('the operator’s own token and cluster admins can change it', async () => {
      await patchLabels(operator, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: 'true' });
      await patchAnnotations(operator, tenantNs, {
        [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"c"}}',
      });
      await patchAnnotations(admin.makeApiClient(CoreV1Api), tenantNs, {
        [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"a"}}',
      });
    });

    /** A client-certificate user in `groups` (never system:masters). */
    async function userKc(user: string, groups: string[]): Promise<KubeConfig> {
      const cert = await cluster.issueClientCert(user, groups);
      return loadKubeConfig(cluster.writeKubeconfig(join(cluster.dir, `${user}.kubeconfig`), user, cert));
    }

    /** Waits until RBAC (its informer) allows `kc` the verb: the binding has reached the authorizer. */
    async function untilAllowed(
      kc: KubeConfig,
      verb: string,
      group: string,
      resource: string,
      namespace = '',
      name = '',
    ) {
      const authz = kc.makeApiClient(AuthorizationV1Api);
      await waitFor(
        `RBAC to allow ${verb} ${resource}.${group} in "${namespace}"`,
        async () =>
          (
            await authz.createSelfSubjectAccessReview({
              body: { spec: { resourceAttributes: { verb, group, resource, namespace, name } } },
            })
          ).status?.allowed === true,
        { timeoutMs: 30_000, intervalMs: 250 },
      );
    }

    async function canOverride(kc: KubeConfig, namespace = ''): Promise<boolean> {
      const review = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
        body: {
          spec: {
            resourceAttributes: {
              verb: 'override',
              group: 'isolation.kubeplus.io',
              resource: 'tamperprotection',
              namespace,
            },
          },
        },
      });
      return review.status?.allowed === true;
    }

    test('a user bound cluster-wide to cluster-admin, not in system:masters, repairs an isolated namespace (issue 39)', async () => {
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name: cloudAdmin },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: cloudAdmin }],
        },
      });
      const kc = await userKc(cloudAdmin, ['cloud-admins']);
      await untilAllowed(kc, 'patch', '', 'namespaces', '', tenantNs);
      // cluster-admin's rules are `*`: RBAC allows the dedicated verb without anyone naming it.
      expect(await canOverride(kc)).toBe(true);
      const core = kc.makeApiClient(CoreV1Api);
      // The repair: the mandate rewritten, the label taken off and put back.
      await patchAnnotations(core, tenantNs, { [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"r"}}' });
      await patchLabels(core, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: null });
      await patchLabels(core, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: 'true' });
      await patchAnnotations(core, tenantNs, { [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"a"}}' });
      const ns = await admin.makeApiClient(CoreV1Api).readNamespace({ name: tenantNs });
      expect(ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
      expect(ns.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]).toBe('{"nodeSelector":{"pool":"a"}}');
    });

    test('the helm test hook’s objects are written by that cluster-admin user (issue 39)', async () => {
      // `helm test` needs a node to run its Pod (proven on the real node, chart-lifecycle and
      // kubernetes-versions-node); here: every object the hook writes, exactly as rendered, created
      // as the cloud admin. Its isolated namespace is what the guard refused them.
      const rendered = await run(
        helmBin,
        [
          'template',
          release,
          CHART,
          '--namespace',
          releaseNs,
          '--values',
          valuesFile(),
          '--kube-version',
          cluster.state.kubernetesVersion,
          '--show-only',
          'templates/tests/isolation-test.yaml',
        ],
        { maxBuffer: 16 * 1024 * 1024 },
      );
      const objects = (loadAllYaml(rendered.stdout) as (KubernetesObject | null)[]).filter(
        (o): o is KubernetesObject => o !== null,
      );
      const testNs = `${release}-kubeplus-isolation-helm-test`;
      expect(objects.map((o) => o.kind)).toEqual(
        expect.arrayContaining(['Namespace', 'ConfigMap', 'ServiceAccount', 'Role', 'RoleBinding', 'Pod']),
      );
      if (POLICY_ENGINE) expect(objects.map((o) => o.kind)).toContain('NodeIsolation');
      const kc = await userKc(cloudAdmin, ['cloud-admins']);
      await untilAllowed(kc, 'create', '', 'namespaces');
      const api = KubernetesObjectApi.makeApiClient(kc);
      namespaces.push(testNs);
      const created: KubernetesObject[] = [];
      try {
        for (const object of objects) {
          // The Pod dry-run: no node here runs it (the hook's own check is a dry-run Pod as well).
          if (object.kind === 'Pod') await api.create(object, undefined, 'All');
          else created.push(await api.create(object));
        }
        const ns = await admin.makeApiClient(CoreV1Api).readNamespace({ name: testNs });
        expect(ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL]).toBe('true');
      } finally {
        for (const object of created.reverse()) await api.delete(object).catch(() => undefined);
      }
    });

    test('a tenant bound to cluster-admin by a RoleBinding in its own namespace is still refused (issue 39)', async () => {
      await admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
        namespace: tenantNs,
        body: {
          metadata: { name: namespaceAdmin },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: namespaceAdmin }],
        },
      });
      const kc = await userKc(namespaceAdmin, ['tenants']);
      // RBAC lets it write its own Namespace object (its namespace is the request's)...
      await untilAllowed(kc, 'patch', '', 'namespaces', tenantNs, tenantNs);
      // ...and even the verb, inside its namespace; the guards ask cluster-wide, where it has nothing.
      expect(await canOverride(kc, tenantNs)).toBe(true);
      expect(await canOverride(kc)).toBe(false);
      const core = kc.makeApiClient(CoreV1Api);
      expect(await forbidden(patchLabels(core, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: null }))).toContain(guard());
      expect(
        await forbidden(
          patchAnnotations(core, tenantNs, { [NODE_ISOLATION_RESOLVED_ANNOTATION]: '{"nodeSelector":{"pool":"x"}}' }),
        ),
      ).toContain(guard());
      // Everything else of its namespace stays its own.
      await patchLabels(core, tenantNs, { team: 'ns-admin' });
    });

    test('the chart’s tamper-override ClusterRole exempts a group that is not cluster-admin (issue 39)', async () => {
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      // The tenant's rights (namespaces, NodeIsolations, ...), nothing else: only the chart's
      // binding of its group (tamperProtection.rbacOverride.subjects) sets it apart.
      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name: overrideUser },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: tenantUser },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: overrideUser }],
        },
      });
      const role = await rbac.readClusterRole({ name: `${release}-kubeplus-isolation-tamper-override` });
      expect(role.rules).toEqual([
        { apiGroups: ['isolation.kubeplus.io'], resources: ['tamperprotection'], verbs: ['override'] },
      ]);
      const kc = await userKc(overrideUser, [overrideGroup]);
      await untilAllowed(kc, 'patch', '', 'namespaces', '', tenantNs);
      expect(await canOverride(kc)).toBe(true);
      const core = kc.makeApiClient(CoreV1Api);
      await patchLabels(core, tenantNs, { [NODE_ISOLATION_ENABLED_LABEL]: 'true', [OWNER_NAME_LABEL]: 'repaired' });
      await patchLabels(core, tenantNs, { [OWNER_NAME_LABEL]: null });
    });

    test('the operator is confined to its own keys, its own Namespaces and RuntimeClasses', async () => {
      expect(await forbidden(patchLabels(operator, tenantNs, { team: 'x' }))).toContain(
        `may only change its own labels and annotations of Namespace ${tenantNs}, not team`,
      );
      await forbidden(patchLabels(operator, tenantNs, { [MANAGED_BY_LABEL]: 'kubeplus-isolation' }));
      expect(await forbidden(operator.deleteNamespace({ name: tenantNs }))).toContain(
        `may only delete Namespaces it created (${MANAGED_BY_LABEL}=kubeplus-isolation), not ${tenantNs}`,
      );
      await forbidden(
        operator.createNamespace({ body: { metadata: { name: uniqueName('kpi-unowned') } }, dryRun: 'All' }),
      );
      // Its own Namespace: create, then delete.
      const owned = uniqueName('kpi-owned');
      await operator.createNamespace({
        body: { metadata: { name: owned, labels: { [MANAGED_BY_LABEL]: 'kubeplus-isolation' } } },
      });
      namespaces.push(owned);
      await operator.deleteNamespace({ name: owned });
      // A RuntimeClass it does not own.
      const foreign = uniqueName('kpi-foreign');
      const nodeAdmin = admin.makeApiClient(NodeV1Api);
      await nodeAdmin.createRuntimeClass({ body: { metadata: { name: foreign }, handler: 'runc' } });
      try {
        await forbidden(operatorNode.deleteRuntimeClass({ name: foreign }));
      } finally {
        await nodeAdmin.deleteRuntimeClass({ name: foreign });
      }
    });

    test("the settled label (the hold's release, issue 35) is the operator's: it may set it, a tenant may not", async () => {
      // Found on the real node: the confinement refused the operator's settle PATCH, so no KubePlus
      // namespace was ever settled and every helm install there was refused by the hold after 25 s.
      await patchLabels(operator, tenantNs, { [ISOLATION_SETTLED_LABEL]: ISOLATION_SETTLED_VALUE });
      try {
        expect(
          (await admin.makeApiClient(CoreV1Api).readNamespace({ name: tenantNs })).metadata?.labels?.[
            ISOLATION_SETTLED_LABEL
          ],
        ).toBe(ISOLATION_SETTLED_VALUE);
        // Nobody else releases a hold early, or takes the release back.
        expect(await forbidden(patchLabels(tenant, tenantNs, { [ISOLATION_SETTLED_LABEL]: null }))).toContain(
          `label(s) ${ISOLATION_SETTLED_LABEL} are kubeplus-isolation state`,
        );
        const plain = await createTestNamespace(admin, 'kpi-unsettled');
        namespaces.push(plain);
        await forbidden(patchLabels(tenant, plain, { [ISOLATION_SETTLED_LABEL]: ISOLATION_SETTLED_VALUE }));
      } finally {
        await patchLabels(operator, tenantNs, { [ISOLATION_SETTLED_LABEL]: null });
      }
    });

    test('operator-owned RuntimeClasses: only the operator (or an admin) may change or delete them', async () => {
      const name = `kubeplus-sandbox-${uniqueName('kpi')}`;
      await operatorNode.createRuntimeClass({
        body: { metadata: { name, labels: { [MANAGED_BY_LABEL]: 'kubeplus-isolation' } }, handler: 'kata' },
      });
      const nodeAdmin = admin.makeApiClient(NodeV1Api);
      try {
        const denied = await forbidden(
          tenantNode.patchRuntimeClass(
            { name, body: { metadata: { labels: { [MANAGED_BY_LABEL]: null } } } },
            mergePatch,
          ),
        );
        expect(denied).toContain(`RuntimeClass ${name} is managed by kubeplus-isolation`);
        expect(await forbidden(tenantNode.deleteRuntimeClass({ name }))).toContain('DELETE is allowed only to');
        // The operator writes its RuntimeClasses with PUT (its RBAC has update, not patch).
        const current = await operatorNode.readRuntimeClass({ name });
        current.metadata = { ...current.metadata, labels: { ...current.metadata?.labels, probe: 'y' } };
        await operatorNode.replaceRuntimeClass({ name, body: current });
      } finally {
        await nodeAdmin.deleteRuntimeClass({ name });
      }
    });

    test("a tenant can neither edit, delete nor forge the operator's compliance Report; its namespace still deletes", async () => {
      // The Report named kubeplus-isolation is the operator's account of what runs in the namespace:
      // a tenant allowed to write Reports could otherwise hide a finding, or plant a clean Report
      // before the operator writes one.
      const installed = await installOpenReportsCrds(admin);
      // The guard matches `reports` only: no served version has a /status to write around it.
      const reportCrd = await admin
        .makeApiClient(ApiextensionsV1Api)
        .readCustomResourceDefinition({ name: 'reports.openreports.io' });
      expect(reportCrd.spec.versions.filter((v) => v.subresources?.status !== undefined).map((v) => v.name)).toEqual(
        [],
      );
      const ns = await createTestNamespace(admin, 'kpi-reported', { labels: { team: 'a' } });
      const forgedNs = await createTestNamespace(admin, 'kpi-unreported', { labels: { team: 'a' } });
      namespaces.push(forgedNs);
      const report = (namespace: string, fail: number) => ({
        apiVersion: 'openreports.io/v1alpha1',
        kind: 'Report',
        metadata: { name: 'kubeplus-isolation', namespace, labels: { [MANAGED_BY_LABEL]: 'kubeplus-isolation' } },
        scope: { apiVersion: 'v1', kind: 'Namespace', name: namespace },
        source: 'kubeplus-isolation',
        summary: { pass: 0, fail, warn: 0, error: 0, skip: 0 },
      });
      const at = (namespace: string) => ({
        group: 'openreports.io',
        version: 'v1alpha1',
        plural: 'reports',
        namespace,
        name: 'kubeplus-isolation',
      });
      const tenantKc = loadKubeConfig(join(cluster.dir, `${tenantUser}.kubeconfig`));
      const tenantReports = tenantKc.makeApiClient(CustomObjectsApi);
      const operatorReports = (await serviceAccountKc('operator')).makeApiClient(CustomObjectsApi);
      try {
        // The guard reaches admission asynchronously: wait until it refuses the forgery.
        const forged = await waitFor(
          'the report guard to refuse a forged Report',
          async (observe) => {
            try {
              await tenantReports.createNamespacedCustomObject({ ...at(forgedNs), body: report(forgedNs, 0) });
              await admin.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject(at(forgedNs));
              observe('created');
              return undefined;
            } catch (error) {
              observe(String(error));
              return isApiStatus(error, 403) ? statusMessage(error) : undefined;
            }
          },
          { timeoutMs: 30_000, intervalMs: 250 },
        );
        expect(forged).toContain(`Report ${forgedNs}/kubeplus-isolation is kubeplus-isolation's compliance Report`);
        expect(forged).toContain(operatorUser());

        await operatorReports.createNamespacedCustomObject({ ...at(ns), body: report(ns, 3) });
        const hidden = await forbidden(
          tenantReports.patchNamespacedCustomObject(
            { ...at(ns), body: { summary: { pass: 3, fail: 0, warn: 0, error: 0, skip: 0 } } },
            mergePatch,
          ),
        );
        expect(hidden).toContain('UPDATE is allowed only to');
        expect(await forbidden(tenantReports.deleteNamespacedCustomObject(at(ns)))).toContain(
          'DELETE is allowed only to',
        );
        expect(
          await forbidden(
            tenantReports.deleteCollectionNamespacedCustomObject({
              group: 'openreports.io',
              version: 'v1alpha1',
              plural: 'reports',
              namespace: ns,
            }),
          ),
        ).toContain('DELETE is allowed only to');
        const kept = (await admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject(at(ns))) as {
          metadata: { resourceVersion: string };
          summary: { fail: number };
        };
        expect(kept.summary.fail).toBe(3);
        // The operator rewrites it (a PUT at the version it read, as it does); a Report of another
        // name is the tenant's own business.
        const rewritten = report(ns, 2);
        await operatorReports.replaceNamespacedCustomObject({
          ...at(ns),
          body: { ...rewritten, metadata: { ...rewritten.metadata, resourceVersion: kept.metadata.resourceVersion } },
        });
        const own = { ...report(ns, 0), metadata: { name: 'team-scanner', namespace: ns } };
        await tenantReports.createNamespacedCustomObject({ ...at(ns), body: own });
        await tenantReports.deleteNamespacedCustomObject({ ...at(ns), name: 'team-scanner' });

        // Deleting the namespace deletes the Report with it: the namespace controller is not refused.
        await tenant.deleteNamespace({ name: ns });
        await waitFor(
          `namespace ${ns} (with the operator's Report in it) to be finalized`,
          async (observe) => {
            try {
              const left = await admin.makeApiClient(CoreV1Api).readNamespace({ name: ns });
              observe(left.status?.conditions?.filter((c) => c.status === 'True').map((c) => c.message));
              return false;
            } catch (error) {
              if (isApiStatus(error, 404)) return true;
              throw error;
            }
          },
          { timeoutMs: 120_000, intervalMs: 500 },
        );
      } finally {
        // As found: later suites start operators that would write Reports if the Kind were served.
        await admin
          .makeApiClient(CoreV1Api)
          .deleteNamespace({ name: ns })
          .catch(() => undefined);
        const ext = admin.makeApiClient(ApiextensionsV1Api);
        for (const name of installed) await ext.deleteCustomResourceDefinition({ name }).catch(() => undefined);
      }
    });

    test('a tenant can still delete its labeled namespace and the namespace controller finalizes it', async () => {
      await tenant.deleteNamespace({ name: tenantNs });
      const core = admin.makeApiClient(CoreV1Api);
      await waitFor(
        `namespace ${tenantNs} to be finalized`,
        async () => {
          try {
            await core.readNamespace({ name: tenantNs });
            return false;
          } catch (error) {
            if (isApiStatus(error, 404)) return true;
            throw error;
          }
        },
        { timeoutMs: 120_000, intervalMs: 500 },
      );
    });
  });

  describe('the operator, run as the chart configures it', () => {
    const crdName = `widgets.${INSTANCE_GROUP}`;
    const instance = uniqueName('w');
    let operatorProcess: RunningService | undefined;
    let tenantNs = '';
    let custom: CustomObjectsApi;
    const widget = { group: INSTANCE_GROUP, version: 'v1', plural: 'widgets' };
    const owned = (): string => `${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE},${OWNER_NAME_LABEL}=${instance}`;

    beforeAll(async () => {
      // An instance Kind as KubePlus registers it (label registered-by=kubeplus).
      await installCrds(admin, [instanceKindCrd({ group: INSTANCE_GROUP, kind: 'Widget', plural: 'widgets' })]);
      custom = admin.makeApiClient(CustomObjectsApi);

      // The chart's own Deployment args, as the kubelet would expand them, plus what a process
      // outside the cluster needs: the ServiceAccount's token and a loopback metrics port.
      const deployment = await admin
        .makeApiClient(AppsV1Api)
        .readNamespacedDeployment({ name: `${release}-operator`, namespace: releaseNs });
      const env = { POD_NAMESPACE: releaseNs, POD_NAME: `${release}-operator-e2e` };
      // Its metrics port is read here over loopback, plain (the chart's secure metrics are
      // deploy/test's): --metrics-secure=false replaces the chart's.
      const chartArgs = (deployment.spec?.template.spec?.containers[0]?.args ?? [])
        .map((a) => a.replace(/\$\((\w+)\)/g, (_m, v: string) => env[v as keyof typeof env] ?? `$(${v})`))
        .filter((a) => !a.startsWith('--metrics-port=') && !a.startsWith('--metrics-secure='));
      expect(chartArgs).toContain(`--leader-election-namespace=${releaseNs}`);
      const [metricsPort = 0] = await freePorts(1);
      const kubeconfig = await writeServiceAccountKubeconfig(cluster, {
        namespace: releaseNs,
        serviceAccount: `${release}-operator`,
        path: join(cluster.dir, `${release}-operator-process.kubeconfig`),
        create: false,
      });
      operatorProcess = await startService(cluster, {
        name: `${release}-operator`,
        entry: join(repoRoot(), 'services', 'operator', 'dist', 'main.js'),
        args: [
          ...chartArgs,
          `--metrics-port=${metricsPort}`,
          '--metrics-secure=false',
          '--bind-address=127.0.0.1',
          `--kubeconfig=${kubeconfig}`,
        ],
        env,
        readiness: { url: `http://127.0.0.1:${metricsPort}/readyz`, timeoutMs: 60_000 },
      });
    });

    afterAll(async () => {
      // Leave no finalizer behind that would block the CRD's deletion.
      try {
        const list = (await custom.listClusterCustomObject(widget)) as {
          items: { metadata: { name: string; namespace: string } }[];
        };
        for (const item of list.items) {
          await custom.patchNamespacedCustomObject(
            {
              ...widget,
              namespace: item.metadata.namespace,
              name: item.metadata.name,
              body: { metadata: { finalizers: null } },
            },
            mergePatch,
          );
        }
      } finally {
        await operatorProcess?.stop();
        await admin.makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: crdName });
      }
    });

    test('it takes the Lease in the release namespace through the chart’s Role', async () => {
      const leases = admin.makeApiClient(CoordinationV1Api);
      await waitFor(
        `the operator to hold Lease ${releaseNs}/${release}-operator`,
        async (observe) => {
          try {
            const lease = await leases.readNamespacedLease({ name: `${release}-operator`, namespace: releaseNs });
            observe(`holder ${lease.spec?.holderIdentity ?? ''}`);
            return lease.spec?.holderIdentity?.startsWith(`${release}-operator-e2e_`) === true;
          } catch (error) {
            if (isApiStatus(error, 404)) return false;
            throw error;
          }
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    });

    test('it isolates an instance’s namespace under the guard; the chart’s webhook applies it', async () => {
      tenantNs = await createTestNamespace(admin, 'kpi-instance');
      namespaces.push(tenantNs);
      const placement = {
        nodeSelector: { pool: `${instance}-pool` },
        tolerations: [{ key: 'dedicated', operator: 'Equal', value: `${instance}-pool`, effect: 'NoSchedule' }],
      };
      await custom.createNamespacedCustomObject({
        ...widget,
        namespace: tenantNs,
        body: {
          apiVersion: `${INSTANCE_GROUP}/v1`,
          kind: 'Widget',
          metadata: {
            name: instance,
            annotations: {
              [NODE]: JSON.stringify(placement),
              [SANDBOX]: JSON.stringify({ minRuntimeClass: 'kata', enforce: true }),
            },
          },
        },
      });
      const core = admin.makeApiClient(CoreV1Api);
      await waitFor(
        `the operator to label namespace ${tenantNs}`,
        async (observe) => {
          const ns = await core.readNamespace({ name: tenantNs });
          observe(JSON.stringify({ labels: ns.metadata?.labels, annotations: ns.metadata?.annotations }));
          return (
            ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL] === 'true' &&
            ns.metadata.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION] !== undefined
          );
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      const node = admin.makeApiClient(NodeV1Api);
      await waitFor(
        'the operator to create the instance’s RuntimeClass and policies',
        async (observe) => {
          const classes = await node.listRuntimeClass({ labelSelector: owned() });
          const policies = await admin
            .makeApiClient(AdmissionregistrationV1Api)
            .listValidatingAdmissionPolicy({ labelSelector: owned() });
          observe(`${classes.items.length} RuntimeClasses, ${policies.items.length} policies`);
          return classes.items.length === 1 && classes.items[0]?.handler === 'kata' && policies.items.length > 0;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
      // The chart's webhook (running since the webhook test) now places the namespace's Pods.
      await waitFor(
        'Pods in the instance namespace to get the mandated placement',
        async () => {
          const pod = await core.createNamespacedPod({ namespace: tenantNs, body: testPod('placed'), dryRun: 'All' });
          return pod.spec?.nodeSelector?.pool === placement.nodeSelector.pool;
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      // A tenant can undo none of it.
      const cert = await cluster.issueClientCert(tenantUser, ['tenants']);
      const tenantKc = loadKubeConfig(
        cluster.writeKubeconfig(join(cluster.dir, `${tenantUser}-instance.kubeconfig`), tenantUser, cert),
      );
      await forbidden(
        tenantKc
          .makeApiClient(CoreV1Api)
          .patchNamespace(
            { name: tenantNs, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: null } } } },
            mergePatch,
          ),
      );
      const [runtimeClass] = (await node.listRuntimeClass({ labelSelector: owned() })).items;
      await forbidden(
        tenantKc.makeApiClient(NodeV1Api).deleteRuntimeClass({ name: runtimeClass?.metadata?.name ?? '' }),
      );
      // The policy engine's objects exist only where it is installed (Kubernetes 1.36+, POLICY_ENGINE).
      if (POLICY_ENGINE) {
        // The policy engine's parameter, written by the operator under the chart's RBAC ...
        const params = { group: 'isolation.kubeplus.io', version: 'v1alpha1', plural: 'nodeisolations' };
        const param = await waitFor(
          `the operator to write NodeIsolation ${tenantNs}/node-isolation`,
          async () => {
            try {
              return (await custom.getNamespacedCustomObject({
                ...params,
                namespace: tenantNs,
                name: 'node-isolation',
              })) as {
                spec: { nodeSelector: Record<string, string> };
              };
            } catch (error) {
              if (isApiStatus(error, 404)) return undefined;
              throw error;
            }
          },
          { timeoutMs: 30_000, intervalMs: 250 },
        );
        expect(param.spec.nodeSelector).toEqual(placement.nodeSelector);
        // ... which a tenant, even one RBAC lets write it, can neither weaken nor delete.
        const tenantCustom = tenantKc.makeApiClient(CustomObjectsApi);
        const weakened = await forbidden(
          tenantCustom.patchNamespacedCustomObject(
            { ...params, namespace: tenantNs, name: 'node-isolation', body: { spec: { nodeSelector: {} } } },
            mergePatch,
          ),
        );
        expect(weakened).toContain(`NodeIsolation ${tenantNs}/node-isolation is kubeplus-isolation state: UPDATE`);
        await forbidden(
          tenantCustom.deleteNamespacedCustomObject({ ...params, namespace: tenantNs, name: 'node-isolation' }),
        );
      }
    });

    test('a tenant that may update its instance cannot weaken its isolation or add the legacy finalizer', async () => {
      const cert = await cluster.issueClientCert(tenantUser, ['tenants']);
      const tenantCustom = loadKubeConfig(
        cluster.writeKubeconfig(join(cluster.dir, `${tenantUser}-widget.kubeconfig`), tenantUser, cert),
      ).makeApiClient(CustomObjectsApi);
      const at = { ...widget, namespace: tenantNs, name: instance };
      const patchAnnotations = (api: CustomObjectsApi, annotations: Record<string, string | null>) =>
        api.patchNamespacedCustomObject({ ...at, body: { metadata: { annotations } } }, mergePatch);
      const lowered = await forbidden(
        patchAnnotations(tenantCustom, { [SANDBOX]: JSON.stringify({ minRuntimeClass: 'runc', enforce: true }) }),
      );
      expect(lowered).toContain(
        `Widget ${tenantNs}/${instance}: annotation(s) ${SANDBOX} are the instance's isolation and may be set, changed or removed only by`,
      );
      expect(lowered).toContain(operatorUser());
      expect(lowered).toContain('system:masters');
      expect(await forbidden(patchAnnotations(tenantCustom, { [NODE]: null }))).toContain(`annotation(s) ${NODE}`);
      // The operator never writes the instance (issue 35): no finalizer. A tenant adding the one of
      // releases up to 0.2.0 (which would hold the instance's deletion) is refused.
      const current = (await custom.getNamespacedCustomObject(at)) as { metadata: { finalizers?: string[] } };
      expect(current.metadata.finalizers).toBeUndefined();
      const finalized = await forbidden(
        tenantCustom.patchNamespacedCustomObject(
          { ...at, body: [{ op: 'add', path: '/metadata/finalizers', value: [CLEANUP] }] },
          setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
        ),
      );
      expect(finalized).toContain(`Widget ${tenantNs}/${instance}: the finalizer ${CLEANUP}`);
      // Creating an instance that already names its own isolation is the same way in.
      const forged = await forbidden(
        tenantCustom.createNamespacedCustomObject({
          ...widget,
          namespace: tenantNs,
          body: {
            apiVersion: `${INSTANCE_GROUP}/v1`,
            kind: 'Widget',
            metadata: { name: `${instance}-forged`, annotations: { [NODE]: '{"nodeSelector":{"pool":"other"}}' } },
          },
        }),
      );
      expect(forged).toContain(`annotation(s) ${NODE}`);
      // Every other edit of its instance still passes, and so does creating one without isolation.
      await patchAnnotations(tenantCustom, { 'example.com/owner': 'alice' });
      await tenantCustom.patchNamespacedCustomObject(
        { ...at, body: { metadata: { labels: { team: 'a' } }, spec: { size: 2 } } },
        mergePatch,
      );
      await tenantCustom.createNamespacedCustomObject({
        ...widget,
        namespace: tenantNs,
        body: { apiVersion: `${INSTANCE_GROUP}/v1`, kind: 'Widget', metadata: { name: `${instance}-plain` } },
      });
      await tenantCustom.deleteNamespacedCustomObject({ ...widget, namespace: tenantNs, name: `${instance}-plain` });
      // The isolation stands as the platform wrote it.
      const after = (await custom.getNamespacedCustomObject(at)) as {
        metadata: { annotations: Record<string, string>; finalizers?: string[] };
      };
      expect(JSON.parse(after.metadata.annotations[SANDBOX] ?? '{}')).toEqual({
        minRuntimeClass: 'kata',
        enforce: true,
      });
      expect(after.metadata.annotations[NODE]).toBeDefined();
      expect(after.metadata.finalizers).toBeUndefined();
      const [runtimeClass] = (await admin.makeApiClient(NodeV1Api).listRuntimeClass({ labelSelector: owned() })).items;
      expect(runtimeClass?.handler).toBe('kata');
    });

    test('the platform’s identities may change an instance’s isolation', async () => {
      const at = { ...widget, namespace: tenantNs, name: instance };
      const set = (api: CustomObjectsApi, minRuntimeClass: string) =>
        api.patchNamespacedCustomObject(
          {
            ...at,
            body: { metadata: { annotations: { [SANDBOX]: JSON.stringify({ minRuntimeClass, enforce: true }) } } },
          },
          mergePatch,
        );
      // A cluster admin (system:masters).
      await set(custom, 'runsc');
      await set(custom, 'kata');
      // A user in tamperProtection.instances.exemptUsers, with the tenant's RBAC: may set the
      // instance's isolation, and still not the Namespace's (that guard is not widened).
      const cert = await cluster.issueClientCert(platformUser, ['platform']);
      const platformKc = loadKubeConfig(
        cluster.writeKubeconfig(join(cluster.dir, `${platformUser}.kubeconfig`), platformUser, cert),
      );
      const platform = platformKc.makeApiClient(CustomObjectsApi);
      await set(platform, 'runsc');
      await waitFor(
        'the operator to follow the platform’s new minimum (RuntimeClass handler runsc)',
        async () =>
          (await admin.makeApiClient(NodeV1Api).listRuntimeClass({ labelSelector: owned() })).items[0]?.handler ===
            'runsc' || undefined,
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      await set(platform, 'kata');
      // The platform may put the legacy finalizer back (as an upgrade from 0.2.0 leaves it); the
      // operator, under the chart's RBAC (patch), takes it off again.
      await platform.patchNamespacedCustomObject(
        { ...at, body: [{ op: 'add', path: '/metadata/finalizers', value: [CLEANUP] }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      );
      await waitFor(
        `the operator to remove the legacy finalizer ${CLEANUP}`,
        async (observe) => {
          const i = (await custom.getNamespacedCustomObject(at)) as { metadata: { finalizers?: string[] } };
          observe(i.metadata.finalizers);
          return !(i.metadata.finalizers ?? []).includes(CLEANUP);
        },
        { timeoutMs: 30_000, intervalMs: 250 },
      );
      await forbidden(
        platformKc
          .makeApiClient(CoreV1Api)
          .patchNamespace(
            { name: tenantNs, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: null } } } },
            mergePatch,
          ),
      );
    });

    test('an admission policy binding deleted behind its back is restored (admission cannot guard it)', async () => {
      const adm = admin.makeApiClient(AdmissionregistrationV1Api);
      const [binding] = (await adm.listValidatingAdmissionPolicyBinding({ labelSelector: owned() })).items;
      const name = binding?.metadata?.name ?? '';
      const uid = binding?.metadata?.uid;
      expect(name).not.toBe('');
      await adm.deleteValidatingAdmissionPolicyBinding({ name });
      await waitFor(
        `the operator to re-create ValidatingAdmissionPolicyBinding ${name}`,
        async () => {
          try {
            const again = await adm.readValidatingAdmissionPolicyBinding({ name });
            return again.metadata?.uid !== uid;
          } catch (error) {
            if (isApiStatus(error, 404)) return false;
            throw error;
          }
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    });

    test('deleting the instance (gone at once, no finalizer) removes what the operator created', async () => {
      await custom.deleteNamespacedCustomObject({ ...widget, namespace: tenantNs, name: instance });
      const core = admin.makeApiClient(CoreV1Api);
      const node = admin.makeApiClient(NodeV1Api);
      const adm = admin.makeApiClient(AdmissionregistrationV1Api);
      await waitFor(
        'the instance, its RuntimeClass, policies and namespace isolation to be gone',
        async (observe) => {
          let instanceGone = false;
          try {
            await custom.getNamespacedCustomObject({ ...widget, namespace: tenantNs, name: instance });
          } catch (error) {
            if (!isApiStatus(error, 404)) throw error;
            instanceGone = true;
          }
          const classes = (await node.listRuntimeClass({ labelSelector: owned() })).items.length;
          const policies =
            (await adm.listValidatingAdmissionPolicy({ labelSelector: owned() })).items.length +
            (await adm.listValidatingAdmissionPolicyBinding({ labelSelector: owned() })).items.length;
          const ns = await core.readNamespace({ name: tenantNs });
          const label = ns.metadata?.labels?.[NODE_ISOLATION_ENABLED_LABEL];
          observe(JSON.stringify({ instanceGone, classes, policies, label }));
          return instanceGone && classes === 0 && policies === 0 && label === undefined;
        },
        { timeoutMs: 60_000, intervalMs: 250 },
      );
    });

    test('nothing the operator did was refused by the API server (its RBAC is complete)', () => {
      const log = readFileSync(operatorProcess?.logPath ?? '', 'utf8');
      expect(log).toContain('informer caches synced');
      const refused = refusedLogLines(log);
      expect(refused).toEqual([]);
    });
  });

  test('nothing the webhook did was refused by the API server (its RBAC is complete)', () => {
    const log = readFileSync(webhook?.logPath ?? '', 'utf8');
    expect(log.length).toBeGreaterThan(0);
    expect(refusedLogLines(log)).toEqual([]);
  });

  test('helm upgrade keeps the CA and caBundle; a stale leaf is re-issued by the same CA', async () => {
    const before = await tlsSecret();
    const bundleBefore = await caBundle();
    await helm('upgrade', release, CHART, '--values', valuesFile());
    expect(await tlsSecret()).toEqual(before);
    expect(await caBundle()).toBe(bundleBefore);

    // renewBeforeDays beyond the leaf's lifetime makes the current leaf "expiring": new leaf, same CA.
    await helm('upgrade', release, CHART, '--values', valuesFile(), '--set', 'webhook.tls.renewBeforeDays=400');
    const after = await tlsSecret();
    expect(after['ca.crt']).toBe(before['ca.crt']);
    expect(after['ca.key']).toBe(before['ca.key']);
    expect(after['tls.crt']).not.toBe(before['tls.crt']);
    expect(after['tls.key']).not.toBe(before['tls.key']);
    expect(await caBundle()).toBe(bundleBefore);
    const ca = new X509Certificate(after['ca.crt'] as string);
    const leaf = new X509Certificate(after['tls.crt'] as string);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.subjectAltName).toContain('IP Address:127.0.0.1');
  });

  test('helm uninstall leaves nothing of the release behind, and the guard is gone', async () => {
    await webhook?.stop();
    webhook = undefined;
    // --no-hooks: nothing runs Pods on this control plane (the services are processes here), so the
    // pre-delete hook's Job could never run; chart-lifecycle.test.ts runs it on a real node.
    await helm('uninstall', release, '--no-hooks', '--wait', '--timeout', '120s');
    installed = false;
    const selector = `app.kubernetes.io/instance=${release}`;
    const adm = admin.makeApiClient(AdmissionregistrationV1Api);
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const core = admin.makeApiClient(CoreV1Api);
    const apps = admin.makeApiClient(AppsV1Api);
    await waitFor(
      `no object labeled ${selector} left`,
      async (observe) => {
        const left = [
          ...(await adm.listMutatingWebhookConfiguration({ labelSelector: selector })).items.map(
            (o) => `MWC/${o.metadata?.name}`,
          ),
          ...(await adm.listValidatingAdmissionPolicy({ labelSelector: selector })).items.map(
            (o) => `VAP/${o.metadata?.name}`,
          ),
          ...(await adm.listValidatingAdmissionPolicyBinding({ labelSelector: selector })).items.map(
            (o) => `VAPB/${o.metadata?.name}`,
          ),
          ...(await rbac.listClusterRole({ labelSelector: selector })).items.map(
            (o) => `ClusterRole/${o.metadata?.name}`,
          ),
          ...(await rbac.listClusterRoleBinding({ labelSelector: selector })).items.map(
            (o) => `ClusterRoleBinding/${o.metadata?.name}`,
          ),
          ...(await rbac.listNamespacedRole({ namespace: releaseNs })).items.map((o) => `Role/${o.metadata?.name}`),
          ...(await rbac.listNamespacedRoleBinding({ namespace: releaseNs })).items.map(
            (o) => `RoleBinding/${o.metadata?.name}`,
          ),
          ...(await apps.listNamespacedDeployment({ namespace: releaseNs })).items.map(
            (o) => `Deployment/${o.metadata?.name}`,
          ),
          ...(await apps.listNamespacedReplicaSet({ namespace: releaseNs })).items.map(
            (o) => `ReplicaSet/${o.metadata?.name}`,
          ),
          ...(await core.listNamespacedPod({ namespace: releaseNs })).items.map((o) => `Pod/${o.metadata?.name}`),
          ...(await core.listNamespacedService({ namespace: releaseNs })).items.map(
            (o) => `Service/${o.metadata?.name}`,
          ),
          ...(await core.listNamespacedSecret({ namespace: releaseNs })).items.map((o) => `Secret/${o.metadata?.name}`),
          ...(await core.listNamespacedServiceAccount({ namespace: releaseNs })).items
            .map((o) => o.metadata?.name)
            .filter((n) => n !== 'default')
            .map((n) => `ServiceAccount/${n}`),
          ...(await core.listNamespacedConfigMap({ namespace: releaseNs })).items
            .map((o) => o.metadata?.name)
            .filter((n) => n !== 'kube-root-ca.crt')
            .map((n) => `ConfigMap/${n}`),
        ];
        // The policy engine's CRD (and with it every NodeIsolation object) goes with the release.
        try {
          await admin
            .makeApiClient(ApiextensionsV1Api)
            .readCustomResourceDefinition({ name: 'nodeisolations.isolation.kubeplus.io' });
          left.push('CustomResourceDefinition/nodeisolations.isolation.kubeplus.io');
        } catch (error) {
          if (!isApiStatus(error, 404)) throw error;
        }
        observe(left.join(', '));
        return left.length === 0;
      },
      { timeoutMs: 120_000, intervalMs: 500 },
    );
    // With the policies gone, an unprivileged change is no longer denied by them.
    const cert = await cluster.issueClientCert(tenantUser, ['tenants']);
    const tenant = loadKubeConfig(
      cluster.writeKubeconfig(join(cluster.dir, `${tenantUser}-after.kubeconfig`), tenantUser, cert),
    ).makeApiClient(CoreV1Api);
    const plain = await createTestNamespace(admin, 'kpi-after');
    namespaces.push(plain);
    await waitFor(
      'the namespace guard to stop denying',
      async () => {
        try {
          await tenant.patchNamespace(
            { name: plain, body: { metadata: { labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' } } }, dryRun: 'All' },
            mergePatch,
          );
          return true;
        } catch (error) {
          if (isApiStatus(error, 403) && statusMessage(error).includes('ValidatingAdmissionPolicy')) return false;
          throw error;
        }
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
  });
});
