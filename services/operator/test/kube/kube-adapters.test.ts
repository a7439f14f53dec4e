/**
 * The thin adapters onto client-node (KubeLeaseLock, coreV1EventSink) against an in-process
 * fake API server on 127.0.0.1: checks the HTTP they produce and how they map responses.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { CoordinationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { coreV1EventSink } from '../../src/kube/event-sink.js';
import { KubeLeaseLock, recordFromSpec, specFromRecord } from '../../src/kube/lease-lock.js';
import { isConflict } from '../../src/runtime/errors.js';

interface Seen {
  method: string;
  url: string;
  contentType: string | undefined;
  body: unknown;
}

type Reply = { status: number; body: unknown } | 'hang';

let server: Server;
let kc: KubeConfig;
const seen: Seen[] = [];
let respond: (req: Seen) => Reply = () => ({ status: 500, body: {} });

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let data = '';
    req.on('data', (chunk: Buffer) => {
      data += chunk.toString();
    });
    req.on('end', () => {
      const entry: Seen = {
        method: req.method ?? '',
        url: req.url ?? '',
        contentType: req.headers['content-type'],
        body: data ? JSON.parse(data) : undefined,
      };
      seen.push(entry);
      const reply = respond(entry);
      if (reply === 'hang') return;
      res.writeHead(reply.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(reply.body));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'test', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'test' }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
  await once(server, 'close');
});

beforeEach(() => {
  seen.length = 0;
});

const leaseJson = (rv: string, spec: Record<string, unknown>) => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: { name: 'op', namespace: 'kube-system', resourceVersion: rv, labels: { team: 'platform' } },
  spec,
});

describe('KubeLeaseLock', () => {
  it('reads a Lease into a record, with MicroTime timestamps parsed', async () => {
    respond = () => ({
      status: 200,
      body: leaseJson('42', {
        holderIdentity: 'pod-1_abc',
        leaseDurationSeconds: 15,
        acquireTime: '2026-01-01T00:00:00.000000Z',
        renewTime: '2026-01-01T00:00:05.123456Z',
        leaseTransitions: 3,
      }),
    });
    const lock = new KubeLeaseLock(kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    const lease = await lock.get(new AbortController().signal);
    expect(seen[0]).toMatchObject({
      method: 'GET',
      url: '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/op',
    });
    expect(lease?.resourceVersion).toBe('42');
    expect(lease?.record).toEqual({
      holderIdentity: 'pod-1_abc',
      leaseDurationSeconds: 15,
      acquireTime: new Date('2026-01-01T00:00:00.000Z'),
      renewTime: new Date('2026-01-01T00:00:05.123Z'),
      leaseTransitions: 3,
    });
    expect(lock.description).toBe('kube-system/op');
  });

  it('maps 404 to "no lease"', async () => {
    respond = () => ({ status: 404, body: { kind: 'Status', code: 404, reason: 'NotFound' } });
    const lock = new KubeLeaseLock(kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    await expect(lock.get(new AbortController().signal)).resolves.toBeUndefined();
  });

  it('creates with a POST carrying MicroTime (microsecond) timestamps', async () => {
    respond = (req) => ({
      status: 201,
      body: { ...(req.body as object), metadata: { name: 'op', resourceVersion: '1' } },
    });
    const lock = new KubeLeaseLock(kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    const now = new Date('2026-03-04T05:06:07.890Z');
    const created = await lock.create(
      { holderIdentity: 'me', leaseDurationSeconds: 15, acquireTime: now, renewTime: now, leaseTransitions: 0 },
      new AbortController().signal,
    );
    expect(seen[0]).toMatchObject({
      method: 'POST',
      url: '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases',
    });
    expect(seen[0]?.body).toMatchObject({
      metadata: { name: 'op', namespace: 'kube-system' },
      spec: {
        holderIdentity: 'me',
        renewTime: '2026-03-04T05:06:07.890000Z',
        acquireTime: '2026-03-04T05:06:07.890000Z',
      },
    });
    expect(created.resourceVersion).toBe('1');
  });

  it('updates with a PUT carrying the read resourceVersion and keeping labels; 409 surfaces as a conflict', async () => {
    respond = (req) =>
      req.method === 'GET'
        ? { status: 200, body: leaseJson('7', { holderIdentity: 'me', leaseDurationSeconds: 15 }) }
        : {
            status: 409,
            body: { kind: 'Status', code: 409, reason: 'Conflict', message: 'the object has been modified' },
          };
    const lock = new KubeLeaseLock(kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    const signal = new AbortController().signal;
    const current = await lock.get(signal);
    const err = await lock
      .update(
        {
          holderIdentity: 'me',
          leaseDurationSeconds: 15,
          acquireTime: undefined,
          renewTime: new Date(0),
          leaseTransitions: 0,
        },
        current?.resourceVersion ?? '',
        signal,
      )
      .catch((e: unknown) => e);
    expect(isConflict(err)).toBe(true);
    expect(seen[1]).toMatchObject({
      method: 'PUT',
      url: '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/op',
      body: { metadata: { resourceVersion: '7', labels: { team: 'platform' } }, spec: { holderIdentity: 'me' } },
    });
  });

  it('aborts an in-flight request when its signal aborts', async () => {
    respond = () => 'hang';
    const lock = new KubeLeaseLock(kc.makeApiClient(CoordinationV1Api), 'kube-system', 'op');
    const controller = new AbortController();
    const pending = lock.get(controller.signal);
    // In flight: the server has the request (a fixed sleep let a slow run abort it before it was
    // sent, and the request then reached the server during the next test).
    while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    controller.abort();
    await expect(pending).rejects.toBeDefined();
  });
});

describe('lease spec mapping', () => {
  it('reads malformed fields as unheld/expired instead of throwing', () => {
    expect(
      recordFromSpec({
        holderIdentity: 5 as unknown as string,
        leaseDurationSeconds: -3,
        renewTime: 'not a time' as unknown as Date,
        leaseTransitions: 1.5,
      }),
    ).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 0,
      acquireTime: undefined,
      renewTime: undefined,
      leaseTransitions: 0,
    });
    expect(recordFromSpec(undefined).holderIdentity).toBe('');
  });

  it('omits absent timestamps', () => {
    const spec = specFromRecord({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      acquireTime: undefined,
      renewTime: undefined,
      leaseTransitions: 2,
    });
    expect(spec).toEqual({ holderIdentity: '', leaseDurationSeconds: 1, leaseTransitions: 2 });
  });
});

describe('coreV1EventSink', () => {
  it('creates Events with a POST in the namespace', async () => {
    respond = (req) => ({ status: 201, body: req.body });
    const sink = coreV1EventSink(kc.makeApiClient(CoreV1Api));
    await sink.create('team-a', {
      metadata: { name: 'x.1', namespace: 'team-a' },
      involvedObject: { kind: 'Agent', name: 'x' },
      reason: 'Applied',
    });
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/api/v1/namespaces/team-a/events' });
  });

  it('bumps a repeat with a JSON merge patch of count and lastTimestamp', async () => {
    respond = () => ({ status: 200, body: { metadata: { name: 'x.1' }, involvedObject: {} } });
    const sink = coreV1EventSink(kc.makeApiClient(CoreV1Api));
    await sink.patch('team-a', 'x.1', { count: 3, lastTimestamp: new Date('2026-01-01T00:00:00Z') });
    expect(seen[0]).toEqual({
      method: 'PATCH',
      url: '/api/v1/namespaces/team-a/events/x.1',
      contentType: 'application/merge-patch+json',
      body: { count: 3, lastTimestamp: '2026-01-01T00:00:00.000Z' },
    });
  });
});
