import { describe, expect, it } from '@jest/globals';
import type { RuntimeLevel } from '@kubeplus-isolation/spec';
import type { ManagedObject } from '../../src/desired/objects.js';
import { desiredSandboxPolicy } from '../../src/desired/sandbox-policy.js';
import { type AdmissionRequest, matches, mutate, validate } from './admission-emulator.js';
import { makeInstance } from './helpers.js';

const OWN = 'kubeplus-sandbox-team-a-agent-instance';
/** Another tenant's generated class: its handler is kata today. */
const OTHER = 'kubeplus-sandbox-team-b-agent-instance';
const CLASSES = [
  { name: 'runc', handler: 'runc', generated: false },
  { name: 'gvisor', handler: 'runsc', generated: false },
  { name: 'kata-qemu', handler: 'kata-qemu', generated: false },
  { name: OTHER, handler: 'kata', generated: true },
];

function policies(min: RuntimeLevel, enforce: boolean): ManagedObject[] {
  return desiredSandboxPolicy({
    instance: makeInstance(),
    tenantNamespace: 'team-a',
    spec: { minRuntimeClass: min, enforce },
    runtimeClasses: CLASSES,
    mutatingPolicyApiVersion: 'admissionregistration.k8s.io/v1',
  }).objects;
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
    // The same adoption of a compliant Sandbox: admitted.
    expect(
      validate(vap, { operation: 'UPDATE', object: owned(OWN, 'claim-1'), oldObject: owned(OWN, 'pool-1') }),
    ).toEqual([]);
    // The owner's controller updating its weak Sandbox, or the garbage collector orphaning it: not judged.
    expect(
      validate(vap, { operation: 'UPDATE', object: owned('runc', 'pool-1'), oldObject: owned('runc', 'pool-1') }),
    ).toEqual([]);
    expect(validate(vap, { operation: 'UPDATE', object: sandbox('runc'), oldObject: owned('runc', 'pool-1') })).toEqual(
      [],
    );
  });

  it('judges a changed runtime class on UPDATE', () => {
    expect(validate(vap, update(OWN, 'runc'))).toHaveLength(1);
    expect(validate(vap, update('runc', undefined))).toHaveLength(1);
    expect(validate(vap, update('runc', OWN))).toEqual([]);
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
