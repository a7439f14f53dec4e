/**
 * A STAND-IN for KubePlus in the e2e suites (not KubePlus: a faithful stand-in of its observable
 * behaviour, written from the contract restated in contract.ts, which holds every
 * decision; this file is the thin I/O around it):
 *
 * - its mutating webhook, an HTTPS server in the test process on 127.0.0.1, registered as KubePlus
 *   registers its own: `clientConfig.service` in KubePlus's namespace (the operator discovers that
 *   namespace from it), failurePolicy unset (`Fail`), timeoutSeconds 30, sideEffects None,
 *   namespaceSelector `managedby In [kubeplus]`, KubePlus's rules;
 * - the Service is `type: ExternalName` with `externalName: 127.0.0.1`. The shared control plane
 *   (fake nodes) runs without `--enable-aggregator-routing`, so the API server resolves a webhook
 *   Service with its ClusterIP resolver, which turns an ExternalName Service into
 *   `https://<externalName>:<port>` (k8s.io/apiserver/pkg/util/proxy.ResolveCluster): the call stays
 *   on loopback. A ClusterIP Service would send it to 10.0.0.x, off the host's default route, and
 *   an Endpoints/EndpointSlice at 127.0.0.1 is refused by validation ("may not be in the loopback
 *   range"). With aggregator routing (the real-node control planes) only endpoints are resolved and
 *   ExternalName is refused ("unsupported service type"): there, `registration: 'url'` registers
 *   the same webhook at `https://127.0.0.1:<port>/mutate` instead (no Service). A URL names no
 *   namespace, so the operator cannot discover KubePlus's namespace from it: set it
 *   (`--platform-namespace`, the chart's `operator.platformNamespace`);
 * - during an instance's CREATE admission, before answering: namespace `<instance>`, its
 *   annotation and label, the NetworkPolicies; then `helm install` (or `upgrade`) in the
 *   background with the harness's helm; after it, `status.helmrelease` by one GET + full Update;
 * - after an allowed DELETE admission, in the background: `helm delete`, then the namespace.
 *
 * It acts as its own user (`kubeplus-standin`, group system:masters), so its writes (the status
 * Update, which passes its own webhook like any UPDATE) are told apart from the operator's.
 *
 * ```ts
 * const kubeplus = await startKubePlusStandIn({ cluster, kinds: [{ kind: 'WebApp', plural: 'webapps' }] });
 * await kubeplus.idle();   // every background helm run finished
 * kubeplus.events;         // admissions, namespace work, helm runs, status writes, in order
 * await kubeplus.stop();   // its webhook down (the configuration stays: failurePolicy Fail)
 * await kubeplus.resume(); // up again on the same port
 * await kubeplus.cleanup();
 * ```
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMISSION_REVIEW_API_VERSION, ADMISSION_REVIEW_KIND } from '@kubeplus-isolation/spec';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1CustomResourceDefinition,
  type V1MutatingWebhookConfiguration,
  type V1NetworkPolicy,
  type V1NetworkPolicyPeer,
} from '@kubernetes/client-node';
import type { Cluster } from '../harness/cluster.js';
import { installCrds } from '../harness/crds.js';
import { loadKubeConfig } from '../harness/kubeconfig.js';
import { deleteNamespace } from '../harness/namespaces.js';
import { isApiStatus } from '../harness/node-api.js';
import { repoRoot } from '../harness/repo.js';
import { waitFor } from '../harness/wait.js';
import {
  CREATED_BY_LABEL,
  type Decision,
  decide,
  type FollowUp,
  helmReleaseStatus,
  isNameReuse,
  KUBEPLUS_MANAGED_BY_LABEL,
  KUBEPLUS_MANAGED_BY_VALUE,
  NETWORK_POLICY_NAMES,
  notesOf,
  REGISTERED_BY_LABEL,
  RELEASE_NAME_ANNOTATION,
  type ReviewRequest,
  releaseAnnotationValue,
  STANDIN_GROUP,
  STANDIN_VERSION,
  STANDIN_WEBHOOK_CONFIGURATION,
  STANDIN_WEBHOOK_NAME,
  STANDIN_WORKFLOWS_GROUP,
  type TargetNamespace,
  targetNamespace,
} from './contract.js';

export * from './contract.js';

/** The stand-in's own identity (a client certificate in group system:masters). */
export const STANDIN_USER = 'kubeplus-standin';
/** The webhook Service in KubePlus's namespace. */
export const STANDIN_SERVICE = 'kubeplus-standin-webhook';
/** The fixture chart every Kind installs unless it names another. */
export const TENANT_CHART = join(repoRoot(), 'e2e', 'fixtures', 'kubeplus-tenant-chart');
/** A chart whose install always fails (the failed-install path). */
export const FAILING_CHART = join(repoRoot(), 'e2e', 'fixtures', 'kubeplus-failing-chart');

export interface StandInKind {
  /** e.g. `WebApp` (KubePlus's Kinds are named by the ResourceComposition). */
  kind: string;
  /** e.g. `webapps` */
  plural: string;
  /** The chart its instances install (default TENANT_CHART). */
  chart?: string;
}

export interface StandInOptions {
  cluster: Cluster;
  /** KubePlus's namespace (default `default`, as KubePlus's README and CI install it). */
  kubeplusNamespace?: string;
  kinds: readonly StandInKind[];
  /**
   * How its webhook is registered: `service` (default) as KubePlus registers its own, through an
   * ExternalName Service to 127.0.0.1 (API servers without aggregator routing); `url`, at
   * `https://127.0.0.1:<port>/mutate` (any API server on this host, aggregator routing included).
   */
  registration?: StandInRegistration;
}

export type StandInRegistration = 'service' | 'url';

export type StandInEvent =
  | {
      type: 'admission';
      uid: string;
      operation: string;
      group: string;
      kind: string;
      namespace: string;
      name: string;
      user: string;
      dryRun: boolean;
      allowed: boolean;
      message?: string;
    }
  | {
      type: 'namespace';
      action: 'created' | 'existed' | 'deleted' | 'delete-failed';
      namespace: string;
      error?: string;
    }
  | {
      type: 'helm';
      verb: 'install' | 'upgrade' | 'delete';
      release: string;
      namespace: string;
      ok: boolean;
      output: string;
    }
  | { type: 'status'; namespace: string; name: string; written: boolean; error?: string };

export interface KubePlusStandIn {
  readonly kubeplusNamespace: string;
  /** What it did, in order (admissions, namespace work, helm runs, status writes). */
  readonly events: StandInEvent[];
  /** The admissions it answered (a view of `events`). */
  admissions(): Extract<StandInEvent, { type: 'admission' }>[];
  /** Resolves once every background helm run (and what follows it) has finished. */
  idle(): Promise<void>;
  /** Its webhook down: the server closes, the configuration stays (failurePolicy Fail applies). */
  stop(): Promise<void>;
  /** Its webhook up again on the same port. */
  resume(): Promise<void>;
  /** Webhook configuration, Service, CRDs, namespaces it created and its label on KubePlus's namespace removed. */
  cleanup(): Promise<void>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** The CRD of a Kind as KubePlus registers it: v1alpha1, Namespaced, no status subresource. */
export function standInKindCrd(k: StandInKind): V1CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${k.plural}.${STANDIN_GROUP}`, labels: { [REGISTERED_BY_LABEL]: 'kubeplus' } },
    spec: {
      group: STANDIN_GROUP,
      names: { kind: k.kind, plural: k.plural, singular: k.kind.toLowerCase(), listKind: `${k.kind}List` },
      scope: 'Namespaced',
      versions: [
        {
          name: STANDIN_VERSION,
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                spec: { type: 'object', x_kubernetes_preserve_unknown_fields: true },
                status: {
                  type: 'object',
                  properties: { helmrelease: { type: 'string' }, error: { type: 'string' } },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/** KubePlus's MutatingWebhookConfiguration, pointing at the stand-in's Service (or its URL). */
export function standInWebhookConfiguration(
  kubeplusNamespace: string,
  port: number,
  caPem: string,
  registration: StandInRegistration = 'service',
): V1MutatingWebhookConfiguration {
  const everyResource = (groups: string[], operations: string[]) => ({
    apiGroups: groups,
    apiVersions: [STANDIN_VERSION],
    operations,
    resources: ['*'],
  });
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: STANDIN_WEBHOOK_CONFIGURATION },
    webhooks: [
      {
        name: STANDIN_WEBHOOK_NAME,
        clientConfig: {
          ...(registration === 'url'
            ? { url: `https://127.0.0.1:${port}/mutate` }
            : { service: { namespace: kubeplusNamespace, name: STANDIN_SERVICE, path: '/mutate', port } }),
          caBundle: Buffer.from(caPem, 'utf8').toString('base64'),
        },
        // failurePolicy deliberately unset: the API server's default, Fail, as KubePlus's.
        timeoutSeconds: 30,
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        namespaceSelector: {
          matchExpressions: [{ key: KUBEPLUS_MANAGED_BY_LABEL, operator: 'In', values: [KUBEPLUS_MANAGED_BY_VALUE] }],
        },
        rules: [
          {
            apiGroups: ['apiextensions.k8s.io'],
            apiVersions: ['v1'],
            operations: ['CREATE'],
            resources: ['customresourcedefinitions'],
          },
          { apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['namespaces'] },
          everyResource([STANDIN_GROUP, STANDIN_WORKFLOWS_GROUP], ['CREATE', 'UPDATE', 'DELETE']),
        ],
      },
    ],
  };
}

interface RawReview {
  request?: {
    uid?: string;
    operation?: ReviewRequest['operation'];
    kind?: { group?: string; kind?: string };
    resource?: { resource?: string };
    namespace?: string;
    name?: string;
    dryRun?: boolean;
    userInfo?: { username?: string };
    object?: ReviewRequest['object'];
    oldObject?: ReviewRequest['oldObject'];
  };
}

export async function startKubePlusStandIn(opts: StandInOptions): Promise<KubePlusStandIn> {
  const { cluster } = opts;
  const kubeplusNamespace = opts.kubeplusNamespace ?? 'default';
  const registration = opts.registration ?? 'service';
  const dir = mkdtempSync(join(tmpdir(), 'kubeplus-standin-'));
  const kubeconfigPath = cluster.writeKubeconfig(
    join(dir, 'kubeconfig'),
    STANDIN_USER,
    await cluster.issueClientCert(STANDIN_USER, ['system:masters']),
  );
  const kc: KubeConfig = loadKubeConfig(kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const net = kc.makeApiClient(NetworkingV1Api);
  const admin = cluster.kc;
  const helmBin = join(cluster.state.assetsDir, 'helm');
  const kinds = new Map(opts.kinds.map((k) => [k.kind, k]));
  const events: StandInEvent[] = [];
  const pending = new Set<Promise<void>>();
  const createdNamespaces = new Set<string>();

  const background = (work: () => Promise<void>): void => {
    const p = work().finally(() => pending.delete(p));
    pending.add(p);
  };

  const helm = (args: string[]): Promise<{ ok: boolean; output: string; stderr: string }> =>
    new Promise((resolve) => {
      execFile(
        helmBin,
        [...args, '--kubeconfig', kubeconfigPath],
        {
          maxBuffer: 16 * 1024 * 1024,
          env: {
            ...process.env,
            HELM_CACHE_HOME: join(dir, 'helm-cache'),
            HELM_CONFIG_HOME: join(dir, 'helm-config'),
            HELM_DATA_HOME: join(dir, 'helm-data'),
          },
        },
        (error, stdout, stderr) =>
          resolve({ ok: error === null, output: `${stdout}${stderr}`, stderr: String(stderr).trim() }),
      );
    });

  const readTarget = async (name: string): Promise<TargetNamespace> => {
    try {
      const ns = await core.readNamespace({ name });
      return {
        exists: true,
        terminating: ns.status?.phase === 'Terminating' || ns.metadata?.deletionTimestamp !== undefined,
        ...(ns.metadata?.annotations?.[RELEASE_NAME_ANNOTATION] === undefined
          ? {}
          : { releaseAnnotation: ns.metadata.annotations[RELEASE_NAME_ANNOTATION] }),
      };
    } catch (error) {
      if (isApiStatus(error, 404)) return { exists: false, terminating: false };
      throw error;
    }
  };

  const deleteTenantNamespace = async (namespace: string): Promise<void> => {
    try {
      await core.deleteNamespace({ name: namespace });
      events.push({ type: 'namespace', action: 'deleted', namespace });
    } catch (error) {
      events.push({ type: 'namespace', action: 'delete-failed', namespace, error: String(error) });
    }
  };

  /** Synchronous part of a deploy: namespace (created if absent), annotation + label, NetworkPolicies. */
  const prepareNamespace = async (f: Extract<FollowUp, { kind: 'deploy' }>): Promise<void> => {
    if (f.createNamespace) {
      // Created bare, then annotated and labeled, as `kubectl create ns` and two later commands would.
      await core.createNamespace({ body: { metadata: { name: f.namespace } } });
      createdNamespaces.add(f.namespace);
      events.push({ type: 'namespace', action: 'created', namespace: f.namespace });
    } else {
      events.push({ type: 'namespace', action: 'existed', namespace: f.namespace });
    }
    await core.patchNamespace(
      {
        name: f.namespace,
        body: {
          metadata: {
            annotations: { [RELEASE_NAME_ANNOTATION]: releaseAnnotationValue(f.release) },
            labels: { [KUBEPLUS_MANAGED_BY_LABEL]: KUBEPLUS_MANAGED_BY_VALUE },
          },
        },
      },
      mergePatch,
    );
    for (const name of NETWORK_POLICY_NAMES) {
      // Contents are the stand-in's own (the contract names the policies only): same-namespace
      // ingress, and ingress from anywhere outside the cluster's Pods.
      const peer: V1NetworkPolicyPeer =
        name === 'restrict-cross-ns-traffic' ? { podSelector: {} } : { ipBlock: { cidr: '0.0.0.0/0' } };
      const body: V1NetworkPolicy = {
        metadata: { name },
        spec: { podSelector: {}, policyTypes: ['Ingress'], ingress: [{ _from: [peer] }] },
      };
      try {
        await net.createNamespacedNetworkPolicy({ namespace: f.namespace, body });
      } catch (error) {
        if (!isApiStatus(error, 409)) throw error;
      }
    }
  };

  /** Background part of a deploy: helm, then the status (one GET, one full Update, no retry) or the cleanup. */
  const runHelm = async (
    f: Extract<FollowUp, { kind: 'deploy' }>,
    instance: { namespace: string; name: string; plural: string; chart: string },
  ): Promise<void> => {
    const result = await helm([f.helm, f.release, instance.chart, '--namespace', f.namespace]);
    events.push({
      type: 'helm',
      verb: f.helm,
      release: f.release,
      namespace: f.namespace,
      ok: result.ok,
      output: result.output,
    });
    if (!result.ok) {
      if (f.helm === 'install' && !isNameReuse(result.output)) await deleteTenantNamespace(f.namespace);
      return;
    }
    const ref = {
      group: STANDIN_GROUP,
      version: STANDIN_VERSION,
      plural: instance.plural,
      namespace: instance.namespace,
      name: instance.name,
    };
    try {
      const current = (await custom.getNamespacedCustomObject(ref)) as { status?: Record<string, unknown> };
      const body = {
        ...current,
        status: { ...current.status, helmrelease: helmReleaseStatus(f.namespace, f.release, notesOf(result.output)) },
      };
      await custom.replaceNamespacedCustomObject({ ...ref, body });
      events.push({ type: 'status', namespace: instance.namespace, name: instance.name, written: true });
    } catch (error) {
      events.push({
        type: 'status',
        namespace: instance.namespace,
        name: instance.name,
        written: false,
        error: String(error),
      });
    }
  };

  const runUndeploy = async (f: Extract<FollowUp, { kind: 'undeploy' }>): Promise<void> => {
    const result = await helm(['delete', f.release, '--namespace', f.namespace]);
    events.push({
      type: 'helm',
      verb: 'delete',
      release: f.release,
      namespace: f.namespace,
      ok: result.ok,
      output: result.output,
    });
    // "If that printed no error": a non-zero exit or anything on stderr.
    if (result.ok && result.stderr === '') await deleteTenantNamespace(f.namespace);
  };

  const review = async (raw: RawReview): Promise<{ decision: Decision; uid: string }> => {
    const r = raw.request ?? {};
    const request: ReviewRequest = {
      uid: r.uid ?? '',
      operation: r.operation ?? 'CONNECT',
      group: r.kind?.group ?? '',
      kind: r.kind?.kind ?? '',
      ...(r.namespace === undefined ? {} : { namespace: r.namespace }),
      ...(r.name === undefined ? {} : { name: r.name }),
      username: r.userInfo?.username ?? '',
      ...(r.object === undefined ? {} : { object: r.object }),
      ...(r.oldObject === undefined ? {} : { oldObject: r.oldObject }),
    };
    const name = request.name || request.object?.metadata?.name || request.oldObject?.metadata?.name || '';
    const isInstance = request.group === STANDIN_GROUP && request.namespace !== undefined && request.namespace !== '';
    let decision: Decision;
    try {
      const target =
        isInstance && request.operation !== 'DELETE'
          ? await readTarget(targetNamespace(kubeplusNamespace, request.namespace ?? '', name))
          : undefined;
      decision = decide(request, kubeplusNamespace, target);
      const dryRun = r.dryRun === true;
      if (decision.allowed && !dryRun) {
        const f = decision.followUp;
        if (f.kind === 'deploy') {
          await prepareNamespace(f);
          const k = kinds.get(request.kind);
          const instance = {
            namespace: request.namespace ?? '',
            name,
            plural: k?.plural ?? r.resource?.resource ?? '',
            chart: k?.chart ?? TENANT_CHART,
          };
          background(() => runHelm(f, instance));
        } else if (f.kind === 'undeploy') {
          background(() => runUndeploy(f));
        }
      }
    } catch (error) {
      decision = { allowed: false, message: `KubePlus stand-in: ${String(error)}`, followUp: { kind: 'none' } };
    }
    events.push({
      type: 'admission',
      uid: request.uid,
      operation: request.operation,
      group: request.group,
      kind: request.kind,
      namespace: request.namespace ?? '',
      name,
      user: request.username,
      dryRun: r.dryRun === true,
      allowed: decision.allowed,
      ...(decision.allowed ? {} : { message: decision.message }),
    });
    return { decision, uid: request.uid };
  };

  const serving = await cluster.issueServingCert([`${STANDIN_SERVICE}.${kubeplusNamespace}.svc`, '127.0.0.1']);
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      let raw: RawReview;
      try {
        raw = JSON.parse(Buffer.concat(chunks).toString('utf8')) as RawReview;
      } catch {
        res.writeHead(400).end('not an AdmissionReview');
        return;
      }
      void review(raw).then(({ decision, uid }) => {
        const response = decision.allowed
          ? {
              uid,
              allowed: true,
              ...(decision.patch.length > 0 && {
                patchType: 'JSONPatch',
                patch: Buffer.from(JSON.stringify(decision.patch)).toString('base64'),
              }),
            }
          : { uid, allowed: false, status: { code: 403, message: decision.message } };
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ apiVersion: ADMISSION_REVIEW_API_VERSION, kind: ADMISSION_REVIEW_KIND, response }));
      });
    });
  });
  const listen = (port: number): Promise<number> =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        const address = server.address();
        if (address === null || typeof address === 'string') reject(new Error('KubePlus stand-in has no port'));
        else resolve(address.port);
      });
    });
  const port = await listen(0);
  let listening = true;
  const close = async (): Promise<void> => {
    if (!listening) return;
    listening = false;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections(); // the API server keeps its connections alive
    await closed;
  };

  // KubePlus's namespace: exists (default does), labeled managedby=kubeplus as KubePlus's setup does.
  let createdKubeplusNamespace = false;
  let labeledKubeplusNamespace = false;
  try {
    const ns = await admin.makeApiClient(CoreV1Api).readNamespace({ name: kubeplusNamespace });
    labeledKubeplusNamespace = ns.metadata?.labels?.[KUBEPLUS_MANAGED_BY_LABEL] !== KUBEPLUS_MANAGED_BY_VALUE;
  } catch (error) {
    if (!isApiStatus(error, 404)) throw error;
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: kubeplusNamespace } } });
    createdKubeplusNamespace = true;
    labeledKubeplusNamespace = true;
  }
  await admin.makeApiClient(CoreV1Api).patchNamespace(
    {
      name: kubeplusNamespace,
      body: { metadata: { labels: { [KUBEPLUS_MANAGED_BY_LABEL]: KUBEPLUS_MANAGED_BY_VALUE } } },
    },
    mergePatch,
  );
  const service = {
    metadata: { name: STANDIN_SERVICE, labels: { app: 'kubeplus-standin' } },
    spec: { type: 'ExternalName', externalName: '127.0.0.1' },
  };
  try {
    if (registration === 'service')
      await admin.makeApiClient(CoreV1Api).createNamespacedService({ namespace: kubeplusNamespace, body: service });
  } catch (error) {
    if (!isApiStatus(error, 409)) throw error;
    await admin.makeApiClient(CoreV1Api).replaceNamespacedService({
      namespace: kubeplusNamespace,
      name: STANDIN_SERVICE,
      body: {
        ...service,
        metadata: {
          ...service.metadata,
          resourceVersion: (
            await admin
              .makeApiClient(CoreV1Api)
              .readNamespacedService({ namespace: kubeplusNamespace, name: STANDIN_SERVICE })
          ).metadata?.resourceVersion,
        },
      },
    });
  }
  const admission = admin.makeApiClient(AdmissionregistrationV1Api);
  const config = standInWebhookConfiguration(kubeplusNamespace, port, cluster.caPem, registration);
  try {
    await admission.createMutatingWebhookConfiguration({ body: config });
  } catch (error) {
    if (!isApiStatus(error, 409)) throw error;
    const current = await admission.readMutatingWebhookConfiguration({ name: STANDIN_WEBHOOK_CONFIGURATION });
    await admission.replaceMutatingWebhookConfiguration({
      name: STANDIN_WEBHOOK_CONFIGURATION,
      body: { ...config, metadata: { ...config.metadata, resourceVersion: current.metadata?.resourceVersion } },
    });
  }
  const crds = opts.kinds.map(standInKindCrd);
  await installCrds(admin, crds);

  // The API server loads webhook configurations asynchronously: wait until a dry-run CREATE of an
  // instance comes back with the stand-in's patch (dry-run: the stand-in does nothing else).
  const [probeKind] = opts.kinds;
  if (probeKind !== undefined) {
    await waitFor(
      'the KubePlus stand-in webhook to answer a dry-run instance CREATE',
      async (observe) => {
        try {
          const created = (await custom.createNamespacedCustomObject({
            group: STANDIN_GROUP,
            version: STANDIN_VERSION,
            plural: probeKind.plural,
            namespace: kubeplusNamespace,
            body: {
              apiVersion: `${STANDIN_GROUP}/${STANDIN_VERSION}`,
              kind: probeKind.kind,
              metadata: { name: 'standin-probe' },
            },
            dryRun: 'All',
          })) as { metadata?: { labels?: Record<string, string> } };
          observe(created.metadata);
          return created.metadata?.labels?.[CREATED_BY_LABEL] === 'kubeplus';
        } catch (error) {
          observe(String(error));
          return false;
        }
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  }

  const idle = async (): Promise<void> => {
    while (pending.size > 0) await Promise.allSettled([...pending]);
  };

  return {
    kubeplusNamespace,
    events,
    admissions: () => events.filter((e): e is Extract<StandInEvent, { type: 'admission' }> => e.type === 'admission'),
    idle,
    stop: close,
    async resume() {
      if (listening) return;
      await listen(port);
      listening = true;
    },
    async cleanup() {
      await idle();
      await close();
      const ignore404 = (error: unknown) => {
        if (!isApiStatus(error, 404)) throw error;
      };
      await admission.deleteMutatingWebhookConfiguration({ name: STANDIN_WEBHOOK_CONFIGURATION }).catch(ignore404);
      await admin
        .makeApiClient(CoreV1Api)
        .deleteNamespacedService({ namespace: kubeplusNamespace, name: STANDIN_SERVICE })
        .catch(ignore404);
      // Instances left with a finalizer (e.g. by an operator no longer running) would hold their
      // CRD Terminating in the shared cluster: strip them (the webhook is gone by now).
      const adminCustom = admin.makeApiClient(CustomObjectsApi);
      for (const k of opts.kinds) {
        const list = (await adminCustom
          .listClusterCustomObject({ group: STANDIN_GROUP, version: STANDIN_VERSION, plural: k.plural })
          .catch(() => ({ items: [] }))) as {
          items: { metadata: { name: string; namespace: string; finalizers?: string[] } }[];
        };
        for (const item of list.items.filter((i) => (i.metadata.finalizers ?? []).length > 0)) {
          await adminCustom
            .patchNamespacedCustomObject(
              {
                group: STANDIN_GROUP,
                version: STANDIN_VERSION,
                plural: k.plural,
                namespace: item.metadata.namespace,
                name: item.metadata.name,
                body: { metadata: { finalizers: null } },
              },
              mergePatch,
            )
            .catch(ignore404);
        }
      }
      const ext = admin.makeApiClient(ApiextensionsV1Api);
      for (const crd of crds) {
        await ext.deleteCustomResourceDefinition({ name: crd.metadata?.name ?? '' }).catch(ignore404);
      }
      await Promise.all(
        [...createdNamespaces, ...(createdKubeplusNamespace ? [kubeplusNamespace] : [])].map((ns) =>
          deleteNamespace(admin, ns),
        ),
      );
      if (labeledKubeplusNamespace && !createdKubeplusNamespace) {
        await admin
          .makeApiClient(CoreV1Api)
          .patchNamespace(
            { name: kubeplusNamespace, body: { metadata: { labels: { [KUBEPLUS_MANAGED_BY_LABEL]: null } } } },
            mergePatch,
          )
          .catch(ignore404);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
