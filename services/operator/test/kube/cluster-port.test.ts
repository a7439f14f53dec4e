/**
 * KubeClusterPort against a scripted HTTP API server on loopback: request paths, verbs,
 * content types, field manager, bodies, and the error contract (404 → undefined / resolved,
 * other statuses → ApiError with statusCode). The real API server is exercised by e2e.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { KubeConfig } from '@kubernetes/client-node';
import { ApiError } from '../../src/cluster/port.js';
import { KubeClusterPort } from '../../src/kube/cluster-port.js';

interface Seen {
  method: string;
  path: string;
  query: URLSearchParams;
  contentType: string | undefined;
  body: unknown;
}

type Reply = { status: number; body: unknown };
type Route = (req: Seen) => Reply | undefined;

const resources = (groupVersion: string, list: [string, string, boolean][]): Reply => ({
  status: 200,
  body: {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion,
    resources: list.map(([name, kind, namespaced]) => ({ name, kind, namespaced, singularName: '', verbs: [] })),
  },
});
const status = (code: number, reason: string, message: string): Reply => ({
  status: code,
  body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message },
});

const DISCOVERY: Record<string, Reply> = {
  '/api/v1': resources('v1', [
    ['namespaces', 'Namespace', false],
    ['events', 'Event', true],
  ]),
  '/apis/node.k8s.io/v1': resources('node.k8s.io/v1', [['runtimeclasses', 'RuntimeClass', false]]),
  '/apis/admissionregistration.k8s.io/v1': resources('admissionregistration.k8s.io/v1', [
    ['validatingadmissionpolicies', 'ValidatingAdmissionPolicy', false],
    ['validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding', false],
  ]),
  '/apis/admissionregistration.k8s.io/v1beta1': resources('admissionregistration.k8s.io/v1beta1', [
    ['mutatingadmissionpolicies', 'MutatingAdmissionPolicy', false],
  ]),
  '/apis/cloudark.io/v2': resources('cloudark.io/v2', [['agents', 'Agent', true]]),
  '/apis': {
    status: 200,
    body: {
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: [
        {
          name: 'cloudark.io',
          versions: [
            { groupVersion: 'cloudark.io/v1', version: 'v1' },
            { groupVersion: 'cloudark.io/v2', version: 'v2' },
          ],
          preferredVersion: { groupVersion: 'cloudark.io/v2', version: 'v2' },
        },
      ],
    },
  },
};

let server: Server;
let kc: KubeConfig;
let seen: Seen[];
let routes: Route[];

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://x');
  const s: Seen = {
    method: req.method ?? '',
    path: url.pathname,
    query: url.searchParams,
    contentType: req.headers['content-type'],
    body: await readBody(req),
  };
  seen.push(s);
  const reply =
    (s.method === 'GET' ? DISCOVERY[s.path] : undefined) ??
    routes.map((r) => r(s)).find((r) => r !== undefined) ??
    status(404, 'NotFound', `${s.path} not found`);
  res.writeHead(reply.status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(reply.body));
}

beforeAll(async () => {
  server = createServer((req, res) => {
    handle(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen = [];
  routes = [];
});

const writes = (): Seen[] => seen.filter((s) => s.method !== 'GET');

describe('KubeClusterPort', () => {
  it('reads an absent object as undefined and deletes an absent one without error', async () => {
    const port = new KubeClusterPort(kc);
    expect(await port.getObject({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'x' })).toBeUndefined();
    expect(await port.getNamespace('nope')).toBeUndefined();
    await expect(
      port.deleteObject({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', name: 'x' }, { uid: 'u1' }),
    ).resolves.toBeUndefined();
    const del = writes()[0];
    expect(del?.method).toBe('DELETE');
    expect(del?.path).toBe('/apis/node.k8s.io/v1/runtimeclasses/x');
    expect(del?.body).toMatchObject({ preconditions: { uid: 'u1' } });
  });

  it('turns a 409 into an ApiError carrying statusCode, reason and the server’s message', async () => {
    routes.push((s) =>
      s.method === 'POST' ? status(409, 'AlreadyExists', 'runtimeclasses "x" already exists') : undefined,
    );
    const port = new KubeClusterPort(kc);
    const err = await port
      .createObject({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass', metadata: { name: 'x' }, handler: 'kata' })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ statusCode: 409, reason: 'AlreadyExists' });
    expect((err as Error).message).toContain('already exists');
    const post = writes()[0];
    expect(post?.path).toBe('/apis/node.k8s.io/v1/runtimeclasses');
    expect(post?.query.get('fieldManager')).toBe('kubeplus-isolation-operator');
    expect(post?.body).toMatchObject({ kind: 'RuntimeClass', handler: 'kata' });
  });

  it('updates with PUT carrying the resourceVersion', async () => {
    routes.push((s) => (s.method === 'PUT' ? { status: 200, body: s.body } : undefined));
    const port = new KubeClusterPort(kc);
    await port.replaceObject({
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'b', resourceVersion: '42', uid: 'u' },
      spec: { policyName: 'p', validationActions: ['Deny'] },
    });
    const put = writes()[0];
    expect(put?.path).toBe('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/b');
    expect(put?.body).toMatchObject({
      metadata: { resourceVersion: '42', uid: 'u' },
      spec: { validationActions: ['Deny'] },
    });
  });

  it('patches namespace metadata as a JSON merge patch, nulls included', async () => {
    routes.push((s) =>
      s.method === 'PATCH'
        ? { status: 200, body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a' } } }
        : undefined,
    );
    const port = new KubeClusterPort(kc);
    await port.patchNamespace('team-a', {
      metadata: { labels: { 'kubeplus.io/node-isolation-enabled': null }, annotations: { a: 'b' } },
    });
    const patch = writes()[0];
    expect(patch?.path).toBe('/api/v1/namespaces/team-a');
    expect(patch?.contentType).toBe('application/merge-patch+json');
    expect(patch?.body).toEqual({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'team-a', labels: { 'kubeplus.io/node-isolation-enabled': null }, annotations: { a: 'b' } },
    });
  });

  it('guards a namespace patch with the resourceVersion it was planned from, and reads it back', async () => {
    routes.push((s) =>
      s.method === 'PATCH'
        ? { status: 200, body: { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'team-a' } } }
        : s.method === 'GET' && s.path === '/api/v1/namespaces/team-a'
          ? {
              status: 200,
              body: {
                apiVersion: 'v1',
                kind: 'Namespace',
                metadata: { name: 'team-a', uid: 'u1', resourceVersion: '41', labels: { a: 'b' } },
              },
            }
          : undefined,
    );
    const port = new KubeClusterPort(kc);
    expect(await port.getNamespace('team-a')).toEqual({
      name: 'team-a',
      uid: 'u1',
      resourceVersion: '41',
      labels: { a: 'b' },
    });
    await port.patchNamespace('team-a', { metadata: { annotations: { a: 'b' } } }, '41');
    expect(writes()[0]?.body).toEqual({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'team-a', annotations: { a: 'b' }, resourceVersion: '41' },
    });
  });

  it('sets instance finalizers with a merge patch guarded by resourceVersion', async () => {
    routes.push((s) =>
      s.method === 'PATCH'
        ? { status: 200, body: { apiVersion: 'cloudark.io/v2', kind: 'Agent', metadata: {} } }
        : undefined,
    );
    const port = new KubeClusterPort(kc);
    const key = {
      group: 'cloudark.io',
      version: 'v2',
      kind: 'Agent',
      plural: 'agents',
      namespace: 'team-a',
      name: 'i',
    };
    await port.setInstanceFinalizers(key, ['isolation.kubeplus.io/cleanup'], '7');
    const patch = writes()[0];
    expect(patch?.path).toBe('/apis/cloudark.io/v2/namespaces/team-a/agents/i');
    expect(patch?.contentType).toBe('application/merge-patch+json');
    expect(patch?.body).toMatchObject({
      metadata: { finalizers: ['isolation.kubeplus.io/cleanup'], resourceVersion: '7' },
    });
  });

  it('resolves a Kind to its preferred served version and plural', async () => {
    const port = new KubeClusterPort(kc);
    expect(await port.resolveKind('cloudark.io', 'Agent')).toEqual({
      group: 'cloudark.io',
      version: 'v2',
      kind: 'Agent',
      plural: 'agents',
    });
    expect(await port.resolveKind('nowhere.io', 'Agent')).toBeUndefined();
    const calls = seen.length;
    await port.resolveKind('cloudark.io', 'Agent');
    expect(seen.length).toBe(calls); // cached
  });

  it('never caches absence: a Kind registered later is found at once', async () => {
    const port = new KubeClusterPort(kc);
    expect(await port.resolveKind('cloudark.io', 'Tool')).toBeUndefined();
    DISCOVERY['/apis/cloudark.io/v2'] = resources('cloudark.io/v2', [
      ['agents', 'Agent', true],
      ['tools', 'Tool', true],
    ]);
    expect(await port.resolveKind('cloudark.io', 'Tool')).toMatchObject({ version: 'v2', plural: 'tools' });
  });

  it('finds the served MutatingAdmissionPolicy version (v1 lacks it here, v1beta1 has it) and caches it', async () => {
    const port = new KubeClusterPort(kc);
    expect(await port.servedMutatingPolicyVersion()).toBe('admissionregistration.k8s.io/v1beta1');
    const calls = seen.length;
    expect(await port.servedMutatingPolicyVersion()).toBe('admissionregistration.k8s.io/v1beta1');
    expect(seen.length).toBe(calls);
  });

  it('lists with the label selector across pages, stamping each item’s type', async () => {
    routes.push((s) => {
      if (s.method !== 'GET' || s.path !== '/apis/node.k8s.io/v1/runtimeclasses') return undefined;
      const second = s.query.get('continue') === 'next';
      return {
        status: 200,
        body: {
          apiVersion: 'node.k8s.io/v1',
          kind: 'RuntimeClassList',
          metadata: second ? {} : { continue: 'next' },
          items: [{ metadata: { name: second ? 'b' : 'a' }, handler: 'kata' }],
        },
      };
    });
    const port = new KubeClusterPort(kc);
    const items = await port.listObjects({ apiVersion: 'node.k8s.io/v1', kind: 'RuntimeClass' }, 'k=v');
    expect(items.map((o) => [o.kind, o.metadata.name])).toEqual([
      ['RuntimeClass', 'a'],
      ['RuntimeClass', 'b'],
    ]);
    const lists = seen.filter((s) => s.path === '/apis/node.k8s.io/v1/runtimeclasses');
    expect(lists.map((s) => s.query.get('labelSelector'))).toEqual(['k=v', 'k=v']);
  });

  it("takes a tenant's RuntimeClasses from the provided cache index when given one", async () => {
    const asked: string[] = [];
    const port = new KubeClusterPort(kc, {
      runtimeClasses: (tenant) => {
        asked.push(tenant);
        return [{ name: 'kata', handler: 'kata', generated: false }];
      },
    });
    expect(await port.listRuntimeClasses('team-a')).toEqual([{ name: 'kata', handler: 'kata', generated: false }]);
    expect(asked).toEqual(['team-a']);
    expect(seen).toEqual([]);
  });

  it('lists RuntimeClasses from the API server without a cache, telling generated classes from platform ones', async () => {
    routes.push((s) =>
      s.method === 'GET' && s.path === '/apis/node.k8s.io/v1/runtimeclasses'
        ? {
            status: 200,
            body: {
              apiVersion: 'node.k8s.io/v1',
              kind: 'RuntimeClassList',
              metadata: {},
              items: [
                { metadata: { name: 'kata' }, handler: 'kata' },
                {
                  metadata: {
                    name: 'kubeplus-sandbox-b',
                    labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' },
                    annotations: { 'kubeplus.io/owner': 'cloudark.io/Agent/team-b/b' },
                  },
                  handler: 'kata',
                },
              ],
            },
          }
        : undefined,
    );
    expect(await new KubeClusterPort(kc).listRuntimeClasses('team-a')).toEqual([
      { name: 'kata', handler: 'kata', generated: false },
      {
        name: 'kubeplus-sandbox-b',
        handler: 'kata',
        generated: true,
        owner: { group: 'cloudark.io', kind: 'Agent', namespace: 'team-b', name: 'b' },
      },
    ]);
  });

  it('lists sandbox-isolated instances only from the instance caches it is given, by tenant, and says so without them', async () => {
    const cached = [{ group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'a', annotation: '{}' }];
    const asked: string[] = [];
    const sandboxInstances = (tenant: string) => {
      asked.push(tenant);
      return tenant === 'team-a' ? cached : [];
    };
    const port = new KubeClusterPort(kc, { sandboxInstances });
    expect(await port.listSandboxInstances('team-a')).toEqual(cached);
    expect(await port.listSandboxInstances('team-b')).toEqual([]);
    expect(asked).toEqual(['team-a', 'team-b']);
    await expect(new KubeClusterPort(kc).listSandboxInstances('team-a')).rejects.toThrow(/needs the instance caches/);
    expect(seen).toEqual([]);
  });

  it('records a core/v1 Event on the instance, or delegates to a recorder', async () => {
    routes.push((s) => (s.method === 'POST' ? { status: 201, body: s.body } : undefined));
    const now = new Date('2026-11-29T19:00:00Z');
    const target = {
      apiVersion: 'cloudark.io/v2',
      kind: 'Agent',
      namespace: 'team-a',
      name: 'i',
      uid: 'u',
      resourceVersion: '3',
    };
    await new KubeClusterPort(kc, { now: () => now }).recordEvent(target, {
      type: 'Warning',
      reason: 'InvalidSandboxIsolation',
      message: 'x'.repeat(2000),
    });
    const post = writes()[0];
    expect(post?.path).toBe('/api/v1/namespaces/team-a/events');
    const body = post?.body as Record<string, unknown>;
    expect(body).toMatchObject({
      type: 'Warning',
      reason: 'InvalidSandboxIsolation',
      involvedObject: target,
      source: { component: 'kubeplus-isolation-operator' },
      count: 1,
    });
    expect(String(body.message).length).toBe(1024);
    expect((body.metadata as { name: string }).name).toMatch(/^i\.[0-9a-f]+$/);

    const delegated: string[] = [];
    const port = new KubeClusterPort(kc, {
      recordEvent: async (t, e) => {
        delegated.push(`${t.name} ${e.reason}`);
      },
    });
    await port.recordEvent(target, { type: 'Normal', reason: 'R', message: 'm' });
    expect(delegated).toEqual(['i R']);
  });
});
