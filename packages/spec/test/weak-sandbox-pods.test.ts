/**
 * Issue 36, path 4: the Report finds a Sandbox's Pod as the upstream controller decides it (v0.5.6+,
 * v1.0.1 `checkOwnership`): the Pod whose CONTROLLER owner reference carries the Sandbox's UID,
 * whatever apiVersion, kind or name that reference names — not by the `agents.x-k8s.io/pod-name`
 * annotation or the Sandbox's name.
 */
import { describe, expect, it } from '@jest/globals';
import {
  controllerUidOf,
  findWeakSandboxes,
  indexSandboxPods,
  type RuntimeClassHandler,
  type SandboxLike,
  type SandboxPodLike,
} from '@kubeplus-isolation/spec';

const CLASSES: RuntimeClassHandler[] = [
  { name: 'runc', handler: 'runc' },
  { name: 'gvisor', handler: 'runsc' },
  { name: 'vm', handler: 'kata-qemu' },
];

const sandbox = (name: string, uid: string | undefined, runtimeClassName: string, podName?: string): SandboxLike => ({
  metadata: {
    name,
    ...(uid === undefined ? {} : { uid }),
    ...(podName === undefined ? {} : { annotations: { 'agents.x-k8s.io/pod-name': podName } }),
  },
  spec: { podTemplate: { spec: { runtimeClassName } } },
});

interface Owner {
  apiVersion: string;
  kind: string;
  uid: string;
  controller?: boolean;
}
const SANDBOX = (uid: string): Owner => ({
  apiVersion: 'agents.x-k8s.io/v1beta1',
  kind: 'Sandbox',
  uid,
  controller: true,
});
/** A forged reference: another kind, the Sandbox's UID. The controller takes it all the same. */
const CONFIG_MAP = (uid: string): Owner => ({ apiVersion: 'v1', kind: 'ConfigMap', uid, controller: true });

const pod = (name: string, runtimeClassName: string | undefined, ...owners: Owner[]): SandboxPodLike => ({
  metadata: {
    name,
    ...(owners.length === 0 ? {} : { ownerReferences: owners.map((o) => ({ ...o, name: `owner-of-${name}` })) }),
  },
  spec: runtimeClassName === undefined ? {} : { runtimeClassName },
});

describe('controllerUidOf', () => {
  it('reads the first owner reference marked controller, as metav1.GetControllerOf', () => {
    expect(controllerUidOf(pod('p', 'runc', SANDBOX('sb-1')))).toBe('sb-1');
    expect(controllerUidOf(pod('p', 'runc', { ...SANDBOX('x'), controller: false }, CONFIG_MAP('sb-2')))).toBe('sb-2');
    expect(controllerUidOf(pod('p', 'runc', { ...SANDBOX('x'), controller: false }))).toBeUndefined();
    expect(controllerUidOf(pod('p', 'runc'))).toBeUndefined();
  });

  it('tolerates any shape', () => {
    expect(controllerUidOf({})).toBeUndefined();
    expect(controllerUidOf({ metadata: { ownerReferences: [null, undefined, { controller: true }] } })).toBeUndefined();
    expect(controllerUidOf({ metadata: { ownerReferences: 'x' as unknown as [] } })).toBeUndefined();
    expect(controllerUidOf({ metadata: { ownerReferences: [{ controller: true, uid: '' }] } })).toBeUndefined();
  });
});

describe("findWeakSandboxes finds a Sandbox's Pod by its controller's UID", () => {
  it('fails a compliant Sandbox whose UID a forged-kind runc Pod carries, naming that Pod', () => {
    const found = findWeakSandboxes('kata', [sandbox('agent-1', 'sb-1', 'vm')], CLASSES, undefined, [
      pod('impostor', 'runc', CONFIG_MAP('sb-1')),
    ]);
    expect(found).toEqual([
      {
        name: 'agent-1',
        uid: 'sb-1',
        runtimeClassName: 'vm',
        handler: 'kata-qemu',
        level: 'kata',
        pod: { name: 'impostor', runtimeClassName: 'runc', handler: 'runc', level: 'runc' },
      },
    ]);
  });

  it('whatever the Pod is named and whatever the annotation says', () => {
    const s = sandbox('agent-1', 'sb-1', 'vm', 'elsewhere');
    const pods = [pod('elsewhere', 'vm'), pod('agent-1', 'vm'), pod('unrelated-name', 'gvisor', SANDBOX('sb-1'))];
    expect(findWeakSandboxes('kata', [s], CLASSES, undefined, pods).map((w) => w.pod?.name)).toEqual([
      'unrelated-name',
    ]);
  });

  it('does not take a Pod of its name or annotation that it does not control (the controller would have to adopt it, a judged UPDATE)', () => {
    const s = sandbox('agent-1', 'sb-1', 'vm', 'spare');
    const pods = [
      pod('agent-1', 'runc'), // unowned, of its name
      pod('spare', 'runc', SANDBOX('sb-other')), // another Sandbox's
      pod('x', 'runc', { ...SANDBOX('sb-1'), controller: false }), // an owner, not the controller
    ];
    expect(findWeakSandboxes('kata', [s], CLASSES, undefined, pods)).toEqual([]);
  });

  it('of several Pods it controls (the controller refuses to choose, but they run), names the first that falls short', () => {
    const pods = [
      pod('a', 'vm', SANDBOX('sb-1')),
      pod('b', undefined, CONFIG_MAP('sb-1')),
      pod('c', 'runc', SANDBOX('sb-1')),
    ];
    const found = findWeakSandboxes('kata', [sandbox('s', 'sb-1', 'vm')], CLASSES, undefined, pods);
    expect(found.map((w) => w.pod)).toEqual([{ name: 'b', runtimeClassName: '' }]);
  });

  it('passes a Sandbox whose controlled Pods all meet the minimum, or that has none', () => {
    const pods = [pod('a', 'vm', SANDBOX('sb-1')), pod('b', 'runc', SANDBOX('sb-9'))];
    const list = [sandbox('s', 'sb-1', 'vm'), sandbox('none', 'sb-2', 'vm')];
    expect(findWeakSandboxes('kata', list, CLASSES, undefined, pods)).toEqual([]);
  });

  it('a Sandbox without a uid (not read from an API server) falls back to the Pod of its name or annotation', () => {
    const found = findWeakSandboxes('kata', [sandbox('s', undefined, 'vm', 'spare')], CLASSES, undefined, [
      pod('spare', 'runc'),
    ]);
    expect(found.map((w) => w.pod?.name)).toEqual(['spare']);
  });

  it('judges several pages of Sandboxes against one index the same as against the list', () => {
    const pods = [pod('impostor', 'runc', CONFIG_MAP('sb-1')), pod('ok', 'vm', SANDBOX('sb-2'))];
    const list = [sandbox('a', 'sb-1', 'vm'), sandbox('b', 'sb-2', 'vm')];
    const index = indexSandboxPods(pods);
    expect(findWeakSandboxes('kata', list, CLASSES, undefined, index)).toEqual(
      findWeakSandboxes('kata', list, CLASSES, undefined, pods),
    );
    expect(index.byControllerUid.get('sb-1')?.map((p) => p.metadata?.name)).toEqual(['impostor']);
  });
});
