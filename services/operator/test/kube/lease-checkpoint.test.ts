/**
 * The Pod watch's position kept on the operator's own Lease (issue 34): KubeLeaseLock carries it
 * on the holder's renewals and release — no request of its own — never on the write that takes
 * the Lease over, and remembers the Lease as it found it; kubePodWatch reads the previous term
 * from that and tracks the current term's position through it. Against a fake API server holding
 * one Lease, with real PUTs and resourceVersion conflicts.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { formatPosition, POD_WATCH_POSITION_ANNOTATION } from '../../src/controllers/audit/watch-checkpoint.js';
import { KubeLeaseLock } from '../../src/kube/lease-lock.js';
import { kubePodWatch } from '../../src/kube/pod-watch.js';
import type { LeaderElectionRecord } from '../../src/runtime/leader-election.js';
import { type FakeApiServer, startFakeApiServer } from './fake-api-server.js';

const PATH = '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/op';
const T1 = new Date('2026-01-01T10:00:00.000Z');

interface StoredLease {
  metadata: {
    name: string;
    namespace: string;
    resourceVersion: string;
    creationTimestamp: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec: Record<string, unknown>;
}

let server: FakeApiServer;
let lease: StoredLease | undefined;
let rv = 10;

beforeAll(async () => {
  server = await startFakeApiServer();
  server.handle((req) => {
    if (req.method === 'GET' && req.path === PATH) {
      return lease ? { status: 200, body: lease } : { status: 404, body: { kind: 'Status', code: 404 } };
    }
    if (req.method === 'POST' && req.path === '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases') {
      const body = req.body as StoredLease;
      lease = {
        ...body,
        metadata: { ...body.metadata, resourceVersion: String(++rv), creationTimestamp: '2026-01-01T09:00:00Z' },
      };
      return { status: 201, body: lease };
    }
    if (req.method === 'PUT' && req.path === PATH) {
      const body = req.body as StoredLease;
      if (!lease || body.metadata.resourceVersion !== lease.metadata.resourceVersion) {
        return { status: 409, body: { kind: 'Status', code: 409, reason: 'Conflict' } };
      }
      lease = {
        ...body,
        metadata: {
          ...body.metadata,
          resourceVersion: String(++rv),
          creationTimestamp: lease.metadata.creationTimestamp,
        },
      };
      return { status: 200, body: lease };
    }
    return { status: 404, body: { kind: 'Status', code: 404 } };
  });
});

afterAll(() => server.close());

beforeEach(() => {
  server.seen.length = 0;
  lease = undefined;
});

const signal = new AbortController().signal;
const record = (holderIdentity: string, leaseTransitions = 3): LeaderElectionRecord => ({
  holderIdentity,
  leaseDurationSeconds: 15,
  acquireTime: new Date('2026-01-01T11:00:00Z'),
  renewTime: new Date('2026-01-01T11:00:00Z'),
  leaseTransitions,
});

function heldBy(holder: string, annotations?: Record<string, string>): StoredLease {
  return {
    metadata: {
      name: 'op',
      namespace: 'kube-system',
      resourceVersion: String(++rv),
      creationTimestamp: '2026-01-01T09:00:00Z',
      labels: { team: 'platform' },
      ...(annotations === undefined ? {} : { annotations }),
    },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: 15,
      acquireTime: T1.toISOString(),
      renewTime: '2026-01-01T10:05:00.000000Z',
      leaseTransitions: 2,
    },
  };
}

const puts = () => server.seen.filter((r) => r.method === 'PUT').map((r) => r.body as StoredLease);

describe('KubeLeaseLock annotations', () => {
  it('the holder’s renewals and release carry the annotation; the takeover keeps the previous holder’s', async () => {
    lease = heldBy('old_1', { [POD_WATCH_POSITION_ANNOTATION]: 'old position', other: 'kept' });
    const lock = new KubeLeaseLock(server.kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    let value: string | undefined = 'new position';
    lock.carryAnnotation(POD_WATCH_POSITION_ANNOTATION, () => value);

    // Take over (the old holder's lease expired): the previous position stays on the Lease.
    let current = await lock.get(signal);
    await lock.update(record('me', 3), current?.resourceVersion ?? '', signal);
    expect(puts()[0]?.metadata.annotations).toEqual({ [POD_WATCH_POSITION_ANNOTATION]: 'old position', other: 'kept' });
    expect(lock.takenFrom()).toEqual({
      existed: true,
      record: expect.objectContaining({ holderIdentity: 'old_1', acquireTime: T1, leaseTransitions: 2 }),
      annotations: { [POD_WATCH_POSITION_ANNOTATION]: 'old position', other: 'kept' },
      createdAt: new Date('2026-01-01T09:00:00Z'),
    });

    // Renew: carries this term's value, keeps the rest.
    current = await lock.get(signal);
    await lock.update(record('me', 3), current?.resourceVersion ?? '', signal);
    expect(puts()[1]?.metadata).toMatchObject({
      annotations: { [POD_WATCH_POSITION_ANNOTATION]: 'new position', other: 'kept' },
      labels: { team: 'platform' },
    });
    // No value yet: the annotation is left as it is.
    value = undefined;
    current = await lock.get(signal);
    await lock.update(record('me', 3), current?.resourceVersion ?? '', signal);
    expect(puts()[2]?.metadata.annotations?.[POD_WATCH_POSITION_ANNOTATION]).toBe('new position');

    // Release (holder ""): the last value goes with it.
    value = 'final position';
    current = await lock.get(signal);
    await lock.update(record('', 3), current?.resourceVersion ?? '', signal);
    expect(puts()[3]?.metadata.annotations?.[POD_WATCH_POSITION_ANNOTATION]).toBe('final position');
    // No request of its own: one GET and one PUT per renewal, as before.
    expect(server.seen.map((r) => r.method)).toEqual(['GET', 'PUT', 'GET', 'PUT', 'GET', 'PUT', 'GET', 'PUT']);
  });

  it('a standby taking a released Lease does not write a value of its own; a created Lease had no term before', async () => {
    lease = heldBy('', { [POD_WATCH_POSITION_ANNOTATION]: 'released position' });
    const lock = new KubeLeaseLock(server.kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    lock.carryAnnotation(POD_WATCH_POSITION_ANNOTATION, () => 'stale value of an earlier term');
    const current = await lock.get(signal);
    await lock.update(record('me'), current?.resourceVersion ?? '', signal);
    expect(puts()[0]?.metadata.annotations).toEqual({ [POD_WATCH_POSITION_ANNOTATION]: 'released position' });
    expect(lock.takenFrom()).toMatchObject({ existed: true, record: { holderIdentity: '' } });

    lease = undefined;
    const fresh = new KubeLeaseLock(server.kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    expect(fresh.takenFrom()).toBeUndefined();
    await fresh.get(signal);
    await fresh.create(record('me', 0), signal);
    expect(fresh.takenFrom()).toEqual({ existed: false });
  });
});

describe('kubePodWatch checkpoints on the Lease', () => {
  it('reads the previous term from the Lease as this replica took it, and has the renewals carry this term’s position', async () => {
    const previous = formatPosition({ resourceVersion: '4711', seenAt: Date.parse('2026-01-01T10:04:58Z') });
    lease = heldBy('old_1', { [POD_WATCH_POSITION_ANNOTATION]: previous });
    const lock = new KubeLeaseLock(server.kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    const watch = kubePodWatch(server.kc, lock);
    const checkpoints = watch.checkpoints;
    if (checkpoints === undefined) throw new Error('no checkpoints with a Lease');
    let current = await lock.get(signal);
    await lock.update(record('me'), current?.resourceVersion ?? '', signal);
    expect(checkpoints.previousTerm()).toEqual({
      checkpoint: previous,
      holderIdentity: 'old_1',
      acquiredAt: T1.getTime(),
      leaseTransitions: 2,
      createdAt: Date.parse('2026-01-01T09:00:00Z'),
    });

    checkpoints.track(() => ({ resourceVersion: '5000', seenAt: Date.parse('2026-01-01T11:00:01Z') }));
    current = await lock.get(signal);
    await lock.update(record('me'), current?.resourceVersion ?? '', signal);
    expect(JSON.parse(puts()[1]?.metadata.annotations?.[POD_WATCH_POSITION_ANNOTATION] ?? '')).toEqual({
      resourceVersion: '5000',
      seenAt: '2026-01-01T11:00:01.000Z',
    });
  });

  it('has no previous term before acquiring, or after creating the Lease; and no checkpoints without a Lease', async () => {
    const lock = new KubeLeaseLock(server.kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    const watch = kubePodWatch(server.kc, lock);
    expect(watch.checkpoints?.previousTerm()).toBeUndefined();
    await lock.get(signal);
    await lock.create(record('me', 0), signal);
    expect(watch.checkpoints?.previousTerm()).toBeUndefined();
    expect(kubePodWatch(server.kc).checkpoints).toBeUndefined();
  });
});
