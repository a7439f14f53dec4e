/**
 * The two Deployments: the `restricted` Pod Security Standard field by field, explicit and
 * short-lived API credentials, independent sizing of webhook and operator, availability
 * settings, and the operator's leader election wiring.
 */
import { describe, expect, jest, test } from '@jest/globals';
import { imageRepository, PROJECT, readVersion } from '../../scripts/release/release.js';
import { parseConfig as parseOperatorConfig } from '../../services/operator/src/config.js';
import { parseConfig as parseWebhookConfig } from '../../services/webhook/src/config.js';
import { type K8sObject, NAMESPACE, one, RELEASE, REPO_ROOT, render, renderError } from './helm.js';

jest.setTimeout(60_000);

interface Container {
  name: string;
  image: string;
  args?: string[];
  ports?: { name: string; containerPort: number; hostPort?: number }[];
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}

interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  ephemeralContainers?: Container[];
  securityContext?: Record<string, unknown>;
  volumes?: Record<string, unknown>[];
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  automountServiceAccountToken?: boolean;
  serviceAccountName: string;
  priorityClassName?: string;
  topologySpreadConstraints?: unknown[];
  affinity?: Record<string, unknown>;
}

function podSpec(deployment: K8sObject): PodSpec {
  return (deployment.spec as { template: { spec: PodSpec } }).template.spec;
}

function deploymentSpec(deployment: K8sObject): { replicas?: number } {
  return deployment.spec as { replicas?: number };
}

/** Volume types the restricted standard allows (Pod Security Standards, "Volume Types"). */
const RESTRICTED_VOLUME_TYPES = new Set([
  'configMap',
  'csi',
  'downwardAPI',
  'emptyDir',
  'ephemeral',
  'persistentVolumeClaim',
  'projected',
  'secret',
]);

/** Checks one Pod spec against every control of the baseline and restricted standards it can violate. */
function expectRestricted(spec: PodSpec, what: string): void {
  const pod = spec.securityContext ?? {};
  expect({ what, hostNetwork: spec.hostNetwork, hostPID: spec.hostPID, hostIPC: spec.hostIPC }).toEqual({ what });
  expect({ what, seccomp: (pod.seccompProfile as { type?: string } | undefined)?.type }).toEqual({
    what,
    seccomp: 'RuntimeDefault',
  });
  expect(pod.runAsNonRoot).toBe(true);
  expect(pod.runAsUser).toBe(65532);
  expect(pod.sysctls).toBeUndefined();
  for (const volume of spec.volumes ?? []) {
    const types = Object.keys(volume).filter((k) => k !== 'name');
    expect({ what, types }).toEqual({ what, types: [expect.stringMatching(/.*/)] });
    expect(RESTRICTED_VOLUME_TYPES.has(types[0] as string)).toBe(true);
  }
  const containers = [...spec.containers, ...(spec.initContainers ?? []), ...(spec.ephemeralContainers ?? [])];
  expect(containers.length).toBeGreaterThan(0);
  for (const c of containers) {
    const sc = c.securityContext ?? {};
    const label = `${what}/${c.name}`;
    expect({ label, privileged: sc.privileged ?? false }).toEqual({ label, privileged: false });
    expect({ label, allowPrivilegeEscalation: sc.allowPrivilegeEscalation }).toEqual({
      label,
      allowPrivilegeEscalation: false,
    });
    expect({ label, readOnlyRootFilesystem: sc.readOnlyRootFilesystem }).toEqual({
      label,
      readOnlyRootFilesystem: true,
    });
    expect(sc.runAsNonRoot).toBe(true);
    expect(sc.runAsUser).toBe(65532);
    expect((sc.capabilities as { drop?: string[]; add?: string[] }).drop).toEqual(['ALL']);
    expect((sc.capabilities as { add?: string[] }).add).toBeUndefined();
    expect((sc.seccompProfile as { type: string }).type).toBe('RuntimeDefault');
    expect(sc.procMount).toBeUndefined();
    expect(sc.seLinuxOptions).toBeUndefined();
    expect(sc.windowsOptions).toBeUndefined();
    for (const port of c.ports ?? []) expect(port.hostPort).toBeUndefined();
    for (const mount of c.volumeMounts ?? []) {
      if (mount.mountPath !== '/tmp')
        expect({ label, mount: mount.name, readOnly: mount.readOnly }).toEqual({
          label,
          mount: mount.name,
          readOnly: true,
        });
    }
  }
}

describe('Deployments', () => {
  test('every Pod template meets the restricted Pod Security Standard', async () => {
    const objects = await render();
    const deployments = objects.filter((o) => o.kind === 'Deployment');
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual([`${RELEASE}-operator`, `${RELEASE}-webhook`]);
    for (const d of deployments) expectRestricted(podSpec(d), d.metadata.name);
  });

  test('API credentials: no automount, an explicit expiring projected token, SA without automount', async () => {
    const objects = await render();
    for (const name of [`${RELEASE}-webhook`, `${RELEASE}-operator`]) {
      const spec = podSpec(one(objects, 'Deployment', name));
      expect(spec.automountServiceAccountToken).toBe(false);
      expect(spec.serviceAccountName).toBe(name);
      const projected = (spec.volumes ?? []).find((v) => v.name === 'kube-api-access')?.projected as {
        sources: Record<string, { expirationSeconds?: number; audience?: string }>[];
      };
      const token = projected.sources.find((s) => 'serviceAccountToken' in s)?.serviceAccountToken;
      expect(token?.expirationSeconds).toBeLessThanOrEqual(3607);
      expect(token?.audience).toBeUndefined(); // the API server's own audience
      const mount = spec.containers[0]?.volumeMounts?.find((m) => m.name === 'kube-api-access');
      expect(mount).toEqual({
        name: 'kube-api-access',
        mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
        readOnly: true,
      });
      expect(one(objects, 'ServiceAccount', name).automountServiceAccountToken).toBe(false);
    }
  });

  test('the webhook mounts only its serving certificate and key, read-only, from the TLS Secret', async () => {
    const tlsVolume = (objects: K8sObject[]) =>
      (podSpec(one(objects, 'Deployment', `${RELEASE}-webhook`)).volumes ?? []).find((v) => v.name === 'tls')
        ?.secret as { secretName: string; optional?: boolean; items: { key: string; path: string }[] };
    // tls.mode=helm (and cert-manager): the -tls Secret.
    for (const webhook of [{ tls: { mode: 'helm' } }, { certManager: { enabled: true } }]) {
      const tls = tlsVolume(await render({ webhook }));
      expect(tls.secretName).toBe(`${RELEASE}-webhook-tls`);
      expect(tls.items.map((i) => i.key).sort()).toEqual(['tls.crt', 'tls.key']);
    }
    // tls.mode=operator (default): the Secret the operator fills; not optional, so a Pod waits for it.
    const objects = await render();
    const spec = podSpec(one(objects, 'Deployment', `${RELEASE}-webhook`));
    const tls = tlsVolume(objects);
    expect(tls.secretName).toBe(`${RELEASE}-webhook-certs`);
    expect(tls.optional).toBeUndefined();
    expect(tls.items.map((i) => i.key).sort()).toEqual(['tls.crt', 'tls.key']);
    const container = spec.containers[0] as Container;
    const mount = container.volumeMounts?.find((m) => m.name === 'tls');
    expect(mount?.readOnly).toBe(true);
    expect(container.args).toEqual(
      expect.arrayContaining([
        `--tls-cert-file=${mount?.mountPath}/tls.crt`,
        `--tls-key-file=${mount?.mountPath}/tls.key`,
      ]),
    );
    // The operator mounts no webhook key (it writes the -certs Secret through the API, by name).
    const operator = podSpec(one(objects, 'Deployment', `${RELEASE}-operator`));
    expect(JSON.stringify(operator.volumes)).not.toContain('-tls');
    expect(JSON.stringify(operator.volumes)).not.toContain('-certs');
  });

  test('replicas, HPA, PDB and priority of the webhook are independent of the operator’s', async () => {
    const base = await render();
    expect(deploymentSpec(one(base, 'Deployment', `${RELEASE}-webhook`)).replicas).toBe(2);
    expect(deploymentSpec(one(base, 'Deployment', `${RELEASE}-operator`)).replicas).toBe(2);
    expect(base.filter((o) => o.kind === 'HorizontalPodAutoscaler')).toEqual([]);

    const scaled = await render({
      webhook: {
        autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 9 },
        priorityClassName: 'system-cluster-critical',
        podDisruptionBudget: { enabled: true, minAvailable: 2 },
      },
      operator: { replicas: 3, priorityClassName: 'platform-low' },
    });
    const webhook = one(scaled, 'Deployment', `${RELEASE}-webhook`);
    const operator = one(scaled, 'Deployment', `${RELEASE}-operator`);
    // With an HPA the Deployment leaves replicas to it.
    expect(deploymentSpec(webhook).replicas).toBeUndefined();
    expect(deploymentSpec(operator).replicas).toBe(3);
    const hpa = one(scaled, 'HorizontalPodAutoscaler');
    expect(hpa.apiVersion).toBe('autoscaling/v2');
    expect(hpa.spec).toEqual(
      expect.objectContaining({
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: `${RELEASE}-webhook` },
        minReplicas: 3,
        maxReplicas: 9,
      }),
    );
    expect(podSpec(webhook).priorityClassName).toBe('system-cluster-critical');
    expect(podSpec(operator).priorityClassName).toBe('platform-low');
    const pdbs = Object.fromEntries(
      scaled.filter((o) => o.kind === 'PodDisruptionBudget').map((p) => [p.metadata.name, p.spec]),
    );
    expect(pdbs[`${RELEASE}-webhook`]).toEqual(expect.objectContaining({ minAvailable: 2 }));
    expect(pdbs[`${RELEASE}-operator`]).toEqual(expect.objectContaining({ maxUnavailable: 1 }));
  });

  test('an HPA whose minimum exceeds its maximum is refused with a clear message', async () => {
    const stderr = await renderError({ webhook: { autoscaling: { enabled: true, minReplicas: 5, maxReplicas: 2 } } });
    expect(stderr).toContain('webhook.autoscaling.minReplicas (5) must not exceed webhook.autoscaling.maxReplicas (2)');
  });

  test('replicas spread over zones and nodes by default, and the spread is replaceable', async () => {
    const objects = await render();
    for (const name of [`${RELEASE}-webhook`, `${RELEASE}-operator`]) {
      const spec = podSpec(one(objects, 'Deployment', name));
      const keys = (spec.topologySpreadConstraints as { topologyKey: string; labelSelector: unknown }[]).map(
        (t) => t.topologyKey,
      );
      expect(keys).toEqual(['topology.kubernetes.io/zone', 'kubernetes.io/hostname']);
      expect(spec.affinity?.podAntiAffinity).toBeDefined();
    }
    const custom = [{ maxSkew: 2, topologyKey: 'rack', whenUnsatisfiable: 'DoNotSchedule', labelSelector: {} }];
    const replaced = await render({ webhook: { topologySpreadConstraints: custom, podAntiAffinity: 'none' } });
    const webhook = podSpec(one(replaced, 'Deployment', `${RELEASE}-webhook`));
    expect(webhook.topologySpreadConstraints).toEqual(custom);
    expect(webhook.affinity).toBeUndefined();
    // ... and the operator keeps its own defaults.
    const operator = podSpec(one(replaced, 'Deployment', `${RELEASE}-operator`));
    expect(operator.topologySpreadConstraints).toHaveLength(2);
  });

  test('the operator elects a leader on a Lease in the release namespace', async () => {
    const objects = await render({ operator: { leaderElection: { leaseName: 'isolation-leader' } } });
    const spec = podSpec(one(objects, 'Deployment', `${RELEASE}-operator`));
    const container = spec.containers[0] as Container & { env?: { name: string; valueFrom?: unknown }[] };
    expect(container.args).toEqual(
      expect.arrayContaining([
        '--leader-elect=true',
        '--leader-election-namespace=$(POD_NAMESPACE)',
        '--leader-election-id=isolation-leader',
      ]),
    );
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
        // The operator's own Pod is the object of its ReportsApiUnavailable Event.
        { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
      ]),
    );
    const lease = one(objects, 'Role', `${RELEASE}-operator-leader-election`);
    expect(lease.metadata.namespace).toBe(NAMESPACE);
    expect(JSON.stringify(lease.rules)).toContain('"resourceNames":["isolation-leader"]');
  });

  test('images follow appVersion, tag and digest', async () => {
    const image = (objects: K8sObject[], name: string) =>
      (podSpec(one(objects, 'Deployment', name)).containers[0] as Container).image;
    const defaults = await render();
    // This project's own images, at the one version (VERSION: scripts/release/release.ts).
    const version = readVersion(REPO_ROOT);
    const stamp = { version, ...PROJECT };
    expect(image(defaults, `${RELEASE}-webhook`)).toBe(`${imageRepository(stamp, 'webhook')}:${version}`);
    expect(image(defaults, `${RELEASE}-operator`)).toBe(`${imageRepository(stamp, 'operator')}:${version}`);
    const digest = `sha256:${'a'.repeat(64)}`;
    const pinned = await render({
      webhook: { image: { repository: 'registry.local:5000/wh', tag: 'dev' } },
      operator: { image: { repository: 'registry.local:5000/op', digest } },
    });
    expect(image(pinned, `${RELEASE}-webhook`)).toBe('registry.local:5000/wh:dev');
    expect(image(pinned, `${RELEASE}-operator`)).toBe(`registry.local:5000/op@${digest}`);
  });

  test('the rendered args are accepted by the services’ own flag parsers and mean what the values say', async () => {
    const objects = await render({
      webhook: { containerPort: 9443, metrics: { port: 9090 }, logLevel: 'debug', liveLookupTimeoutMs: 750 },
      operator: {
        platformNamespace: 'kubeplus-platform',
        instanceKinds: ['cloudark.io/v1/Agent', 'platformapi.kubeplus'],
        instanceGroups: [
          { group: 'cloudark.io', resources: ['agents'] },
          { group: 'platformapi.kubeplus', resources: ['wordpressservices'] },
        ],
        leaderElection: { leaseDuration: '20s', renewDeadline: '12s', retryPeriod: '3s' },
        metrics: { port: 9191 },
        webhookCertificates: { caValidity: '17520h', certValidity: '720h', propagationDelay: '90s' },
      },
    });
    // The kubelet expands $(VAR) from the container's env before the process sees its args.
    const expand = (args: string[] | undefined, env: Record<string, string>): string[] =>
      (args ?? []).map((a) => a.replace(/\$\((\w+)\)/g, (_m, v: string) => env[v] ?? `$(${v})`));

    const webhookArgs = (podSpec(one(objects, 'Deployment', `${RELEASE}-webhook`)).containers[0] as Container).args;
    const webhook = parseWebhookConfig(expand(webhookArgs, {}), {});
    expect(webhook.kind).toBe('config');
    if (webhook.kind !== 'config') return;
    expect(webhook.config).toEqual(
      expect.objectContaining({
        port: 9443,
        metricsPort: 9090,
        logLevel: 'debug',
        liveLookupTimeoutMs: 750,
        tlsCertFile: '/etc/webhook/tls/tls.crt',
        tlsKeyFile: '/etc/webhook/tls/tls.key',
        kubeconfig: undefined, // in-cluster service account
      }),
    );

    const operatorContainer = podSpec(one(objects, 'Deployment', `${RELEASE}-operator`)).containers[0] as Container;
    const env = { POD_NAMESPACE: NAMESPACE, POD_NAME: `${RELEASE}-operator-abc` };
    const operator = parseOperatorConfig(expand(operatorContainer.args, env), { env });
    expect(operator.kind).toBe('config');
    if (operator.kind !== 'config') return;
    expect(operator.config).toEqual(
      expect.objectContaining({
        kubeconfig: undefined,
        leaderElect: true,
        leaderElectionNamespace: NAMESPACE,
        leaderElectionId: `${RELEASE}-operator`,
        leaseDurationMs: 20_000,
        renewDeadlineMs: 12_000,
        retryPeriodMs: 3_000,
        platformNamespace: 'kubeplus-platform',
        metricsPort: 9191,
        instanceKinds: {
          groups: ['platformapi.kubeplus'],
          kinds: [{ group: 'cloudark.io', version: 'v1', kind: 'Agent' }],
        },
        webhookCertificates: true,
        webhookCaValidityMs: 17_520 * 3_600_000,
        webhookCertValidityMs: 720 * 3_600_000,
        webhookCertPropagationDelayMs: 90_000,
        reports: true,
      }),
    );
    // The Lease the operator will use is the one its Role lets it renew.
    const lease = one(objects, 'Role', `${RELEASE}-operator-leader-election`);
    expect(JSON.stringify(lease.rules)).toContain(`"resourceNames":["${operator.config.leaderElectionId}"]`);
  });

  test('the operator’s webhook-certificate flags follow operator.webhookCertificates', async () => {
    const args = (objects: K8sObject[]) =>
      (podSpec(one(objects, 'Deployment', `${RELEASE}-operator`)).containers[0] as Container).args ?? [];
    const webhookFlags = (objects: K8sObject[]) => args(objects).filter((a) => a.startsWith('--webhook-'));
    expect(webhookFlags(await render())).toEqual([
      '--webhook-certificates=true',
      '--webhook-ca-validity=43800h',
      '--webhook-cert-validity=2160h',
      '--webhook-cert-propagation-delay=2m',
    ]);
    expect(
      webhookFlags(
        await render({
          operator: { webhookCertificates: { caValidity: '8760h', certValidity: '1h30m', propagationDelay: '30s' } },
        }),
      ),
    ).toEqual([
      '--webhook-certificates=true',
      '--webhook-ca-validity=8760h',
      '--webhook-cert-validity=1h30m',
      '--webhook-cert-propagation-delay=30s',
    ]);
    // Off: only the switch (the helm-mode webhook needs no operator-issued certificate).
    const off = await render({
      webhook: { tls: { mode: 'helm' } },
      operator: { webhookCertificates: { enabled: false } },
    });
    expect(webhookFlags(off)).toEqual(['--webhook-certificates=false']);
    const env = { POD_NAMESPACE: NAMESPACE, POD_NAME: `${RELEASE}-operator-abc` };
    const parsed = parseOperatorConfig(
      args(off).map((a) => a.replace(/\$\((\w+)\)/g, (_m, v: string) => env[v as keyof typeof env] ?? '')),
      { env },
    );
    expect(parsed.kind === 'config' && parsed.config.webhookCertificates).toBe(false);
  });

  test('webhook certificate lifetimes the operator would refuse are refused at install, naming both values', async () => {
    expect(
      await renderError({ operator: { webhookCertificates: { certValidity: '7m59s', propagationDelay: '2m' } } }),
    ).toContain(
      'operator.webhookCertificates.certValidity (7m59s) must be at least 4 × operator.webhookCertificates.propagationDelay (2m)',
    );
    expect(
      await renderError({ operator: { webhookCertificates: { caValidity: '4319h59m59.5s', certValidity: '2160h' } } }),
    ).toContain(
      'operator.webhookCertificates.caValidity (4319h59m59.5s) must be at least 2 × operator.webhookCertificates.certValidity (2160h)',
    );
    // The bounds themselves render (durations are compared in milliseconds, units mixed).
    for (const webhookCertificates of [
      { certValidity: '8m', propagationDelay: '2m' },
      { caValidity: '4320h', certValidity: '2160h' },
      { caValidity: '1h', certValidity: '30m', propagationDelay: '450000ms' },
    ]) {
      expect((await render({ operator: { webhookCertificates } })).length).toBeGreaterThan(0);
    }
  });

  test('an instance Kind whose group is not granted is refused with a clear message', async () => {
    const stderr = await renderError({ operator: { instanceKinds: ['cloudark.io/v1/Agent'] } });
    expect(stderr).toContain(
      'operator.instanceKinds entry "cloudark.io/v1/Agent": its group cloudark.io has no operator.instanceGroups entry',
    );
  });
});

describe('webhook.hostNetwork (an API server that cannot reach the Pod network: issue 39)', () => {
  const WEBHOOK = `${RELEASE}-webhook`;
  const container = (objects: K8sObject[]): Container =>
    podSpec(one(objects, 'Deployment', WEBHOOK)).containers[0] as Container;

  test('off by default: the Pod network, the restricted standard', async () => {
    const spec = podSpec(one(await render(), 'Deployment', WEBHOOK)) as PodSpec & { dnsPolicy?: string };
    expect(spec.hostNetwork).toBeUndefined();
    expect(spec.dnsPolicy).toBeUndefined();
    expect(container(await render()).args).toContain('--port=8443');
  });

  test('on: the node network with cluster DNS, the container listens on hostNetwork.port, the Service and the webhook configuration follow', async () => {
    const objects = await render({ webhook: { hostNetwork: { enabled: true } } });
    const spec = podSpec(one(objects, 'Deployment', WEBHOOK)) as PodSpec & { dnsPolicy?: string };
    expect(spec.hostNetwork).toBe(true);
    expect(spec.dnsPolicy).toBe('ClusterFirstWithHostNet');
    const c = container(objects);
    expect(c.args).toEqual(expect.arrayContaining(['--port=10260', '--metrics-port=10261']));
    expect(c.ports).toEqual([
      { name: 'https', containerPort: 10260, protocol: 'TCP' },
      { name: 'metrics', containerPort: 10261, protocol: 'TCP' },
    ]);
    // The probes and the Service name the port, so they reach the node port.
    const service = one(objects, 'Service', WEBHOOK).spec as {
      ports: { name: string; port: number; targetPort: string }[];
    };
    expect(service.ports.find((p) => p.name === 'https')).toEqual(
      expect.objectContaining({ port: 443, targetPort: 'https' }),
    );
    const webhookConfig = one(objects, 'MutatingWebhookConfiguration').webhooks as {
      clientConfig: { service: { name: string; port: number } };
    }[];
    expect(webhookConfig[0]?.clientConfig.service).toEqual(expect.objectContaining({ name: WEBHOOK, port: 443 }));
  });

  test('on, with its own ports', async () => {
    const c = container(await render({ webhook: { hostNetwork: { enabled: true, port: 9443, metricsPort: 9090 } } }));
    expect(c.args).toEqual(expect.arrayContaining(['--port=9443', '--metrics-port=9090']));
  });

  test('on: not restricted (host namespaces), as the chart README says', async () => {
    const spec = podSpec(one(await render({ webhook: { hostNetwork: { enabled: true } } }), 'Deployment', WEBHOOK));
    expect(() => expectRestricted(spec, WEBHOOK)).toThrow(/hostNetwork/);
  });

  test('the admission and metrics ports must differ on the node', async () => {
    expect(
      await renderError({ webhook: { hostNetwork: { enabled: true, port: 10260, metricsPort: 10260 } } }),
    ).toContain('webhook.hostNetwork.port and webhook.hostNetwork.metricsPort are both 10260');
  });
});
