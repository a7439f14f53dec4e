import { describe, expect, it } from '@jest/globals';
import {
  DEFAULT_HANDLER_LEVELS,
  NODE_ISOLATION_ANNOTATION,
  NODE_ISOLATION_ENABLED_LABEL,
  NODE_ISOLATION_RESOLVED_ANNOTATION,
  OWNER_ANNOTATION,
  policyName,
  runtimeClassName,
  SANDBOX_ISOLATION_ANNOTATION,
} from '@kubeplus-isolation/spec';
import { admittedVerdict, formatVerdict } from '../src/check.js';
import { EXIT, run } from '../src/cli.js';
import { type ExplainFacts, explain, formatExplanation, ownersOf } from '../src/explain.js';

const MANDATE = {
  nodeSelector: { pool: 'a' },
  tolerations: [{ key: 'dedicated', operator: 'Equal' as const, value: 'a', effect: 'NoSchedule' as const }],
};
const pod = (spec: Record<string, unknown>) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec });

describe('check: the verdict of an admitted dry run', () => {
  it('lists the isolation fields admission changed', () => {
    const v = admittedVerdict(pod({}), pod({ ...MANDATE, runtimeClassName: '' }), [], MANDATE);
    expect(v).toEqual({
      admitted: true,
      kind: 'Pod',
      name: 'p',
      changes: [
        { field: 'spec.nodeSelector', before: undefined, after: MANDATE.nodeSelector },
        { field: 'spec.tolerations', before: undefined, after: MANDATE.tolerations },
      ],
      warnings: [],
    });
  });

  it("names what a Pod admitted without the namespace's placement lacks", () => {
    const v = admittedVerdict(pod({ nodeSelector: { pool: 'a' } }), pod({ nodeSelector: { pool: 'a' } }), [], MANDATE);
    expect(v.admitted && v.missing).toEqual({ nodeSelector: {}, tolerations: MANDATE.tolerations });
    expect(formatVerdict(v, 'ns')).toContain(
      'WARNING: the namespace mandates a node placement this Pod would still lack',
    );
  });

  it("reads a Sandbox's Pod template and carries the admission warnings", () => {
    const sandbox = (rc?: string) => ({
      apiVersion: 'agents.x-k8s.io/v1beta1',
      kind: 'Sandbox',
      metadata: { name: 's' },
      spec: { podTemplate: { spec: rc === undefined ? {} : { runtimeClassName: rc } } },
    });
    const v = admittedVerdict(sandbox(), sandbox('kubeplus-sandbox-x'), ['advisory: weak'], MANDATE);
    expect(v).toMatchObject({
      admitted: true,
      changes: [{ field: 'spec.podTemplate.spec.runtimeClassName', before: undefined, after: 'kubeplus-sandbox-x' }],
      warnings: ['advisory: weak'],
    });
    expect(v.admitted && v.missing).toBeUndefined();
  });
});

const ID = { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'agent-1' };
const IDENTITY = 'cloudark.io/Agent/team-a/agent-1';

function facts(over: Partial<ExplainFacts> = {}): ExplainFacts {
  return {
    namespace: 'team-a',
    platformNamespace: 'kubeplus',
    handlerLevels: DEFAULT_HANDLER_LEVELS,
    namespaceMeta: {
      labels: { [NODE_ISOLATION_ENABLED_LABEL]: 'true' },
      annotations: { [NODE_ISOLATION_RESOLVED_ANNOTATION]: JSON.stringify(MANDATE), [OWNER_ANNOTATION]: IDENTITY },
    },
    instances: [
      {
        identity: ID,
        annotations: {
          [NODE_ISOLATION_ANNOTATION]: JSON.stringify(MANDATE),
          [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":"runsc","enforce":false}',
        },
      },
    ],
    runtimeClasses: [
      { name: runtimeClassName('agent-1'), handler: 'runsc', owner: IDENTITY },
      { name: 'runc', handler: 'runc' },
    ],
    policies: [{ kind: 'ValidatingAdmissionPolicy', name: policyName(ID, 'advisory'), owner: IDENTITY }],
    bindings: [{ kind: 'ValidatingAdmissionPolicyBinding', name: policyName(ID, 'advisory'), owner: IDENTITY }],
    webhooks: [{ configuration: 'kubeplus-isolation', failurePolicy: 'Ignore' }],
    pods: [
      { metadata: { name: 'placed' }, spec: { ...MANDATE } },
      { metadata: { name: 'unplaced' }, spec: {} },
      { metadata: { name: 'done' }, spec: {}, status: { phase: 'Succeeded' } },
    ],
    sandboxes: [
      { metadata: { name: 'weak' }, spec: { podTemplate: { spec: { runtimeClassName: 'runc' } } } },
      {
        metadata: { name: 'strong' },
        spec: { podTemplate: { spec: { runtimeClassName: runtimeClassName('agent-1') } } },
      },
    ],
    ...over,
  };
}

describe('explain', () => {
  it("says when the operator refuses the namespace an instance names, with the operator's own decision", () => {
    const id = { group: 'platformapi.kubeplus', kind: 'WebApp', namespace: 'default', name: 'team-b' };
    const refused = explain(
      facts({
        namespace: 'team-b',
        platformNamespace: 'default',
        namespaceMeta: { labels: {}, annotations: {}, creationTimestamp: '2026-01-01T00:00:00Z' },
        instances: [
          {
            identity: id,
            annotations: { [NODE_ISOLATION_ANNOTATION]: '{}' },
            creationTimestamp: '2026-01-01T00:00:10Z',
          },
        ],
      }),
    );
    expect(refused.instances[0]?.tenantNamespaceRefused?.reason).toBe('not-created-for-instance');
    expect(formatExplanation(refused)).toContain('REFUSED (not-created-for-instance)');
    const created = explain(
      facts({
        namespace: 'team-b',
        platformNamespace: 'default',
        namespaceMeta: {
          labels: {},
          annotations: { 'meta.helm.sh/release-name': '"webapp-team-b"' },
          creationTimestamp: '2026-01-01T00:00:00Z',
        },
        instances: [{ identity: id, annotations: {}, creationTimestamp: '2026-01-01T00:00:10Z' }],
      }),
    );
    expect(created.instances[0]?.tenantNamespaceRefused).toBeUndefined();
  });

  it('the instance, mandate, engine, policies in force, and what does not comply (audit and report rules)', () => {
    const e = explain(facts());
    expect(e.nodeIsolation).toMatchObject({ enabled: true, isolatedBy: IDENTITY, mandate: MANDATE, engine: 'webhook' });
    expect(e.sandboxIsolation).toEqual({ minimum: 'runsc', mode: 'advisory' });
    expect(e.instances[0]?.policies).toEqual([
      {
        role: 'advisory',
        kind: 'ValidatingAdmissionPolicy',
        name: policyName(ID, 'advisory'),
        exists: true,
        bound: true,
      },
      {
        role: 'default',
        kind: 'MutatingAdmissionPolicy',
        name: policyName(ID, 'default'),
        exists: false,
        bound: false,
      },
    ]);
    expect(e.nonCompliant.pods.map((p) => p.name)).toEqual(['unplaced']);
    expect(e.nonCompliant.sandboxes).toEqual([
      {
        name: 'weak',
        runtimeClassName: 'runc',
        reason: 'asks for runtime class runc (handler runc, level runc), short of the minimum runsc',
      },
    ]);
    const text = formatExplanation(e);
    expect(text).toContain(`MutatingAdmissionPolicy ${policyName(ID, 'default')}: exists NO, bound NO`);
    expect(text).toContain(
      '  Pod unplaced: admitted without the node placement it mandates (lacks nodeSelector and tolerations)',
    );
  });

  it("the shared policy layout: the instance's binding of the shared policy, in force when that policy exists", () => {
    const SHARED = 'kubeplus-isolation-sandbox';
    const binding = {
      kind: 'ValidatingAdmissionPolicyBinding',
      name: policyName(ID, 'advisory'),
      owner: IDENTITY,
      policyName: SHARED,
    };
    const present = explain(
      facts({ policies: [], bindings: [binding], sharedPolicies: [`ValidatingAdmissionPolicy/${SHARED}`] }),
    );
    expect(present.instances[0]?.policies[0]).toEqual({
      role: 'advisory',
      kind: 'ValidatingAdmissionPolicy',
      name: policyName(ID, 'advisory'),
      exists: true,
      bound: true,
      sharedPolicy: SHARED,
    });
    expect(formatExplanation(present)).toContain(
      `ValidatingAdmissionPolicyBinding ${policyName(ID, 'advisory')} of the shared ValidatingAdmissionPolicy ${SHARED}: exists yes, bound yes (in force)`,
    );
    // The shared policy deleted: the binding binds nothing, and explain says so.
    const missing = explain(facts({ policies: [], bindings: [binding], sharedPolicies: [] }));
    expect(missing.instances[0]?.policies[0]).toMatchObject({ exists: false, bound: true, sharedPolicy: SHARED });
  });

  it('an invalid annotation: its errors, and the Sandboxes judged by the last good minimum', () => {
    const f = facts({
      instances: [{ identity: ID, annotations: { [SANDBOX_ISOLATION_ANNOTATION]: '{"minRuntimeClass":"gvisor"}' } }],
    });
    const e = explain(f);
    expect(e.instances[0]?.sandboxIsolation).toMatchObject({ present: true, valid: false });
    expect(e.sandboxIsolation).toEqual({ minimum: 'runsc', mode: 'advisory' });
    expect(e.nonCompliant.sandboxes?.map((s) => s.name)).toEqual(['weak']);
  });

  it('a platform class named by runtimeClassName: shown instead of a generated class, with whether the operator can use it', () => {
    const named = (runtimeClassName: string, minRuntimeClass = 'runsc') =>
      facts({
        instances: [
          {
            identity: ID,
            annotations: { [SANDBOX_ISOLATION_ANNOTATION]: JSON.stringify({ minRuntimeClass, runtimeClassName }) },
          },
        ],
        runtimeClasses: [
          { name: 'gvisor', handler: 'runsc' },
          { name: 'runc', handler: 'runc' },
          { name: 'kubeplus-sandbox-other', handler: 'runsc', owner: 'cloudark.io/Agent/team-b/other' },
        ],
      });
    const gvisor = explain(named('gvisor'));
    expect(gvisor.instances[0]?.runtimeClass).toEqual({
      name: 'gvisor',
      exists: true,
      owned: false,
      handler: 'runsc',
      level: 'runsc',
      platform: {},
    });
    expect(formatExplanation(gvisor)).toContain(
      "  RuntimeClass gvisor (the platform's, named by runtimeClassName): exists, handler runsc (runsc); recommended (and defaulted to in advisory mode)",
    );
    const weak = explain(named('runc'));
    expect(weak.instances[0]?.runtimeClass.platform).toEqual({ problem: 'below-minimum' });
    expect(formatExplanation(weak)).toContain(
      "  RuntimeClass runc (the platform's, named by runtimeClassName): exists, handler runc (runc); NOT usable (its handler is below the minimum runsc): nothing is recommended or defaulted to",
    );
    expect(explain(named('runc', 'runc')).instances[0]?.runtimeClass.platform).toEqual({});
    const missing = explain(named('nope'));
    expect(missing.instances[0]?.runtimeClass).toMatchObject({
      name: 'nope',
      exists: false,
      platform: { problem: 'missing' },
    });
    expect(formatExplanation(missing)).toContain('MISSING; NOT usable (it does not exist)');
    expect(explain(named('kubeplus-sandbox-other')).instances[0]?.runtimeClass.platform).toEqual({
      problem: 'not-platform',
    });
  });

  it('engines, and a namespace neither isolated nor existing', () => {
    expect(explain(facts({ webhooks: [], nodeIsolationParams: true })).nodeIsolation.engine).toBe('admission-policy');
    expect(explain(facts({ nodeIsolationParams: true })).nodeIsolation.engine).toBe('both');
    const plain = explain(
      facts({ namespaceMeta: { labels: {}, annotations: {} }, instances: [], sandboxes: undefined }),
    );
    expect(plain.nonCompliant).toEqual({ pods: [] });
    expect(formatExplanation(plain)).toContain('not isolated');
    expect(explain(facts({ namespaceMeta: undefined })).exists).toBe(false);
  });

  it("ownersOf: the instances whose tenant namespace it is, by KubePlus's rule", () => {
    expect(
      ownersOf('agent-2', 'kubeplus', undefined, [
        { name: 'x', owner: 'cloudark.io/Agent/kubeplus/agent-2' },
        { name: 'y', owner: 'cloudark.io/Agent/elsewhere/agent-2' },
        { name: 'z', owner: 'not an identity' },
      ]),
    ).toEqual([{ group: 'cloudark.io', kind: 'Agent', namespace: 'kubeplus', name: 'agent-2' }]);
  });
});

describe('the command line', () => {
  const io = () => {
    const out: string[] = [];
    const err: string[] = [];
    return {
      out,
      err,
      io: { stdout: (s: string) => out.push(s), stderr: (s: string) => err.push(s), stdin: () => '' },
    };
  };

  it('help for each command, exit 0', async () => {
    for (const args of [[], ['--help'], ['validate', '--help'], ['explain', '-h'], ['check', '--help']]) {
      const t = io();
      expect(await run(args, t.io)).toBe(EXIT.ok);
      expect(t.out.join('')).toContain('Exit status:');
    }
  });

  it('--version and version print the version main.ts gives, exit 0', async () => {
    for (const args of [['--version'], ['version']]) {
      const t = io();
      expect(await run(args, { ...t.io, version: '1.2.3' })).toBe(EXIT.ok);
      expect(t.out.join('')).toBe('kubeplus-isolation 1.2.3\n');
    }
  });

  it('usage errors exit 2 with a pointer to --help', async () => {
    for (const args of [
      ['nope'],
      ['validate'],
      ['validate', '/does/not/exist'],
      ['validate', '-', '--instance-kinds', 'a/b'],
      ['validate', '-', '--output', 'yaml'],
      ['explain'],
      ['explain', 'Not_A_Namespace'],
      ['check'],
    ]) {
      const t = io();
      expect(await run(args, t.io)).toBe(EXIT.usage);
      expect(t.err.join('')).toMatch(/^kubeplus-isolation: .*\nRun 'kubeplus-isolation .*--help' for usage\.\n$/s);
    }
  });

  it('validate - reads standard input', async () => {
    const t = io();
    t.io.stdin = () =>
      `apiVersion: cloudark.io/v1\nkind: Agent\nmetadata:\n  name: a\n  annotations:\n    ${NODE_ISOLATION_ANNOTATION}: '{}'\n`;
    expect(await run(['validate', '-'], t.io)).toBe(EXIT.findings);
    expect(t.out.join('')).toContain('must mandate at least one nodeSelector entry or one toleration');
  });
});
