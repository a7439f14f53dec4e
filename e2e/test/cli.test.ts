/**
 * Issue 25: the command-line tool (packages/cli, run as users run it: `node packages/cli/dist/main.js`)
 * against the real control plane, the real operator process and the real webhook process.
 *
 * - `validate` on a GitOps-style directory of manifests (Argo CD-rendered multi-document YAML, a
 *   JSON file, a Helm-style empty document) with one broken annotation: exit 1, the file, the
 *   document's line, the operator's message with the JSON path. No cluster.
 * - `explain` of a namespace isolated by an Agent (node mandate + enforcing sandbox minimum): the
 *   instance, the mandate in force, the webhook engine, the RuntimeClass and the policies in force,
 *   and what does not comply: the Pod admitted unpatched while the webhook was down (not the one
 *   admitted while it ran), and the Sandbox admitted before the minimum existed.
 * - `check`: the webhook's patch while it runs; the policy's refusal of a Sandbox without a
 *   runtime class; during the outage, an admission that leaves the Pod without its placement.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  type Cluster,
  type RunningWebhook,
  registerWebhook,
  repoRoot,
  startWebhook,
  testPod,
  unregisterWebhook,
} from '@kubeplus-isolation/e2e';
import {
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { uniqueName } from './support/names.js';
import { poolMandate, waitForWebhookActive } from './support/node-isolation.js';
import {
  AGENT,
  createAgent,
  expectedSandboxObjects,
  policyName,
  runtimeClassName,
  waitForNamespace,
  waitForSettled,
} from './support/operator.js';
import { createSandbox, expectAllowed } from './support/operator-sandbox.js';
import { operatorSuite } from './support/operator-suite.js';

const CLI = join(repoRoot(), 'packages', 'cli', 'dist', 'main.js');
/** No scheduler serves this name: the Pods stay Pending, which is all this suite needs. */
const UNSCHEDULED = 'kpi-e2e-no-scheduler';

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

function cli(args: readonly string[], input?: string): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile('node', [CLI, ...args], { timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

test('--version: the one version, VERSION (make release stamps it into the package.json read at run time)', async () => {
  const r = await cli(['--version']);
  expect(r).toEqual({
    code: 0,
    stdout: `kubeplus-isolation ${readFileSync(join(repoRoot(), 'VERSION'), 'utf8').trim()}\n`,
    stderr: '',
  });
});

describe('kubeplus-isolation validate: a GitOps directory with one broken annotation', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'kpi-cli-gitops-'));
    mkdirSync(join(dir, 'apps', 'team-a'), { recursive: true });
    mkdirSync(join(dir, '.git'));
    writeFileSync(
      join(dir, 'apps', 'team-a', 'rendered.yaml'),
      `# Source: team-a/templates/agent.yaml
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: team-a}
data: {mode: strict}
---
apiVersion: cloudark.io/v1
kind: Agent
metadata:
  name: agent-a
  namespace: team-a
  annotations:
    kubeplus.io/node-isolation: '{"nodeSelector":{"pool":"team-a"},"tolerations":[{"key":"dedicated","operator":"Equal","value":"team-a","effect":"NoSchedule"}]}'
    kubeplus.io/sandbox-isolation: '{"minRuntimeClass":"kata"}'
---
apiVersion: cloudark.io/v1
kind: Agent
metadata:
  name: agent-b
  namespace: team-a
  annotations:
    kubeplus.io/node-isolation: '{"nodeSelector":{"pool":"team-a"},"tolerations":[{"key":"dedicated","operator":"Equals","value":"team-a"}]}'
---
`,
    );
    writeFileSync(
      join(dir, 'apps', 'team-b.json'),
      JSON.stringify({
        apiVersion: 'cloudark.io/v1',
        kind: 'Agent',
        metadata: {
          name: 'agent-c',
          namespace: 'team-b',
          annotations: { [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":"runsc","enforce":false}' },
        },
      }),
    );
    // Not a manifest, and a hidden directory: neither is read.
    writeFileSync(join(dir, 'README.md'), '# apps\n');
    writeFileSync(join(dir, '.git', 'broken.yaml'), 'kind: [');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('fails with exit 1 naming the file, the line and the operator message with its JSON path', async () => {
    const r = await cli(['validate', dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(1);
    const file = join(dir, 'apps', 'team-a', 'rendered.yaml');
    expect(r.stdout).toContain(`${file}:17 (document 3): cloudark.io/v1 Agent team-a/agent-b`);
    expect(r.stdout).toContain(
      `  ${NODE_ISOLATION_ANNOTATION} is invalid:\n    tolerations[0].operator must be one of Exists, Equal`,
    );
    expect(r.stdout).not.toContain('agent-a');
    expect(r.stdout).toMatch(/^INVALID: 2 file\(s\), 4 document\(s\), 3 instance\(s\)/m);
  });

  test('--output json: one finding per annotation, the broken one with its errors; fixed, it passes', async () => {
    const r = await cli(['validate', dir, '--output', 'json', '--instance-kinds', 'cloudark.io/v1/Agent']);
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as {
      valid: boolean;
      instances: Array<{ name: string; selectedBy: string; annotations: Array<{ valid: boolean; errors: string[] }> }>;
    };
    expect(out.valid).toBe(false);
    expect(out.instances.map((i) => [i.name, i.selectedBy, i.annotations.map((a) => a.valid)])).toEqual([
      ['agent-a', 'instance-kinds', [true, true]],
      ['agent-b', 'instance-kinds', [false]],
      ['agent-c', 'instance-kinds', [true]],
    ]);
    expect(out.instances[1]?.annotations[0]?.errors[0]).toMatch(/^tolerations\[0\]\.operator must be one of/);

    const file = join(dir, 'apps', 'team-a', 'rendered.yaml');
    const fixed = (await import('node:fs')).readFileSync(file, 'utf8').replace('"Equals"', '"Equal"');
    const fromStdin = await cli(['validate', '-'], fixed);
    expect(fromStdin.code).toBe(0);
    expect(fromStdin.stdout).toMatch(/^valid: 1 file\(s\), 3 document\(s\), 2 instance\(s\)/m);
  });
});

describe('kubeplus-isolation explain and check on the real control plane', () => {
  let webhook: RunningWebhook | undefined;
  let files = '';
  const configName = uniqueName('e2e-cli-node-isolation');
  const suite = operatorSuite({
    name: 'cli',
    waitForServiceAccount: false,
    beforeTeardown: async ({ kc }) => {
      await unregisterWebhook(kc, configName);
      await webhook?.stop();
    },
    afterTeardown: async () => {
      if (files) rmSync(files, { recursive: true, force: true });
    },
  });
  let cluster: Cluster;
  let kc: KubeConfig;
  let core: CoreV1Api;
  const pool = uniqueName('cli-pool');
  const mandate = poolMandate(pool);
  const agent = uniqueName('cli-agent');
  let ns = '';
  const kube = (): string[] => ['--kubeconfig', cluster.kubeconfigPath];

  beforeAll(async () => {
    ({ cluster, kc } = suite);
    core = kc.makeApiClient(CoreV1Api);
    files = mkdtempSync(join(tmpdir(), 'kpi-cli-check-'));
    webhook = await startWebhook(cluster);
    ns = await suite.tenantNamespace('kpi-cli-tenant');
    // Admitted before any sandbox minimum exists: the policies judge only what comes later.
    expectAllowed(
      await createSandbox(kc, { kind: 'Sandbox', version: 'v1beta1', namespace: ns, name: 'old-sbx' }, undefined),
      'a Sandbox without a runtime class before the minimum',
    );
    await createAgent(kc, ns, agent, {
      [NODE_ISOLATION_ANNOTATION]: JSON.stringify(mandate),
      [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass: 'runsc' }),
    });
    await waitForNamespace(kc, ns, 'to carry the resolved mandate', (n) =>
      Boolean(n?.metadata?.annotations?.[NODE_ISOLATION_RESOLVED_ANNOTATION]),
    );
    await waitForSettled(kc, { namespace: ns, name: agent }, expectedSandboxObjects(ns, agent, true));
    await registerWebhook(kc, { url: webhook.url, caPem: webhook.caPem, name: configName });
    await waitForWebhookActive(kc, ns, mandate.nodeSelector);
  });

  const podFile = (name: string): string => {
    const path = join(files, `${name}.yaml`);
    writeFileSync(
      path,
      `apiVersion: v1
kind: Pod
metadata: {name: ${name}}
spec:
  schedulerName: ${UNSCHEDULED}
  containers: [{name: main, image: registry.k8s.io/pause:3.10}]
`,
    );
    return path;
  };

  test('check, webhook up: the patch the webhook applies to a Pod (nothing is stored)', async () => {
    const r = await cli(['check', podFile('checked-up'), '-n', ns, '-o', 'json', ...kube()]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const v = JSON.parse(r.stdout) as { admitted: boolean; changes: Array<{ field: string; after: unknown }> };
    expect(v.admitted).toBe(true);
    // The webhook's patch, beside what the API server's DefaultTolerationSeconds plugin adds.
    expect(v.changes.map((c) => c.field)).toEqual(['spec.nodeSelector', 'spec.tolerations']);
    expect(v.changes[0]?.after).toEqual(mandate.nodeSelector);
    expect(v.changes[1]?.after).toEqual(expect.arrayContaining(mandate.tolerations));
    expect((await core.listNamespacedPod({ namespace: ns })).items).toEqual([]);
    const text = await cli(['check', podFile('checked-up'), '-n', ns, ...kube()]);
    expect(text.stdout).toContain(
      `ADMITTED: Pod checked-up in ${ns}\n  spec.nodeSelector:\n    - (unset)\n    + {"pool":"${pool}"}`,
    );
  });

  test("check: the enforcing policy's refusal of a Sandbox without a runtime class, with its message", async () => {
    const path = join(files, 'sandbox.yaml');
    writeFileSync(
      path,
      JSON.stringify({
        apiVersion: 'agents.x-k8s.io/v1beta1',
        kind: 'Sandbox',
        metadata: { name: 'new-sbx' },
        spec: { podTemplate: { spec: { containers: [{ name: 'agent', image: 'registry.k8s.io/pause:3.10' }] } } },
      }),
    );
    const r = await cli(['check', path, '-n', ns, ...kube()]);
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(new RegExp(`^REFUSED: Sandbox new-sbx in ${ns} \\(HTTP 4\\d\\d\\)`));
    expect(r.stdout).toContain(policyName(ns, agent, 'enforce'));
  });

  test('explain and check during a webhook outage: the Pod admitted unpatched is named, with what it lacks', async () => {
    await core.createNamespacedPod({ namespace: ns, body: testPod('while-up', { schedulerName: UNSCHEDULED }) });
    await webhook?.stop();
    webhook = undefined;
    const down = await core.createNamespacedPod({
      namespace: ns,
      body: testPod('while-down', { schedulerName: UNSCHEDULED }),
    });
    expect(down.spec?.nodeSelector).toBeUndefined();

    const checked = await cli(['check', podFile('checked-down'), '-n', ns, ...kube()]);
    expect(checked.code).toBe(0);
    expect(checked.stdout).not.toContain('spec.nodeSelector');
    const checkedJson = JSON.parse(
      (await cli(['check', podFile('checked-down'), '-n', ns, '-o', 'json', ...kube()])).stdout,
    );
    expect(checkedJson.missing).toEqual({ nodeSelector: mandate.nodeSelector, tolerations: mandate.tolerations });
    expect(checked.stdout).toContain(
      `WARNING: the namespace mandates a node placement this Pod would still lack: nodeSelector {"pool":"${pool}"}`,
    );

    const r = await cli(['explain', ns, '-o', 'json', ...kube()]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const e = JSON.parse(r.stdout);
    const identity = `${AGENT.group}/${AGENT.kind}/${ns}/${agent}`;
    expect(e.nodeIsolation).toMatchObject({
      enabled: true,
      isolatedBy: identity,
      mandate: { nodeSelector: mandate.nodeSelector, tolerations: mandate.tolerations },
      engine: 'webhook',
    });
    expect(e.nodeIsolation.webhooks).toContainEqual({ configuration: configName, failurePolicy: 'Ignore' });
    expect(e.sandboxIsolation).toEqual({ minimum: 'runsc', mode: 'enforce' });
    expect(e.instances).toEqual([
      {
        identity,
        nodeIsolation: { present: true, valid: true, errors: [] },
        sandboxIsolation: { present: true, valid: true, errors: [], minRuntimeClass: 'runsc', enforce: true },
        runtimeClass: { name: runtimeClassName(agent), exists: true, owned: true, handler: 'runsc', level: 'runsc' },
        policies: [
          {
            role: 'enforce',
            kind: 'ValidatingAdmissionPolicy',
            name: policyName(ns, agent, 'enforce'),
            exists: true,
            bound: true,
          },
        ],
      },
    ]);
    expect(e.nonCompliant.pods).toEqual([
      {
        name: 'while-down',
        reason: expect.stringContaining('lacks nodeSelector and tolerations'),
        missingNodeSelector: mandate.nodeSelector,
        missingTolerations: mandate.tolerations,
      },
    ]);
    expect(e.nonCompliant.sandboxes).toEqual([
      {
        name: 'old-sbx',
        runtimeClassName: '',
        reason: 'asks for no runtime class, short of the minimum runsc',
      },
    ]);

    const text = await cli(['explain', ns, ...kube()]);
    expect(text.code).toBe(0);
    expect(text.stdout).toContain(`  isolated by:  ${identity}`);
    expect(text.stdout).toContain(
      `  ValidatingAdmissionPolicy ${policyName(ns, agent, 'enforce')}: exists yes, bound yes (in force)`,
    );
    expect(text.stdout).toContain('  Pod while-down: admitted without the node placement it mandates');
    expect(text.stdout).not.toContain('Pod while-up');
  });

  test('explain: a namespace that does not exist is exit 1; an unreachable cluster exit 3', async () => {
    const missing = await cli(['explain', uniqueName('kpi-cli-nowhere'), ...kube()]);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toMatch(/: not found\n$/);
    const kubeconfig = join(files, 'unreachable.kubeconfig');
    writeFileSync(
      kubeconfig,
      `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`,
    );
    const unreachable = await cli(['explain', 'default', '--kubeconfig', kubeconfig]);
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toMatch(/^kubeplus-isolation: reading Namespace default: /);
  });
});
