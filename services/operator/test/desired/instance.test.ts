import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  DEFAULT_PLATFORM_NAMESPACE,
  decodeInstanceKey,
  encodeInstanceKey,
  instanceIdentity,
  instanceKeyOf,
  parseInstance,
  parseInstanceIdentity,
  splitApiVersion,
  tenantNamespace,
} from '../../src/desired/instance.js';

const agent = {
  apiVersion: 'cloudark.io/v1',
  kind: 'Agent',
  metadata: {
    name: 'team-a-agent-instance',
    namespace: 'team-a',
    uid: 'u-1',
    resourceVersion: '7',
    annotations: { 'kubeplus.io/sandbox-isolation': '{"minRuntimeClass":"kata"}', other: 'x' },
    finalizers: ['a', 'b'],
  },
  spec: { anything: true },
};

describe('parseInstance', () => {
  it('reads the model from an unstructured object', () => {
    const r = parseInstance(agent, 'agents');
    expect(r).toEqual({
      ok: true,
      value: {
        apiVersion: 'cloudark.io/v1',
        group: 'cloudark.io',
        version: 'v1',
        kind: 'Agent',
        plural: 'agents',
        namespace: 'team-a',
        name: 'team-a-agent-instance',
        uid: 'u-1',
        resourceVersion: '7',
        annotations: { 'kubeplus.io/sandbox-isolation': '{"minRuntimeClass":"kata"}', other: 'x' },
        finalizers: ['a', 'b'],
      },
    });
  });

  it('carries deletionTimestamp, whether a string or a Date (client-node deserializes to Date)', () => {
    const asString = parseInstance(
      { ...agent, metadata: { ...agent.metadata, deletionTimestamp: '2026-01-02T03:04:05Z' } },
      'agents',
    );
    const asDate = parseInstance(
      { ...agent, metadata: { ...agent.metadata, deletionTimestamp: new Date('2026-01-02T03:04:05Z') } },
      'agents',
    );
    expect(asString.ok && asString.value.deletionTimestamp).toBe('2026-01-02T03:04:05Z');
    expect(asDate.ok && asDate.value.deletionTimestamp).toBe('2026-01-02T03:04:05.000Z');
    const none = parseInstance(agent, 'agents');
    expect(none.ok && 'deletionTimestamp' in none.value).toBe(false);
  });

  it('defaults missing annotations and finalizers to empty, and drops non-string entries', () => {
    const r = parseInstance(
      {
        apiVersion: 'x.io/v2',
        kind: 'K',
        metadata: { name: 'n', namespace: 's', uid: 'u', annotations: { a: 1, b: 'ok' }, finalizers: ['f', 3] },
      },
      'ks',
    );
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.annotations).toEqual({ b: 'ok' });
    expect(r.value.finalizers).toEqual(['f']);
    expect(r.value.resourceVersion).toBe('');
  });

  it.each([
    [null, 'instance must be an object'],
    [[], 'instance must be an object'],
    [{ ...agent, apiVersion: '' }, 'apiVersion must be a non-empty string'],
    [{ ...agent, kind: 3 }, 'kind must be a non-empty string'],
    [{ ...agent, metadata: { ...agent.metadata, name: undefined } }, 'metadata.name must be a non-empty string'],
    [
      { ...agent, metadata: { ...agent.metadata, namespace: '' } },
      'metadata.namespace must be set: instances are namespaced',
    ],
    [{ ...agent, metadata: { ...agent.metadata, uid: undefined } }, 'metadata.uid must be a non-empty string'],
    [{ apiVersion: 'a/v1', kind: 'K' }, 'metadata.name must be a non-empty string'],
  ])('rejects %j with a clear error', (obj, error) => {
    const r = parseInstance(obj, 'agents');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors).toContain(error);
  });

  it('rejects an empty plural', () => {
    const r = parseInstance(agent, '');
    expect(r.ok).toBe(false);
  });

  it('never throws, whatever it is given', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const r = parseInstance(v, 'agents');
        expect(typeof r.ok).toBe('boolean');
      }),
    );
  });
});

describe('splitApiVersion', () => {
  it('splits group and version; core has no group', () => {
    expect(splitApiVersion('cloudark.io/v1')).toEqual({ group: 'cloudark.io', version: 'v1' });
    expect(splitApiVersion('v1')).toEqual({ group: '', version: 'v1' });
  });
});

describe('instance identity', () => {
  it('is group/Kind/namespace/name and parses back', () => {
    const id = { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'i' };
    expect(instanceIdentity(id)).toBe('cloudark.io/Agent/team-a/i');
    expect(parseInstanceIdentity('cloudark.io/Agent/team-a/i')).toEqual(id);
  });

  it('round-trips any identity whose parts contain no slash', () => {
    const part = fc.stringMatching(/^[a-z0-9.-]{1,20}$/);
    fc.assert(
      fc.property(
        fc.record({ group: fc.oneof(fc.constant(''), part), kind: part, namespace: part, name: part }),
        (id) => {
          expect(parseInstanceIdentity(instanceIdentity(id))).toEqual(id);
        },
      ),
    );
  });

  it.each(['', 'a/b/c', 'a/b/c/d/e', 'g//ns/n', 'g/K//n', 'g/K/ns/'])('rejects malformed %j', (s) => {
    expect(parseInstanceIdentity(s)).toBeUndefined();
  });

  it('gives a work-queue key and a log form', () => {
    const r = parseInstance(agent, 'agents');
    if (!r.ok) throw new Error('fixture must parse');
    const key = instanceKeyOf(r.value);
    expect(key).toEqual({
      group: 'cloudark.io',
      version: 'v1',
      kind: 'Agent',
      plural: 'agents',
      namespace: 'team-a',
      name: 'team-a-agent-instance',
    });
  });
});

describe('string work-queue keys', () => {
  const key = { group: 'cloudark.io', version: 'v1', kind: 'Agent', plural: 'agents', namespace: 'team-a', name: 'i' };

  it('encodes and decodes', () => {
    expect(encodeInstanceKey(key)).toBe('cloudark.io/v1/Agent/agents/team-a/i');
    expect(decodeInstanceKey('cloudark.io/v1/Agent/agents/team-a/i')).toEqual(key);
    expect(decodeInstanceKey(encodeInstanceKey({ ...key, group: '' }))).toEqual({ ...key, group: '' });
  });

  it.each(['', 'team-a/i', 'g/v/K/p/ns/n/extra', 'g/v//p/ns/n', 'g/v/K/p/ns/'])('rejects %j', (s) => {
    expect(decodeInstanceKey(s)).toBeUndefined();
  });
});

describe('tenantNamespace', () => {
  it('is the instance namespace for an instance outside the platform namespace', () => {
    expect(tenantNamespace({ namespace: 'team-a', name: 'inst' })).toEqual({
      ok: true,
      value: { name: 'team-a', createdByOperator: false },
    });
  });

  it('is a namespace named after the instance, created by the operator, in the platform namespace', () => {
    expect(DEFAULT_PLATFORM_NAMESPACE).toBe('kubeplus');
    expect(tenantNamespace({ namespace: 'kubeplus', name: 'team-b-agent' })).toEqual({
      ok: true,
      value: { name: 'team-b-agent', createdByOperator: true },
    });
  });

  it('honours a configured platform namespace', () => {
    expect(tenantNamespace({ namespace: 'platform', name: 'x' }, 'platform')).toEqual({
      ok: true,
      value: { name: 'x', createdByOperator: true },
    });
    expect(tenantNamespace({ namespace: 'kubeplus', name: 'x' }, 'platform')).toEqual({
      ok: true,
      value: { name: 'kubeplus', createdByOperator: false },
    });
  });

  it.each(['agent.v2', 'a'.repeat(64), 'Upper'])('reports an instance name that cannot be a namespace: %j', (name) => {
    const r = tenantNamespace({ namespace: 'kubeplus', name });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors[0]).toContain('not a valid namespace name');
  });
});
