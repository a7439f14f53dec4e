import { describe, expect, it } from '@jest/globals';
import {
  findWeakSandboxes,
  lastGoodMinimums,
  namespaceSandboxPolicy,
  type SandboxPodLike as PodLike,
  parseHandlerLevels,
  runtimeClassOf,
  type SandboxLike,
  sandboxPodName,
  sandboxTenantNamespaces,
} from '@kubeplus-isolation/spec';
import { lastGoodMinimumsFrom, RuntimeClassIndex } from '../../../src/controllers/instances/runtime-class-index.js';
import { countSandboxModes, type SandboxInstanceMeta } from '../../../src/desired/sandbox-peers.js';
import type { RuntimeClassInfo } from '../../../src/desired/sandbox-policy.js';

const instance = (namespace: string, name: string, annotation: string): SandboxInstanceMeta => ({
  group: 'cloudark.io',
  kind: 'Agent',
  namespace,
  name,
  annotation,
});
const spec = (minRuntimeClass: string, enforce = true) => JSON.stringify({ minRuntimeClass, enforce });

const CLASSES: RuntimeClassInfo[] = [
  { name: 'fast', handler: 'runc', generated: false },
  { name: 'gvisor', handler: 'runsc', generated: false },
  { name: 'vm', handler: 'kata-qemu', generated: false },
  { name: 'mystery', handler: 'my-vm', generated: false },
];

const sandbox = (name: string, runtimeClassName?: unknown, uid?: string): SandboxLike => ({
  metadata: { name, ...(uid === undefined ? {} : { uid }) },
  spec: { podTemplate: { spec: runtimeClassName === undefined ? {} : { runtimeClassName } } },
});

describe('namespaceSandboxPolicy', () => {
  it('is the strongest minimum bound to the namespace, enforcing if any instance enforces', () => {
    const instances = [
      instance('team-a', 'a1', spec('runsc', false)),
      instance('team-a', 'a2', spec('kata', false)),
      instance('team-a', 'a3', spec('runc', true)),
      instance('team-b', 'b1', spec('runc', false)),
      instance('team-a', 'bad', '{not json'),
    ];
    expect(namespaceSandboxPolicy(instances, 'team-a')).toEqual({ minimum: 'kata', enforce: true });
    expect(namespaceSandboxPolicy(instances, 'team-b')).toEqual({ minimum: 'runc', enforce: false });
    expect(namespaceSandboxPolicy(instances, 'team-c')).toBeUndefined();
    expect(namespaceSandboxPolicy([instance('team-c', 'bad', '{}x')], 'team-c')).toBeUndefined();
  });

  it('places an instance of the platform namespace in the namespace named after it', () => {
    const instances = [instance('kubeplus', 'tenant-x', spec('kata'))];
    expect(namespaceSandboxPolicy(instances, 'tenant-x', 'kubeplus')).toEqual({ minimum: 'kata', enforce: true });
    expect(namespaceSandboxPolicy(instances, 'kubeplus', 'kubeplus')).toBeUndefined();
    expect(sandboxTenantNamespaces([...instances, instance('b', 'i', spec('runc')), instance('a', 'i', 'x')])).toEqual([
      'b',
      'tenant-x',
    ]);
  });

  it('counts an invalid annotation with its last good minimum, read from the class generated for it', () => {
    const owner = (name: string, namespace = 'team-c') => ({ group: 'cloudark.io', kind: 'Agent', namespace, name });
    const classes: RuntimeClassInfo[] = [
      ...CLASSES,
      { name: 'kubeplus-sandbox-was-kata', handler: 'kata', generated: true, owner: owner('was-kata') },
      { name: 'kubeplus-sandbox-was-odd', handler: 'kata-fc', generated: true, owner: owner('was-odd') },
      // Generated for the instance but not its own name (held by another): says nothing of it.
      { name: 'something-else', handler: 'kata', generated: true, owner: owner('other') },
    ];
    const lastGood = lastGoodMinimums(classes, { runc: 'runc', runsc: 'runsc', kata: 'kata' });
    expect(lastGood(owner('was-kata'))).toBe('kata');
    expect(lastGood(owner('was-odd'))).toBe('kata'); // not a configured handler: by its prefix
    expect(lastGood(owner('other'))).toBeUndefined();
    expect(lastGood(owner('was-kata', 'team-d'))).toBeUndefined(); // another instance of that name
    // The operator's answer, from its RuntimeClass index: the same for every instance asked.
    const index = new RuntimeClassIndex();
    for (const rc of classes) index.set(rc.name, rc);
    const fromIndex = lastGoodMinimumsFrom(index, { runc: 'runc', runsc: 'runsc', kata: 'kata' });
    for (const asked of [owner('was-kata'), owner('was-odd'), owner('other'), owner('was-kata', 'team-d')]) {
      expect(fromIndex(asked)).toBe(lastGood(asked));
    }

    const invalid = instance('team-c', 'was-kata', '{not json');
    const weaker = instance('team-c', 'valid', spec('runsc', true));
    expect(namespaceSandboxPolicy([invalid, weaker], 'team-c', undefined, lastGood)).toEqual({
      minimum: 'kata',
      enforce: true,
    });
    expect(namespaceSandboxPolicy([invalid], 'team-c', undefined, lastGood)).toEqual({
      minimum: 'kata',
      enforce: false,
    });
    // Never valid (no class): binds nothing, as without a last good lookup at all.
    expect(namespaceSandboxPolicy([instance('team-c', 'never', 'x')], 'team-c', undefined, lastGood)).toBeUndefined();
    expect(namespaceSandboxPolicy([invalid], 'team-c')).toBeUndefined();
    expect(sandboxTenantNamespaces([invalid, instance('team-e', 'never', 'x')], undefined, lastGood)).toEqual([
      'team-c',
    ]);
  });

  it('counts the policies in force by mode', () => {
    expect(
      countSandboxModes([
        instance('a', '1', spec('kata', true)),
        instance('b', '2', spec('runsc', false)),
        instance('c', '3', JSON.stringify({ minRuntimeClass: 'kata' })), // enforce defaults to true
        instance('d', '4', 'invalid'),
      ]),
    ).toEqual({ enforce: 2, advisory: 1 });
  });
});

describe('findWeakSandboxes', () => {
  const sandboxes = [
    sandbox('unset'),
    sandbox('runc-class', 'fast', 'u-1'),
    sandbox('gvisor-class', 'gvisor'),
    sandbox('vm-class', 'vm'),
    sandbox('gone', 'deleted-class'),
    sandbox('unknown-handler', 'mystery'),
    sandbox('not-a-string', 7),
    { metadata: {}, spec: {} },
    { spec: 'odd' } as unknown as SandboxLike,
  ];

  it('finds the Sandboxes below a kata minimum: unset, weaker, missing or unknown classes', () => {
    expect(findWeakSandboxes('kata', sandboxes, CLASSES)).toEqual([
      { name: 'unset', runtimeClassName: '' },
      { name: 'runc-class', uid: 'u-1', runtimeClassName: 'fast', handler: 'runc', level: 'runc' },
      { name: 'gvisor-class', runtimeClassName: 'gvisor', handler: 'runsc', level: 'runsc' },
      { name: 'gone', runtimeClassName: 'deleted-class' },
      { name: 'unknown-handler', runtimeClassName: 'mystery', handler: 'my-vm' },
      { name: 'not-a-string', runtimeClassName: '' },
    ]);
  });

  it('a weaker minimum leaves the stronger ones; runc leaves all but the unset', () => {
    expect(findWeakSandboxes('runsc', sandboxes, CLASSES).map((s) => s.name)).toEqual([
      'unset',
      'runc-class',
      'gone',
      'unknown-handler',
      'not-a-string',
    ]);
    expect(findWeakSandboxes('runc', sandboxes, CLASSES).map((s) => s.name)).toEqual(['unset', 'not-a-string']);
  });

  it('judges handlers by the configured levels', () => {
    const levels = parseHandlerLevels('my-vm=kata');
    if (!levels.ok) throw new Error('levels');
    expect(findWeakSandboxes('kata', [sandbox('m', 'mystery')], CLASSES, levels.value)).toEqual([]);
  });

  it('reads the runtime class at spec.podTemplate.spec.runtimeClassName only', () => {
    expect(runtimeClassOf(sandbox('a', 'vm'))).toBe('vm');
    expect(runtimeClassOf({ spec: { runtimeClassName: 'vm' } })).toBe('');
    expect(runtimeClassOf({ spec: { podTemplate: [] } })).toBe('');
    expect(runtimeClassOf({})).toBe('');
  });
});

describe('findWeakSandboxes judges what runs: the Pod behind each Sandbox', () => {
  const withPod = (name: string, runtimeClassName: string, uid: string, podName?: string): SandboxLike => ({
    metadata: {
      name,
      uid,
      ...(podName === undefined ? {} : { annotations: { 'agents.x-k8s.io/pod-name': podName } }),
    },
    spec: { podTemplate: { spec: { runtimeClassName } } },
  });
  const pod = (name: string, runtimeClassName: string | undefined, ownerUid?: string): PodLike => ({
    metadata: { name, ...(ownerUid === undefined ? {} : { ownerReferences: [{ uid: ownerUid, controller: true }] }) },
    spec: runtimeClassName === undefined ? {} : { runtimeClassName },
  });
  const pods = (...list: PodLike[]) => list;

  it('fails a compliant Sandbox whose own Pod (by controller UID) runs a weaker class, naming the Pod', () => {
    expect(
      findWeakSandboxes(
        'kata',
        [withPod('agent-1', 'vm', 'sb-1')],
        CLASSES,
        undefined,
        pods(pod('agent-1', 'fast', 'sb-1')),
      ),
    ).toEqual([
      {
        name: 'agent-1',
        uid: 'sb-1',
        runtimeClassName: 'vm',
        handler: 'kata-qemu',
        level: 'kata',
        pod: { name: 'agent-1', runtimeClassName: 'fast', handler: 'runc', level: 'runc' },
      },
    ]);
  });

  it('of the Pods it controls (the annotation only says where the controller looks), names the one that falls short; judges an unset Pod class', () => {
    const found = findWeakSandboxes(
      'kata',
      [withPod('s', 'vm', 'sb-2', 'spare')],
      CLASSES,
      undefined,
      pods(pod('s', 'vm', 'sb-2'), pod('spare', undefined, 'sb-2')),
    );
    expect(found.map((w) => w.pod)).toEqual([{ name: 'spare', runtimeClassName: '' }]);
    expect(sandboxPodName(withPod('s', 'vm', 'sb-2', 'spare'))).toBe('spare');
    expect(sandboxPodName(withPod('s', 'vm', 'sb-2'))).toBe('s');
  });

  it('passes a Sandbox whose Pod meets the minimum, whose Pod is not its own, or that has no Pod yet', () => {
    const list = [withPod('ok', 'vm', 'u-ok'), withPod('foreign', 'vm', 'u-f'), withPod('none', 'vm', 'u-n')];
    const found = findWeakSandboxes(
      'kata',
      list,
      CLASSES,
      undefined,
      // 'foreign': a weak Pod of that name the controller refused to adopt does not run behind it.
      pods(pod('ok', 'vm', 'u-ok'), pod('foreign', 'fast')),
    );
    expect(found).toEqual([]);
  });

  it('reports the Sandbox itself, not its Pod, when its own class already falls short', () => {
    const found = findWeakSandboxes(
      'kata',
      [withPod('w', 'fast', 'u-w')],
      CLASSES,
      undefined,
      pods(pod('w', 'fast', 'u-w')),
    );
    expect(found).toEqual([{ name: 'w', uid: 'u-w', runtimeClassName: 'fast', handler: 'runc', level: 'runc' }]);
  });
});
