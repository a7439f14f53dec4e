import { describe, expect, it } from '@jest/globals';
import {
  InvalidAnnotationIndex,
  invalidAnnotationsOf,
} from '../../../src/controllers/compliance/invalid-annotations.js';
import type { ObjectRef } from '../../../src/controllers/compliance/openreport.js';

const agent = (namespace: string, name: string): ObjectRef => ({
  apiVersion: 'cloudark.io/v1',
  kind: 'Agent',
  namespace,
  name,
});
const GOOD_NODE = '{"nodeSelector":{"pool":"a"}}';
const BAD_NODE = '{"nodeSelector":{"pool":"a"},"tolerations":[{"key":"k","operator":"Equals"}]}';

describe('invalidAnnotationsOf', () => {
  it('names each rejected isolation annotation with the operator’s own errors, and nothing else', () => {
    const ref = agent('team-a', 'a');
    expect(invalidAnnotationsOf(ref, { 'kubeplus.io/node-isolation': GOOD_NODE, other: '{' })).toEqual([]);
    expect(invalidAnnotationsOf(ref, undefined)).toEqual([]);
    const found = invalidAnnotationsOf(ref, {
      'kubeplus.io/node-isolation': BAD_NODE,
      'kubeplus.io/sandbox-isolation': '{"minRuntimeClass":"gold"}',
    });
    expect(found.map((f) => [f.annotation, f.policy])).toEqual([
      ['kubeplus.io/node-isolation', 'node-isolation'],
      ['kubeplus.io/sandbox-isolation', 'sandbox-isolation'],
    ]);
    expect(found[0]?.errors.join()).toMatch(/^tolerations\[0\]\.operator must be one of/);
    expect(found[0]?.instance).toBe(ref);
  });
});

describe('InvalidAnnotationIndex', () => {
  it('files findings under the tenant namespace and reports which namespaces changed', () => {
    const index = new InvalidAnnotationIndex('kubeplus');
    const a = agent('team-a', 'a');
    const bad = invalidAnnotationsOf(a, { 'kubeplus.io/node-isolation': BAD_NODE });
    expect(index.update('k/a', a, bad)).toEqual(['team-a']);
    expect(index.update('k/a', a, bad)).toEqual([]); // unchanged: no audit brought forward
    expect(index.inTenant('team-a')).toEqual(bad);
    expect(index.tenants()).toEqual(['team-a']);
    // Fixed: the namespace changes again and is empty.
    expect(index.update('k/a', a, [])).toEqual(['team-a']);
    expect(index.inTenant('team-a')).toEqual([]);
    expect(index.tenants()).toEqual([]);
  });

  it('an instance in the platform namespace binds the namespace named after it; deleted, it is gone', () => {
    const index = new InvalidAnnotationIndex('kubeplus');
    const p = agent('kubeplus', 'team-z');
    const bad = invalidAnnotationsOf(p, { 'kubeplus.io/sandbox-isolation': '{}' });
    expect(index.update('k/p', p, bad)).toEqual(['team-z']);
    expect(index.update('k/p', p, undefined)).toEqual(['team-z']);
    expect(index.tenants()).toEqual([]);
  });

  it('two instances in one namespace: both named, in a stable order', () => {
    const index = new InvalidAnnotationIndex('kubeplus');
    const [a, b] = [agent('team-a', 'b'), agent('team-a', 'a')];
    index.update('k/b', a, invalidAnnotationsOf(a, { 'kubeplus.io/node-isolation': BAD_NODE }));
    index.update('k/a', b, invalidAnnotationsOf(b, { 'kubeplus.io/node-isolation': '{' }));
    expect(index.inTenant('team-a').map((f) => f.instance.name)).toEqual(['a', 'b']);
  });
});
