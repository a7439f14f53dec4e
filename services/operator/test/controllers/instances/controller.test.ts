import { describe, expect, it } from '@jest/globals';
import { ApiError, type ClusterPort } from '../../../src/cluster/port.js';
import { instancesReconciler } from '../../../src/controllers/instances/controller.js';
import type { InstanceReconciler, ReconcileResult } from '../../../src/controllers/instances/reconciler.js';
import { ownedObjectsReconciler } from '../../../src/controllers/owned-objects/controller.js';
import type {
  OrphanCleanup,
  OrphanResult,
  OwnedTarget,
} from '../../../src/controllers/owned-objects/orphan-cleanup.js';
import { abortablePort, type ReconcilerFactory } from '../../../src/controllers/reconcile-call.js';
import type { InstanceKey } from '../../../src/desired/instance.js';
import { FakeCluster } from '../../cluster/fake-cluster.js';
import { captureLogger, flush } from '../../runtime/fakes.js';

const KEY = 'cloudark.io/v1/Agent/agents/team-a/agent-x';
const INSTANCE: InstanceKey = {
  group: 'cloudark.io',
  version: 'v1',
  kind: 'Agent',
  plural: 'agents',
  namespace: 'team-a',
  name: 'agent-x',
};

/** A reconciler double recording what it was asked, answering from scripts. */
function scripted(answers: {
  reconcile?: (key: InstanceKey) => Promise<ReconcileResult>;
  cleanupOrphan?: (ref: OwnedTarget) => Promise<OrphanResult>;
}): {
  factory: ReconcilerFactory<Pick<InstanceReconciler, 'reconcile'> & Pick<OrphanCleanup, 'cleanupOrphan'>>;
  ports: ClusterPort[];
  calls: string[];
} {
  const ports: ClusterPort[] = [];
  const calls: string[] = [];
  return {
    ports,
    calls,
    factory: (port) => {
      ports.push(port);
      return {
        reconcile: async (key) => {
          calls.push(`reconcile ${key.namespace}/${key.name}`);
          return answers.reconcile ? answers.reconcile(key) : {};
        },
        cleanupOrphan: async (ref) => {
          calls.push(`cleanupOrphan ${ref.kind}/${ref.name}`);
          return answers.cleanupOrphan ? answers.cleanupOrphan(ref) : {};
        },
      };
    },
  };
}

describe('abortablePort', () => {
  it('delegates while the signal is live and refuses every call once it aborts', async () => {
    const cluster = new FakeCluster();
    cluster.putNamespace('team-a');
    const stop = new AbortController();
    const port = abortablePort(cluster, stop.signal);
    await expect(port.getNamespace('team-a')).resolves.toMatchObject({ name: 'team-a' });
    stop.abort(new Error('leader election lost'));
    await expect(
      port.createNamespace({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name: 'x', labels: {}, annotations: {} },
      }),
    ).rejects.toThrow('leader election lost');
    expect(cluster.writeCount()).toBe(0);
  });
});

describe('instancesReconciler', () => {
  it('decodes the key, reconciles on an abortable port and logs the outcome', async () => {
    const { logger, lines } = captureLogger('debug');
    const cluster = new FakeCluster();
    const { factory, ports, calls } = scripted({ reconcile: async () => ({ requeueAfterMs: 60_000 }) });
    const r = instancesReconciler({ port: cluster, reconcilerFor: factory, logger });
    expect(r.name).toBe('instances');
    const stop = new AbortController();
    await expect(r.reconcile(KEY, stop.signal)).resolves.toEqual({ requeueAfterMs: 60_000 });
    expect(calls).toEqual(['reconcile team-a/agent-x']);
    stop.abort();
    await expect(ports[0]?.getNamespace('team-a')).rejects.toThrow();
    await flush();
    expect(lines()).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'reconciled',
        controller: 'instances',
        key: KEY,
        kind: 'Agent.cloudark.io',
        namespace: 'team-a',
        name: 'agent-x',
        result: 'requeue',
        requeueAfterMs: 60_000,
        durationMs: expect.any(Number),
      }),
    ]);
  });

  it('rethrows failures for the queue to retry, logging result and duration', async () => {
    const { logger, lines } = captureLogger('debug');
    const { factory } = scripted({
      reconcile: async () => {
        throw new ApiError(409, 'the object has been modified');
      },
    });
    const r = instancesReconciler({ port: new FakeCluster(), reconcilerFor: factory, logger });
    await expect(r.reconcile(KEY, new AbortController().signal)).rejects.toMatchObject({ statusCode: 409 });
    await flush();
    expect(lines()).toEqual([expect.objectContaining({ level: 'debug', result: 'conflict', key: KEY })]);
  });

  it('drops a malformed key with an error instead of retrying it forever', async () => {
    const { logger, lines } = captureLogger('debug');
    const { factory, calls } = scripted({});
    const r = instancesReconciler({ port: new FakeCluster(), reconcilerFor: factory, logger });
    await expect(r.reconcile('team-a/agent-x', new AbortController().signal)).resolves.toBeUndefined();
    expect(calls).toEqual([]);
    await flush();
    expect(lines()).toEqual([expect.objectContaining({ level: 'error', msg: 'dropping a malformed instance key' })]);
  });
});

describe('ownedObjectsReconciler', () => {
  it('hands a live owner to the instances controller', async () => {
    const pushed: string[] = [];
    const { factory, calls } = scripted({ cleanupOrphan: async () => ({ enqueue: INSTANCE }) });
    const r = ownedObjectsReconciler(
      { port: new FakeCluster(), reconcilerFor: factory, logger: captureLogger().logger },
      {
        push: (k) => pushed.push(k),
      },
    );
    expect(r.name).toBe('owned-objects');
    await r.reconcile('node.k8s.io/v1/RuntimeClass/kubeplus-sandbox-agent-x', new AbortController().signal);
    await r.reconcile('v1/Namespace/team-a', new AbortController().signal);
    expect(calls).toEqual(['cleanupOrphan RuntimeClass/kubeplus-sandbox-agent-x', 'cleanupOrphan Namespace/team-a']);
    expect(pushed).toEqual([KEY, KEY]);
  });

  it('pushes nothing when the object was an orphan (deleted) or is not owned', async () => {
    const pushed: string[] = [];
    const { factory } = scripted({ cleanupOrphan: async () => ({}) });
    const r = ownedObjectsReconciler(
      { port: new FakeCluster(), reconcilerFor: factory, logger: captureLogger().logger },
      {
        push: (k) => pushed.push(k),
      },
    );
    await r.reconcile('node.k8s.io/v1/RuntimeClass/kubeplus-sandbox-gone', new AbortController().signal);
    await r.reconcile('node.k8s.io/v1/Pod/not-ours', new AbortController().signal);
    expect(pushed).toEqual([]);
  });
});
