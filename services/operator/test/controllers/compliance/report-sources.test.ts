import { describe, expect, it } from '@jest/globals';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  generatedRuntimeClassChanges,
  SandboxPolicyIndex,
} from '../../../src/controllers/compliance/report-sources.js';
import type { SandboxInstanceMeta } from '../../../src/desired/sandbox-peers.js';
import { ResourceInformer } from '../../../src/runtime/informer.js';
import { FakeClock, FakeInformerSource } from '../../runtime/fakes.js';

const OWNER = 'kubeplus.io/owner';

function meta(namespace: string, name: string, minRuntimeClass: string, enforce = true): SandboxInstanceMeta {
  return {
    group: 'cloudark.io',
    kind: 'Agent',
    namespace,
    name,
    annotation: JSON.stringify({ minRuntimeClass, enforce }),
  };
}

describe('SandboxPolicyIndex', () => {
  it('names a namespace when the policy in force there changes, and only then', () => {
    const index = new SandboxPolicyIndex('kubeplus');
    // An instance in its own namespace binds that namespace.
    expect(index.update('a', meta('team-a', 'x', 'runsc'))).toEqual(['team-a']);
    expect(index.update('a', meta('team-a', 'x', 'runsc'))).toEqual([]); // same policy
    expect(index.update('a', meta('team-a', 'x', 'kata'))).toEqual(['team-a']); // raised
    expect(index.update('a', meta('team-a', 'x', 'kata', false))).toEqual(['team-a']); // advisory now
    // A second, weaker instance bound to the same namespace changes nothing: the strictest rules.
    expect(index.update('b', meta('team-a', 'y', 'runc', false))).toEqual([]);
    // The first one goes: the weaker one is what is left in force.
    expect(index.update('a', undefined)).toEqual(['team-a']);
    expect(index.update('b', undefined)).toEqual(['team-a']); // none left: the Report goes
    expect(index.update('b', undefined)).toEqual([]);
  });

  it('an invalid annotation binds nothing; an instance in the platform namespace binds its own tenant namespace', () => {
    const index = new SandboxPolicyIndex('kubeplus');
    expect(index.update('a', { ...meta('team-a', 'x', 'runsc'), annotation: '{not json' })).toEqual([]);
    expect(index.update('p', meta('kubeplus', 'team-p', 'runsc'))).toEqual(['team-p']);
    // An annotation turned invalid leaves the index: the namespace is audited once more, and the
    // audit judges by the last good minimum (from the kept class; weak-sandboxes.ts).
    expect(index.update('p', { ...meta('kubeplus', 'team-p', 'runsc'), annotation: '' })).toEqual(['team-p']);
  });
});

describe('generatedRuntimeClassChanges', () => {
  function rc(name: string, handler: string, owner?: string): KubernetesObject & { handler: string } {
    return {
      apiVersion: 'node.k8s.io/v1',
      kind: 'RuntimeClass',
      metadata: { name, resourceVersion: `${Math.random()}`, annotations: owner ? { [OWNER]: owner } : {} },
      handler,
    };
  }

  it("audits the owner's tenant namespace when a generated class appears, changes handler or goes", async () => {
    const source = new FakeInformerSource<KubernetesObject>();
    const informer = new ResourceInformer(source, { name: 'runtimeclasses', clock: new FakeClock() });
    informer.start();
    await informer.waitForSync();
    source.upsert(rc('kubeplus-sandbox-x', 'runsc', 'cloudark.io/Agent/team-a/x'));
    const keys: string[] = [];
    const unsubscribe = generatedRuntimeClassChanges(informer, 'kubeplus').subscribe((k) => keys.push(k));
    expect(keys).toEqual(['team-a']); // replayed

    source.upsert(rc('kubeplus-sandbox-x', 'runsc', 'cloudark.io/Agent/team-a/x')); // a label, say: same handler
    source.upsert(rc('platform', 'kata')); // not generated: the period's
    source.upsert(rc('kubeplus-sandbox-x', 'kata', 'cloudark.io/Agent/team-a/x'));
    source.upsert(rc('kubeplus-sandbox-p', 'kata', 'cloudark.io/Agent/kubeplus/team-p'));
    source.remove(rc('kubeplus-sandbox-x', 'kata', 'cloudark.io/Agent/team-a/x'));
    expect(keys).toEqual(['team-a', 'team-a', 'team-p', 'team-a']);

    unsubscribe();
    source.upsert(rc('kubeplus-sandbox-x', 'runc', 'cloudark.io/Agent/team-a/x'));
    expect(keys).toHaveLength(4);
  });
});
