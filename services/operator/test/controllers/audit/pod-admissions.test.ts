import { describe, expect, it } from '@jest/globals';
import { createSilentLogger } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  type PodWatchApi,
  unisolatedAdmission,
  unisolatedPodAdmissions,
  type WatchedPod,
} from '../../../src/controllers/audit/pod-admissions.js';
import type { MissingKind } from '../../../src/controllers/audit/report.js';
import { ResourceInformer } from '../../../src/runtime/informer.js';
import { FakeClock, FakeInformerSource } from '../../runtime/fakes.js';

const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const MANDATE = {
  nodeSelector: { pool: 'a' },
  tolerations: [{ key: 'dedicated', operator: 'Equal', value: 'a', effect: 'NoSchedule' }],
};

function ns(name: string, annotation: string | undefined = JSON.stringify(MANDATE), labelled = true): KubernetesObject {
  return {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name,
      resourceVersion: '1',
      labels: labelled ? { [ENABLED]: 'true' } : {},
      annotations: annotation === undefined ? {} : { [RESOLVED]: annotation },
    },
  };
}

function pod(
  namespace: string,
  name: string,
  spec: Record<string, unknown> = {},
  uid = `${namespace}-${name}`,
): WatchedPod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace, name, uid, resourceVersion: '1', labels: { app: 'x' }, managedFields: [{}] },
    spec: { containers: [{ name: 'c', image: 'i', args: ['<'.repeat(100)] }], ...spec },
    status: { phase: 'Pending' },
  } as WatchedPod;
}

describe('unisolatedAdmission', () => {
  it('names what a Pod of an isolated namespace lacks, by the audit’s rule', () => {
    expect(unisolatedAdmission(ns('t'), pod('t', 'bare'))).toEqual({
      missing: ['nodeSelector', 'tolerations'],
      kind: 'both',
    });
    expect(unisolatedAdmission(ns('t'), pod('t', 's', { nodeSelector: { pool: 'a', extra: 'y' } }))).toEqual({
      missing: ['tolerations'],
      kind: 'tolerations',
    });
    expect(unisolatedAdmission(ns('t'), pod('t', 't', { tolerations: MANDATE.tolerations }))).toEqual({
      missing: ['nodeSelector'],
      kind: 'node_selector',
    });
  });

  it('says nothing of a compliant Pod, of a namespace not (or not validly) isolated, or of an unknown one', () => {
    const compliant = pod('t', 'ok', { nodeSelector: MANDATE.nodeSelector, tolerations: MANDATE.tolerations });
    expect(unisolatedAdmission(ns('t'), compliant)).toBeUndefined();
    expect(unisolatedAdmission(ns('t', JSON.stringify(MANDATE), false), pod('t', 'bare'))).toBeUndefined();
    expect(unisolatedAdmission(ns('t', 'not json'), pod('t', 'bare'))).toBeUndefined();
    const unannotated = ns('t');
    if (unannotated.metadata) unannotated.metadata.annotations = {};
    expect(unisolatedAdmission(unannotated, pod('t', 'bare'))).toBeUndefined();
    expect(unisolatedAdmission(undefined, pod('t', 'bare'))).toBeUndefined();
    // Odd shapes never throw.
    expect(
      unisolatedAdmission(ns('t'), { metadata: { name: 'x' }, spec: 'nonsense' } as unknown as WatchedPod),
    ).toEqual({
      missing: ['nodeSelector', 'tolerations'],
      kind: 'both',
    });
  });
});

/** A fake API server side of the watch: the test drives events and the end of each watch. */
class FakeWatch implements PodWatchApi {
  rv = 100;
  starts: string[] = [];
  listCalls = 0;
  failList: unknown;
  private current:
    | { onEvent: (type: string, obj: KubernetesObject) => void; onDone: (err: unknown) => void }
    | undefined;
  stopped = 0;

  async currentResourceVersion(): Promise<string> {
    this.listCalls += 1;
    if (this.failList !== undefined) throw this.failList;
    return String(this.rv);
  }

  async watch(
    resourceVersion: string,
    onEvent: (type: string, obj: KubernetesObject) => void,
    onDone: (err: unknown) => void,
  ): Promise<() => void> {
    this.starts.push(resourceVersion);
    this.current = { onEvent, onDone };
    return () => {
      this.stopped += 1;
    };
  }

  event(type: string, obj: KubernetesObject): void {
    this.current?.onEvent(type, obj);
  }

  end(err?: unknown): void {
    const c = this.current;
    this.current = undefined;
    c?.onDone(err);
  }
}

describe('unisolatedPodAdmissions', () => {
  async function setup() {
    const namespaces = new FakeInformerSource<KubernetesObject>();
    const nsInformer = new ResourceInformer(namespaces, { name: 'isolated-namespaces', clock: new FakeClock() });
    nsInformer.start();
    await nsInformer.waitForSync();
    const clock = new FakeClock();
    const api = new FakeWatch();
    const counted: MissingKind[] = [];
    const source = unisolatedPodAdmissions(api, {
      namespaces: nsInformer,
      counted: (kind) => counted.push(kind),
      logger: createSilentLogger(),
      clock,
    });
    const keys: string[] = [];
    const flush = () => new Promise((resolve) => setImmediate(resolve));
    return { namespaces, api, source, counted, keys, clock, flush };
  }

  const added = (p: WatchedPod, rv: number): WatchedPod => ({
    ...p,
    metadata: { ...p.metadata, resourceVersion: String(rv) },
  });

  it('counts each Pod created lacking its mandate, enqueues its namespace at once, and ignores the rest', async () => {
    const { namespaces, api, source, counted, keys, flush } = await setup();
    namespaces.upsert(ns('tenant'));
    namespaces.upsert(ns('broken', 'not json'));
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.starts).toEqual(['100']); // from "now": no list of existing Pods
    api.event('ADDED', added(pod('tenant', 'job', { nodeSelector: { pool: 'a' } }), 101));
    api.event(
      'ADDED',
      added(pod('tenant', 'ok', { nodeSelector: MANDATE.nodeSelector, tolerations: MANDATE.tolerations }), 102),
    );
    api.event('ADDED', added(pod('plain', 'elsewhere'), 103));
    api.event('ADDED', added(pod('broken', 'invalid-mandate'), 104));
    api.event('MODIFIED', added(pod('tenant', 'job'), 105)); // only creations count
    api.event('DELETED', added(pod('tenant', 'bare'), 106));
    expect(keys).toEqual(['tenant']);
    expect(counted).toEqual(['tolerations']);
    unsubscribe();
    expect(api.stopped).toBe(1);
    api.event('ADDED', added(pod('tenant', 'after-term'), 107));
    expect(counted).toHaveLength(1);
  });

  it('resumes from the last resourceVersion (bookmarks included); after 410 Gone starts from now and audits every isolated namespace', async () => {
    const { namespaces, api, source, keys, clock, flush } = await setup();
    namespaces.upsert(ns('tenant'));
    namespaces.upsert(ns('other'));
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    api.event('ADDED', added(pod('plain', 'p'), 150));
    api.event('BOOKMARK', { apiVersion: 'v1', kind: 'Pod', metadata: { resourceVersion: '160' } });
    api.end(); // the server closed the watch
    await clock.advance(0);
    await flush();
    expect(api.starts).toEqual(['100', '160']);
    expect(keys).toEqual([]);

    api.event('ERROR', { apiVersion: 'v1', kind: 'Status', code: 410 } as unknown as KubernetesObject);
    api.end();
    api.rv = 500;
    await clock.advance(0);
    await flush();
    expect(api.starts).toEqual(['100', '160', '500']);
    expect([...keys].sort()).toEqual(['other', 'tenant']);
    unsubscribe();
  });

  it('retries a failed list or watch with backoff, and stops retrying when unsubscribed', async () => {
    const { api, source, keys, clock, flush } = await setup();
    api.failList = Object.assign(new Error('Forbidden'), { statusCode: 403 });
    const unsubscribe = source.subscribe((k) => keys.push(k));
    await flush();
    expect(api.listCalls).toBe(1);
    await clock.advance(799);
    await flush();
    expect(api.listCalls).toBe(1);
    await clock.advance(1);
    await flush();
    expect(api.listCalls).toBe(2);
    await clock.advance(1600);
    await flush();
    expect(api.listCalls).toBe(3);
    unsubscribe();
    await clock.advance(60_000);
    await flush();
    expect(api.listCalls).toBe(3);
    expect(api.starts).toEqual([]);
  });
});
