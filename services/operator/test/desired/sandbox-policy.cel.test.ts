import { describe, expect, it } from '@jest/globals';
import type { RuntimeLevel } from '@kubeplus-isolation/spec';
import type { ManagedObject } from '../../src/desired/objects.js';
import { desiredSandboxPolicy } from '../../src/desired/sandbox-policy.js';
import { type AdmissionRequest, matches, mutate, validate } from './admission-emulator.js';
import { makeInstance, OTHER_TENANT_CLASS, OWN_CLASS, TEST_CLASSES } from './helpers.js';

const OWN = OWN_CLASS;
const OTHER = OTHER_TENANT_CLASS;
const CLASSES = TEST_CLASSES;

function policies(min: RuntimeLevel, enforce: boolean): ManagedObject[] {
  return desiredSandboxPolicy({
    instance: makeInstance(),
    tenantNamespace: 'team-a',
    spec: { minRuntimeClass: min, enforce },
    runtimeClasses: CLASSES,
    mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
  }).objects;
}

/**
 * The policy when every class's time is known (issue 36: a hand-out needs the object younger than
 * its class's handler): the classes, and the own class, dated 2026-01-01; `dated` objects are
 * younger.
 */
function datedVapOf(min: RuntimeLevel): ManagedObject {
  const instance = makeInstance();
  const owner = { group: instance.group, kind: instance.kind, namespace: instance.namespace, name: instance.name };
  const at = '2026-01-01T00:00:00Z';
  const vap = desiredSandboxPolicy({
    instance,
    tenantNamespace: 'team-a',
    spec: { minRuntimeClass: min, enforce: true },
    runtimeClasses: [
      ...CLASSES.map((c) => ({ ...c, createdAt: at })),
      { name: OWN, handler: min, generated: true, owner, createdAt: at },
    ],
    mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
  }).objects.find((o) => o.kind === 'ValidatingAdmissionPolicy');
  if (vap === undefined) throw new Error('no ValidatingAdmissionPolicy');
  return vap;
}

/** `obj` as stored after its class got its handler (`datedVapOf`). */
function dated(obj: Record<string, unknown>): Record<string, unknown> {
  return { ...obj, metadata: { ...(obj.metadata as object), creationTimestamp: '2026-06-01T00:00:00Z' } };
}

function vapOf(min: RuntimeLevel, enforce = true): ManagedObject {
  const vap = policies(min, enforce).find((o) => o.kind === 'ValidatingAdmissionPolicy');
  if (vap === undefined) throw new Error('no ValidatingAdmissionPolicy');
  return vap;
}

function sandbox(runtimeClassName?: string, kind = 'Sandbox'): Record<string, unknown> {
  const podSpec: Record<string, unknown> = { containers: [{ name: 'c', image: 'i' }] };
  if (runtimeClassName !== undefined) podSpec.runtimeClassName = runtimeClassName;
  return {
    apiVersion: 'agents.x-k8s.io/v1beta1',
    kind,
    metadata: { name: 's' },
    spec: { podTemplate: { spec: podSpec } },
  };
}

const create = (rc?: string): AdmissionRequest => ({ operation: 'CREATE', object: sandbox(rc) });
const update = (from: string | undefined, to: string | undefined): AdmissionRequest => ({
  operation: 'UPDATE',
  object: sandbox(to),
  oldObject: sandbox(from),
});

describe('the validating policy for minimum kata, evaluated', () => {
  const vap = vapOf('kata');

  it('rejects an unset runtime class, naming the namespace, the minimum and the class to use', () => {
    const failures = validate(vap, create(undefined));
    expect(failures).toEqual([
      `Sandbox spec.podTemplate.spec.runtimeClassName is unset; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation); use runtimeClassName "${OWN}"`,
    ]);
  });

  it('treats an empty string as unset', () => {
    expect(validate(vap, create(''))).toHaveLength(1);
  });

  it.each(['runc', 'gvisor', 'no-such-class'])('rejects %s, naming the offending value', (rc) => {
    const failures = validate(vap, create(rc));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toContain(
      `runtimeClassName "${rc}" is not allowed here: its handler is weaker than kata or unknown, or it is another instance's class`,
    );
    expect(failures[0]).toContain(`use runtimeClassName "${OWN}"`);
  });

  it.each([OWN, 'kata-qemu'])('admits %s', (rc) => {
    expect(validate(vap, create(rc))).toEqual([]);
  });

  it('rejects the class generated for another instance, although its handler is kata', () => {
    const failures = validate(vap, create(OTHER));
    expect(failures).toHaveLength(1);
    expect(failures[0]).toContain(`runtimeClassName "${OTHER}" is not allowed here`);
  });

  it('never judges an unchanged runtime class again on UPDATE (not retroactive)', () => {
    expect(validate(vap, update('runc', 'runc'))).toEqual([]);
    expect(validate(vap, update(undefined, undefined))).toEqual([]);
  });

  it('judges an adoption (an UPDATE adding an owner) like a new object; dropping an owner is not judged', () => {
    const owned = (rc: string, ...uids: string[]): Record<string, unknown> => {
      const obj = sandbox(rc);
      (obj.metadata as Record<string, unknown>).ownerReferences = uids.map((uid) => ({
        apiVersion: 'extensions.agents.x-k8s.io/v1beta1',
        kind: uid.startsWith('claim') ? 'SandboxClaim' : 'SandboxWarmPool',
        name: uid,
        uid,
      }));
      return obj;
    };
    // A weak warm-pool Sandbox taken by a claim after the minimum was raised: refused.
    const adopt = {
      operation: 'UPDATE' as const,
      object: owned('runc', 'claim-1'),
      oldObject: owned('runc', 'pool-1'),
    };
    expect(validate(vap, adopt)).toHaveLength(1);
    expect(validate(vap, { ...adopt, oldObject: sandbox('runc') })).toHaveLength(1);
    // The same adoption of a compliant Sandbox, started after its class got its handler: admitted.
    expect(
      validate(datedVapOf('kata'), {
        operation: 'UPDATE',
        object: dated(owned(OWN, 'claim-1')),
        oldObject: dated(owned(OWN, 'pool-1')),
      }),
    ).toEqual([]);
    // The owner's controller updating its weak Sandbox, or the garbage collector orphaning it: not judged.
    expect(
      validate(vap, { operation: 'UPDATE', object: owned('runc', 'pool-1'), oldObject: owned('runc', 'pool-1') }),
    ).toEqual([]);
    expect(validate(vap, { operation: 'UPDATE', object: sandbox('runc'), oldObject: owned('runc', 'pool-1') })).toEqual(
      [],
    );
  });

  it("refuses any change of a Sandbox's runtime class on UPDATE, even to an allowed one (issue 36, class-change laundering)", () => {
    const frozen = (from: string, to: string) =>
      `Sandbox s runtimeClassName cannot change from ${from} to ${to}: its Pod keeps the runtime class it started with (the Agent Sandbox controller never changes an existing Pod's spec, and a Pod's runtimeClassName is immutable), so the Sandbox would name a class its Pod does not run; delete and re-create the Sandbox to change its runtime class (kubeplus.io/sandbox-isolation)`;
    // To an allowed class: only the freeze speaks.
    expect(validate(vap, update('runc', OWN))).toEqual([frozen('"runc"', `"${OWN}"`)]);
    expect(validate(vap, update('kata-qemu', OWN))).toEqual([frozen('"kata-qemu"', `"${OWN}"`)]);
    expect(validate(vap, update(undefined, OWN))).toEqual([frozen('unset', `"${OWN}"`)]);
    // To a weak or unset one: the freeze first, then what is wrong with the new class.
    const toRunc = validate(vap, update(OWN, 'runc'));
    expect(toRunc[0]).toBe(frozen(`"${OWN}"`, '"runc"'));
    expect(toRunc[1]).toContain('runtimeClassName "runc" is not allowed here');
    expect(validate(vap, update('runc', undefined))).toEqual([
      frozen('"runc"', 'unset'),
      expect.stringContaining('is unset'),
    ]);
    // '' and unset are the same class: no change.
    expect(validate(vap, update(OWN, ''))).toEqual([
      expect.stringContaining(`cannot change from "${OWN}" to unset`),
      expect.stringContaining('is unset'),
    ]);
    expect(validate(vap, { operation: 'UPDATE', object: sandbox(''), oldObject: sandbox(undefined) })).toEqual([]);
  });

  it('judges a SandboxTemplate whose class changes like a new one, without freezing it: a template runs nothing', () => {
    const template = (rc?: string) => sandbox(rc, 'SandboxTemplate');
    expect(validate(vap, { operation: 'UPDATE', object: template(OWN), oldObject: template('runc') })).toEqual([]);
    expect(validate(vap, { operation: 'UPDATE', object: template('kata-qemu'), oldObject: template(OWN) })).toEqual([]);
    const weak = validate(vap, { operation: 'UPDATE', object: template('runc'), oldObject: template(OWN) });
    expect(weak).toEqual([expect.stringMatching(/^SandboxTemplate runtimeClassName "runc" is not allowed here/)]);
  });

  it('freezes the class in every minimum and mode, runc included (advisory: warned, by its binding)', () => {
    for (const [min, enforce] of [
      ['runc', true],
      ['runsc', false],
      ['kata', false],
    ] as const) {
      expect(validate(vapOf(min, enforce), update('gvisor', 'kata-qemu'))).toEqual([
        expect.stringContaining('runtimeClassName cannot change from "gvisor" to "kata-qemu"'),
      ]);
    }
  });

  it('names the kind it judges (SandboxTemplate too)', () => {
    const failures = validate(vap, { operation: 'CREATE', object: sandbox(undefined, 'SandboxTemplate') });
    expect(failures[0]).toMatch(/^SandboxTemplate spec\.podTemplate/);
  });

  it('does not error on an object without a Pod template spec', () => {
    expect(validate(vap, { operation: 'CREATE', object: { kind: 'Sandbox', spec: { podTemplate: {} } } })).toHaveLength(
      1,
    );
    expect(validate(vap, { operation: 'CREATE', object: { kind: 'Sandbox' } })).toHaveLength(1);
  });
});

/** A Pod as the tenant or the Sandbox controller writes it. */
function pod(
  runtimeClassName: string | undefined,
  meta: { labels?: Record<string, string>; owners?: { apiVersion: string; kind: string; uid: string }[] } = {},
): Record<string, unknown> {
  const spec: Record<string, unknown> = { containers: [{ name: 'c', image: 'i' }] };
  if (runtimeClassName !== undefined) spec.runtimeClassName = runtimeClassName;
  const metadata: Record<string, unknown> = { name: 'agent-1' };
  if (meta.labels !== undefined) metadata.labels = meta.labels;
  if (meta.owners !== undefined) metadata.ownerReferences = meta.owners.map((o) => ({ ...o, name: o.uid }));
  return { apiVersion: 'v1', kind: 'Pod', metadata, spec };
}

const ADOPTABLE = { 'agents.x-k8s.io/adoptable': 'true' };
const NAME_HASH = { 'agents.x-k8s.io/sandbox-name-hash': 'a1b2c3d4' };
const SANDBOX_OWNER = { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Sandbox', uid: 'sb-1' };

describe('the validating policy on the Pods a Sandbox runs or can adopt (the controller never compares a Pod with the template)', () => {
  const vap = vapOf('kata');
  /** Judged: selected by the matchCondition, then validated. */
  const judged = (req: AdmissionRequest): string[] | 'not selected' =>
    matches(vap, req) ? validate(vap, req) : 'not selected';

  it.each([
    ['labelled adoptable', { labels: ADOPTABLE }],
    ["carrying a Sandbox's name-hash label", { labels: NAME_HASH }],
    ['owned by a Sandbox', { owners: [SANDBOX_OWNER] }],
    ['owned by a v1alpha1 Sandbox', { owners: [{ ...SANDBOX_OWNER, apiVersion: 'agents.x-k8s.io/v1alpha1' }] }],
  ])('refuses a runc Pod %s at CREATE, naming the Pod and why it is judged', (_what, meta) => {
    const failures = judged({ operation: 'CREATE', object: pod('runc', meta) });
    expect(failures).toEqual([
      `Pod agent-1 (it is, or can become, a Sandbox's Pod): runtimeClassName "runc" is not allowed here: its handler is weaker than kata or unknown, or it is another instance's class; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation); use runtimeClassName "${OWN}"`,
    ]);
  });

  it('refuses such a Pod without a runtime class, naming the Pod field', () => {
    expect(judged({ operation: 'CREATE', object: pod(undefined, { labels: ADOPTABLE }) })).toEqual([
      `Pod agent-1 (it is, or can become, a Sandbox's Pod): spec.runtimeClassName is unset; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation); use runtimeClassName "${OWN}"`,
    ]);
  });

  it("admits such a Pod on an allowed class (the controller's own Pods from a compliant template)", () => {
    expect(judged({ operation: 'CREATE', object: pod(OWN, { labels: NAME_HASH, owners: [SANDBOX_OWNER] }) })).toEqual(
      [],
    );
    expect(judged({ operation: 'CREATE', object: pod('kata-qemu', { labels: ADOPTABLE }) })).toEqual([]);
  });

  it('leaves every other Pod to the other isolation layers: not selected, whatever its class', () => {
    expect(judged({ operation: 'CREATE', object: pod('runc') })).toBe('not selected');
    expect(judged({ operation: 'CREATE', object: pod(undefined, { labels: { app: 'web' } }) })).toBe('not selected');
    const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', uid: 'rs-1' };
    expect(judged({ operation: 'CREATE', object: pod('runc', { owners: [rs] }) })).toBe('not selected');
    // A kind named Sandbox in another group is not the Agent Sandbox.
    const lookalike = { apiVersion: 'example.com/v1', kind: 'Sandbox', uid: 'x-1' };
    expect(judged({ operation: 'CREATE', object: pod('runc', { owners: [lookalike] }) })).toBe('not selected');
  });

  it('judges an UPDATE that adopts a weak Pod (adds the Sandbox as owner), as the controller does', () => {
    const orphan = pod('runc', { labels: NAME_HASH });
    const adopted = pod('runc', { labels: NAME_HASH, owners: [SANDBOX_OWNER] });
    expect(judged({ operation: 'UPDATE', object: adopted, oldObject: orphan })).toHaveLength(1);
    // A compliant one, started after its class got its handler, may be adopted.
    expect(
      validate(datedVapOf('kata'), {
        operation: 'UPDATE',
        object: dated(pod(OWN, { labels: NAME_HASH, owners: [SANDBOX_OWNER] })),
        oldObject: dated(pod(OWN, { labels: NAME_HASH })),
      }),
    ).toEqual([]);
  });

  it('judges an UPDATE that labels a weak Pod for adoption, or re-labels it for another Sandbox', () => {
    expect(
      judged({ operation: 'UPDATE', object: pod('runc', { labels: ADOPTABLE }), oldObject: pod('runc') }),
    ).toHaveLength(1);
    expect(
      judged({
        operation: 'UPDATE',
        object: pod('runc', { labels: { 'agents.x-k8s.io/sandbox-name-hash': 'ffff0000' } }),
        oldObject: pod('runc', { labels: NAME_HASH }),
      }),
    ).toHaveLength(1);
  });

  it('never judges again a weak Pod its Sandbox already owns (tightening is not retroactive), nor orphaning it', () => {
    const owned = pod('runc', { labels: { ...NAME_HASH, team: 'a' }, owners: [SANDBOX_OWNER] });
    const relabelled = pod('runc', { labels: { ...NAME_HASH, team: 'b' }, owners: [SANDBOX_OWNER] });
    expect(judged({ operation: 'UPDATE', object: relabelled, oldObject: owned })).toEqual([]);
    expect(judged({ operation: 'UPDATE', object: pod('runc', { labels: NAME_HASH }), oldObject: owned })).toEqual([]);
  });

  it.each([
    ['a SandboxClaim', { apiVersion: 'extensions.agents.x-k8s.io/v1beta1', kind: 'SandboxClaim', uid: 'sb-1' }],
    [
      'a kind of the Sandbox group that does not exist',
      { apiVersion: 'agents.x-k8s.io/v1beta1', kind: 'Box', uid: 'sb-1' },
    ],
    ['a Sandbox at a version not served', { apiVersion: 'agents.x-k8s.io/v9', kind: 'Sandbox', uid: 'sb-1' }],
  ])(
    'refuses a runc Pod owned by %s: the controller decides by the owner UID, whatever kind or version (issue 36)',
    (_what, owner) => {
      expect(judged({ operation: 'CREATE', object: pod('runc', { owners: [owner] }) })).toEqual([
        expect.stringContaining(
          'Pod agent-1 (it is, or can become, a Sandbox\'s Pod): runtimeClassName "runc" is not allowed here',
        ),
      ]);
    },
  );

  it("a Pod owned under another group with a Sandbox's UID is judged when the controller adds its tracking label", () => {
    // kind ConfigMap, apiVersion v1, the Sandbox's UID: not a Pod the policy can tell from any other ...
    const forged = { apiVersion: 'v1', kind: 'ConfigMap', uid: 'sb-1' };
    expect(judged({ operation: 'CREATE', object: pod('runc', { owners: [forged] }) })).toBe('not selected');
    // ... until the controller, having found it by name and owner UID, patches its metadata
    // (updatePodMetadata: the tracking label), an UPDATE adding an adoption label: refused.
    const patched = {
      operation: 'UPDATE' as const,
      object: pod('runc', { labels: NAME_HASH, owners: [forged] }),
      oldObject: pod('runc', { owners: [forged] }),
    };
    expect(judged(patched)).toEqual([expect.stringContaining('runtimeClassName "runc" is not allowed here')]);
    // The same Pod on an allowed class, created after the class got its handler, is labelled.
    const datedVap = datedVapOf('kata');
    const compliant = {
      operation: 'UPDATE' as const,
      object: dated(pod(OWN, { labels: NAME_HASH, owners: [forged] })),
      oldObject: dated(pod(OWN, { owners: [forged] })),
    };
    expect(matches(datedVap, compliant) ? validate(datedVap, compliant) : 'not selected').toEqual([]);
  });

  it('advisory judges the same Pods the same way (its binding only warns)', () => {
    const advisory = vapOf('kata', false);
    const req = { operation: 'CREATE' as const, object: pod('runc', { labels: ADOPTABLE }) };
    expect(matches(advisory, req)).toBe(true);
    expect(validate(advisory, req)).toEqual(validate(vap, req));
  });

  it('keeps the Sandbox messages exactly as before', () => {
    expect(judged(create('runc'))[0]).toMatch(/^Sandbox runtimeClassName "runc" is not allowed here/);
    expect(judged(create(undefined))[0]).toMatch(/^Sandbox spec\.podTemplate\.spec\.runtimeClassName is unset/);
  });
});

/** A Pod's status write (pods/status UPDATE): the kubelet's, or a tenant's carrying labels. */
function statusWrite(from: Record<string, unknown>, to: Record<string, unknown>): AdmissionRequest {
  return { operation: 'UPDATE', subResource: 'status', object: to, oldObject: from };
}

/** A Binding (pods/binding CREATE) of Pod agent-1, with `labels`. */
function binding(labels?: Record<string, string>): AdmissionRequest {
  const metadata: Record<string, unknown> = { name: 'agent-1', namespace: 'team-a' };
  if (labels !== undefined) metadata.labels = labels;
  return {
    operation: 'CREATE',
    subResource: 'binding',
    object: { apiVersion: 'v1', kind: 'Binding', metadata, target: { kind: 'Node', name: 'node-1' } },
  };
}

describe('the validating policy on the Pod subresources that can change labels (issue 36)', () => {
  const vap = vapOf('kata');
  const judged = (req: AdmissionRequest): string[] | 'not selected' =>
    matches(vap, req) ? validate(vap, req) : 'not selected';
  const withConditions = (p: Record<string, unknown>): Record<string, unknown> => ({
    ...p,
    status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] },
  });

  it("never selects the kubelet's status writes, whatever the Pod (no regression, and cheap)", () => {
    for (const p of [
      pod('runc'),
      pod('runc', { labels: NAME_HASH, owners: [SANDBOX_OWNER] }), // left weak by a tightening
      pod(undefined, { labels: ADOPTABLE }),
      pod(OWN, { labels: { app: 'web' } }),
    ]) {
      expect(judged(statusWrite(p, withConditions(p)))).toBe('not selected');
    }
  });

  it('judges a status write that adds or changes an adoption label like a Pod UPDATE: a weak Pod refused', () => {
    const plain = pod('runc');
    const labelled = withConditions(pod('runc', { labels: NAME_HASH }));
    expect(judged(statusWrite(plain, labelled))).toEqual([
      `Pod agent-1 (it is, or can become, a Sandbox's Pod): runtimeClassName "runc" is not allowed here: its handler is weaker than kata or unknown, or it is another instance's class; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation); use runtimeClassName "${OWN}"`,
    ]);
    expect(judged(statusWrite(pod(undefined), pod(undefined, { labels: ADOPTABLE })))).toEqual([
      expect.stringContaining('spec.runtimeClassName is unset'),
    ]);
    // Re-labelled for another Sandbox.
    expect(
      judged(
        statusWrite(
          pod('runc', { labels: NAME_HASH }),
          pod('runc', { labels: { 'agents.x-k8s.io/sandbox-name-hash': 'ffff0000' } }),
        ),
      ),
    ).toHaveLength(1);
    // A compliant Pod (created after its class got its handler) may be labelled; removing a label
    // or changing another is not selected.
    const datedVap = datedVapOf('kata');
    const compliant = statusWrite(dated(pod(OWN)), dated(pod(OWN, { labels: ADOPTABLE })));
    expect(matches(datedVap, compliant) ? validate(datedVap, compliant) : 'not selected').toEqual([]);
    expect(judged(statusWrite(pod('runc', { labels: ADOPTABLE }), pod('runc')))).toBe('not selected');
    expect(judged(statusWrite(pod('runc'), pod('runc', { labels: { team: 'a' } })))).toBe('not selected');
  });

  it('refuses a Binding carrying an adoption label, whatever the class; admits the scheduler’s (no label, or topology labels)', () => {
    const message = `Binding of Pod agent-1 carries the label agents.x-k8s.io/adoptable or agents.x-k8s.io/sandbox-name-hash: a Binding's labels are copied onto its Pod (Kubernetes 1.33+, PodTopologyLabelsAdmission), and these would let the Agent Sandbox controller adopt the Pod without its runtime class being judged; no scheduler sets them: label the Pod itself (kubeplus.io/sandbox-isolation)`;
    expect(judged(binding(ADOPTABLE))).toEqual([message]);
    expect(judged(binding({ ...NAME_HASH, 'topology.kubernetes.io/zone': 'z1' }))).toEqual([message]);
    expect(judged(binding())).toBe('not selected');
    expect(judged(binding({ 'topology.kubernetes.io/zone': 'z1', 'kubernetes.io/hostname': 'node-1' }))).toBe(
      'not selected',
    );
    // The legacy spelling, POST namespaces/<ns>/bindings: the same Binding, the same refusal.
    const legacy = { ...binding(ADOPTABLE), resource: 'bindings' };
    delete legacy.subResource;
    expect(judged(legacy)).toEqual([message]);
    expect(judged({ ...legacy, object: binding().object })).toBe('not selected');
    // Minimum runc (no allowed-class check) refuses it too; advisory warns the same.
    expect(validate(vapOf('runc'), binding(ADOPTABLE))).toEqual([message]);
    expect(validate(vapOf('kata', false), binding(ADOPTABLE))).toEqual([message]);
  });
});

describe('the validating policy for other minimums', () => {
  it('runsc admits gVisor and Kata classes, rejects runc', () => {
    const vap = vapOf('runsc');
    expect(validate(vap, create('gvisor'))).toEqual([]);
    expect(validate(vap, create('kata-qemu'))).toEqual([]);
    expect(validate(vap, create('runc'))).toHaveLength(1);
  });

  it('runc admits every named class and rejects only an unset one', () => {
    const vap = vapOf('runc');
    expect(validate(vap, create('runc'))).toEqual([]);
    expect(validate(vap, create('no-such-class'))).toEqual([]);
    expect(validate(vap, create(undefined))).toHaveLength(1);
  });

  it('advisory evaluates exactly like enforce (the binding decides Warn instead of Deny)', () => {
    const advisory = vapOf('kata', false);
    for (const req of [create(undefined), create('runc'), create(OWN), update('runc', 'runc')]) {
      expect(validate(advisory, req)).toEqual(validate(vapOf('kata'), req));
    }
  });
});

describe('the defaulting MutatingAdmissionPolicy, evaluated', () => {
  const map = policies('kata', false).find((o) => o.kind === 'MutatingAdmissionPolicy');
  if (map === undefined) throw new Error('no MutatingAdmissionPolicy');

  it('fills an unset runtime class with the instance’s class and touches nothing else', () => {
    const req = create(undefined);
    expect(matches(map, req)).toBe(true);
    const out = mutate(map, req);
    expect(out).toEqual(sandbox(OWN));
  });

  it('fills an empty runtime class', () => {
    const req = create('');
    expect(matches(map, req)).toBe(true);
    expect(mutate(map, req)).toEqual(sandbox(OWN));
  });

  it('leaves an explicit choice alone, even a weaker one (advisory)', () => {
    expect(matches(map, create('runc'))).toBe(false);
  });

  it('skips an object without a Pod template spec instead of failing', () => {
    expect(matches(map, { operation: 'CREATE', object: { kind: 'Sandbox', spec: { podTemplate: {} } } })).toBe(false);
    expect(matches(map, { operation: 'CREATE', object: { kind: 'Sandbox', spec: {} } })).toBe(false);
  });

  it('is then admitted by the advisory validation without warnings', () => {
    const defaulted = mutate(map, create(undefined));
    expect(validate(vapOf('kata', false), { operation: 'CREATE', object: defaulted })).toEqual([]);
  });
});

describe('hand-outs (issue 36): nothing created before its class got its current handler is handed out', () => {
  const SINCE = '2026-12-07T06:00:00Z';
  const instance = makeInstance();
  const owner = { group: instance.group, kind: instance.kind, namespace: instance.namespace, name: instance.name };
  /** The own class re-created with kata at SINCE (the minimum was raised); a platform kata class from long ago. */
  const classes = [
    ...CLASSES.map((c) => ({ ...c, createdAt: '2026-01-01T00:00:00Z' })),
    { name: OWN, handler: 'kata', generated: true, owner, createdAt: SINCE },
  ];
  const policyFor = (layout: 'per-instance' | 'shared', runtimeClasses = classes) => {
    const out = desiredSandboxPolicy({
      instance,
      tenantNamespace: 'team-a',
      spec: { minRuntimeClass: 'kata', enforce: true },
      runtimeClasses,
      mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
      layout,
    });
    const all = [...out.objects, ...out.shared];
    const vap = all.find((o) => o.kind === 'ValidatingAdmissionPolicy');
    if (vap === undefined) throw new Error('no ValidatingAdmissionPolicy');
    return { vap, params: all.find((o) => o.kind === 'SandboxIsolation') };
  };
  const POOL = { apiVersion: 'extensions.agents.x-k8s.io/v1beta1', kind: 'SandboxWarmPool', name: 'p', uid: 'pool' };
  const CLAIM = { apiVersion: 'extensions.agents.x-k8s.io/v1beta1', kind: 'SandboxClaim', name: 'c', uid: 'claim' };
  const warm = (created: string, owners: object[], rc = OWN): Record<string, unknown> => ({
    ...sandbox(rc),
    metadata: { name: 'warm-1', creationTimestamp: created, ownerReferences: owners },
  });
  /** What the claim controller writes when it adopts a warm Sandbox: the claim becomes its (controlling) owner. */
  const adopt = (created: string, rc = OWN): AdmissionRequest => ({
    operation: 'UPDATE',
    oldObject: warm(created, [POOL], rc),
    object: warm(created, [{ ...CLAIM, controller: true }], rc),
  });
  const refusal = `Sandbox warm-1 was created before RuntimeClass "${OWN}" got its current handler (${SINCE}), so it may run the old one; it is not handed out: delete it so that it is re-created; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation)`;

  it.each(['per-instance', 'shared'] as const)(
    '%s: created before or in the same second as the class: refused, naming the class and the time; after: handed out',
    (layout) => {
      const { vap, params } = policyFor(layout);
      expect(validate(vap, adopt('2026-12-07T05:59:59Z'), params)).toEqual([refusal]);
      expect(validate(vap, adopt(SINCE), params)).toEqual([refusal]);
      expect(validate(vap, adopt('2026-12-07T06:00:01Z'), params)).toEqual([]);
    },
  );

  it.each(['per-instance', 'shared'] as const)(
    '%s: an old Sandbox not handed out (its controller writing it, same owners) and any CREATE are judged as before',
    (layout) => {
      const { vap, params } = policyFor(layout);
      const old = warm('2026-01-02T00:00:00Z', [POOL]);
      expect(validate(vap, { operation: 'UPDATE', oldObject: old, object: old }, params)).toEqual([]);
      expect(validate(vap, create(OWN), params)).toEqual([]);
      // Another allowed class's time is its own: a platform kata class from long ago.
      expect(validate(vap, adopt('2026-02-01T00:00:00Z', 'kata-qemu'), params)).toEqual([]);
    },
  );

  it.each(['per-instance', 'shared'] as const)(
    '%s: while the own class is still to be re-created (its time not known), nothing of it is handed out',
    (layout) => {
      const stillOld = classes.map((c) => (c.name === OWN ? { ...c, handler: 'runsc' } : c));
      const { vap, params } = policyFor(layout, stillOld);
      expect(validate(vap, adopt('2026-12-07T07:00:00Z'), params)).toEqual([
        `Sandbox warm-1 is not handed out while RuntimeClass "${OWN}" is being re-created with a new handler (the time it got it is not known yet); try again shortly; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation)`,
      ]);
    },
  );

  it('a Pod given an adoption label, created before its class got its handler: refused', () => {
    const { vap } = policyFor('per-instance');
    const pod = (labels: Record<string, string>): Record<string, unknown> => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p-1', creationTimestamp: '2026-12-07T05:00:00Z', labels },
      spec: { runtimeClassName: OWN, containers: [{ name: 'c', image: 'i' }] },
    });
    const req: AdmissionRequest = {
      operation: 'UPDATE',
      oldObject: pod({}),
      object: pod({ 'agents.x-k8s.io/adoptable': 'true' }),
    };
    expect(validate(vap, req)).toEqual([
      `Pod p-1 was created before RuntimeClass "${OWN}" got its current handler (${SINCE}), so it may run the old one; it is not handed out: delete it so that it is re-created; namespace "team-a" requires sandbox runtime kata or stronger (kubeplus.io/sandbox-isolation)`,
    ]);
  });
});
