import { describe, expect, it } from '@jest/globals';
import type { PodLike } from '@kubeplus-isolation/spec';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { EventTarget, InstanceEvent } from '../../../src/cluster/port.js';
import { type AuditHooks, NodeIsolationAuditor, type PodLister } from '../../../src/controllers/audit/auditor.js';
import type { InstanceIdentity } from '../../../src/desired/instance.js';
import type { Lister } from '../../../src/runtime/informer.js';
import { captureLogger, HttpError } from '../../runtime/fakes.js';

const ENABLED = 'kubeplus.io/node-isolation-enabled';
const RESOLVED = 'kubeplus.io/node-isolation-resolved';
const OWNER = 'kubeplus.io/owner';
const DEDICATED = { key: 'dedicated', operator: 'Equal', value: 'pool-a', effect: 'NoSchedule' } as const;
const MANDATE = JSON.stringify({ nodeSelector: { pool: 'pool-a' }, tolerations: [DEDICATED] });
const AGENT: InstanceIdentity = { group: 'cloudark.io', kind: 'Agent', namespace: 'team-a', name: 'agent-x' };
const AGENT_TARGET: EventTarget = {
  apiVersion: 'cloudark.io/v1',
  kind: 'Agent',
  namespace: 'team-a',
  name: 'agent-x',
  uid: 'uid-1',
};

function namespace(name: string, annotations: Record<string, string> = { [RESOLVED]: MANDATE }): KubernetesObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { [ENABLED]: 'true' }, annotations } };
}

const placed = (name: string): PodLike => ({
  metadata: { name },
  spec: { nodeSelector: { pool: 'pool-a' }, tolerations: [DEDICATED] },
});
const bare = (name: string): PodLike => ({ metadata: { name }, spec: {} });
const selectorOnly = (name: string): PodLike => ({ metadata: { name }, spec: { nodeSelector: { pool: 'pool-a' } } });

class Harness {
  readonly namespaces = new Map<string, KubernetesObject>();
  readonly pods = new Map<string, PodLike[]>();
  readonly lists: Array<{ namespace: string; limit: number; continueToken?: string | undefined }> = [];
  readonly events: Array<{ target: EventTarget; event: InstanceEvent }> = [];
  readonly cost = { requests: 0, pods: 0 };
  listError: unknown;
  eventError: unknown;
  owners = new Map<string, EventTarget>([[`${AGENT.namespace}/${AGENT.name}`, AGENT_TARGET]]);
  readonly log = captureLogger('debug');
  /** Runs while a page is being "fetched" (before it is returned). */
  duringList: (() => void) | undefined;

  readonly lister: Lister<KubernetesObject> = {
    get: (name) => this.namespaces.get(name),
    list: () => [...this.namespaces.values()],
  };

  readonly podLister: PodLister = {
    listPods: async (ns, page) => {
      this.lists.push({ namespace: ns, ...page });
      this.duringList?.();
      if (this.listError !== undefined) throw this.listError;
      const all = this.pods.get(ns) ?? [];
      const from = Number(page.continueToken ?? '0');
      const to = from + page.limit;
      return { items: all.slice(from, to), continueToken: to < all.length ? String(to) : undefined };
    },
  };

  readonly hooks: AuditHooks = {
    podListRequest: () => this.cost.requests++,
    podsChecked: (n) => {
      this.cost.pods += n;
    },
  };

  auditor(options: { pageSize?: number; maxLogPods?: number; maxEventPods?: number } = {}): NodeIsolationAuditor {
    return new NodeIsolationAuditor({
      pods: this.podLister,
      namespaces: this.lister,
      resolveOwner: (owner) => this.owners.get(`${owner.namespace}/${owner.name}`),
      recordEvent: async (target, event) => {
        if (this.eventError !== undefined) throw this.eventError;
        this.events.push({ target, event });
      },
      hooks: this.hooks,
      logger: this.log.logger,
      ...options,
    });
  }

  lines(msg: RegExp): Array<Record<string, unknown>> {
    return this.log.lines().filter((l) => msg.test(String(l.msg)));
  }
}

const live = (): AbortSignal => new AbortController().signal;

describe('NodeIsolationAuditor', () => {
  it('lists every page, counts unisolated Pods by what they lack, logs them and warns the owning instance', async () => {
    const h = new Harness();
    h.namespaces.set(
      'team-a',
      namespace('team-a', { [RESOLVED]: MANDATE, [OWNER]: 'cloudark.io/Agent/team-a/agent-x' }),
    );
    h.pods.set('team-a', [placed('ok-1'), bare('down-1'), placed('ok-2'), selectorOnly('down-2'), bare('down-3')]);
    const auditor = h.auditor({ pageSize: 2 });

    await auditor.reconcile('team-a', live());

    expect(h.lists.map((l) => [l.limit, l.continueToken])).toEqual([
      [2, undefined],
      [2, '2'],
      [2, '4'],
    ]);
    expect(h.cost).toEqual({ requests: 3, pods: 5 });
    expect(auditor.totals()).toEqual({ node_selector: 0, tolerations: 1, both: 2 });
    expect(h.events).toEqual([
      {
        target: AGENT_TARGET,
        event: {
          type: 'Warning',
          reason: 'PodsNotIsolated',
          message: expect.stringMatching(
            /^3 Pods in namespace team-a lack the node placement it mandates: down-1 \(nodeSelector, tolerations\), down-2 \(tolerations\), down-3 \(nodeSelector, tolerations\)\. /,
          ),
        },
      },
    ]);
    const [line] = h.lines(/^Pods lack the mandated node placement/);
    expect(line).toMatchObject({
      level: 'warn',
      controller: 'node-isolation-audit',
      namespace: 'team-a',
      owner: 'cloudark.io/Agent/team-a/agent-x',
      event: 'Agent team-a/agent-x',
      unisolated: 3,
      missing: { node_selector: 0, tolerations: 1, both: 2 },
      unisolatedPods: [
        'down-1 (nodeSelector, tolerations)',
        'down-2 (tolerations)',
        'down-3 (nodeSelector, tolerations)',
      ],
      pods: 5,
      listRequests: 3,
    });
    expect(line?.morePods).toBeUndefined();
  });

  it('reports a namespace isolated by hand (no owner) in the metric and the log, without an Event', async () => {
    const h = new Harness();
    h.namespaces.set('manual', namespace('manual'));
    h.pods.set('manual', [bare('p')]);
    const auditor = h.auditor();
    await auditor.reconcile('manual', live());
    expect(auditor.totals()).toEqual({ node_selector: 0, tolerations: 0, both: 1 });
    expect(h.events).toEqual([]);
    const [line] = h.lines(/^Pods lack/);
    expect(line).toMatchObject({
      namespace: 'manual',
      event: 'none (no watched instance owns the namespace)',
      unisolatedPods: ['p (nodeSelector, tolerations)'],
    });
    expect(line).not.toHaveProperty('owner');
  });

  it('sends no Event when the owner instance is not found in the caches (deleted, or its Kind not watched)', async () => {
    const h = new Harness();
    h.owners.clear();
    h.namespaces.set(
      'team-a',
      namespace('team-a', { [RESOLVED]: MANDATE, [OWNER]: 'cloudark.io/Agent/team-a/agent-x' }),
    );
    h.pods.set('team-a', [bare('p')]);
    await h.auditor().reconcile('team-a', live());
    expect(h.events).toEqual([]);
    expect(h.lines(/^Pods lack/)[0]).toMatchObject({
      owner: 'cloudark.io/Agent/team-a/agent-x',
      event: expect.stringMatching(/^none/),
    });
  });

  it('names at most maxLogPods Pods in the log and says how many more there are', async () => {
    const h = new Harness();
    h.namespaces.set('big', namespace('big'));
    h.pods.set(
      'big',
      Array.from({ length: 1200 }, (_, i) => bare(`p-${i}`)),
    );
    const auditor = h.auditor({ maxLogPods: 5 });
    await auditor.reconcile('big', live());
    expect(h.lists).toHaveLength(3); // 500 + 500 + 200
    const [line] = h.lines(/^Pods lack/);
    expect(line?.unisolatedPods).toEqual(
      ['p-0', 'p-1', 'p-2', 'p-3', 'p-4'].map((n) => `${n} (nodeSelector, tolerations)`),
    );
    expect(line?.morePods).toBe(1195);
    expect(auditor.totals().both).toBe(1200);
  });

  it('reports nothing for a namespace whose Pods all comply (debug line only)', async () => {
    const h = new Harness();
    h.namespaces.set(
      'team-a',
      namespace('team-a', { [RESOLVED]: MANDATE, [OWNER]: 'cloudark.io/Agent/team-a/agent-x' }),
    );
    h.pods.set('team-a', [placed('a'), placed('b')]);
    const auditor = h.auditor();
    await auditor.reconcile('team-a', live());
    expect(auditor.totals()).toEqual({ node_selector: 0, tolerations: 0, both: 0 });
    expect(h.events).toEqual([]);
    expect(h.log.lines().filter((l) => l.level !== 'debug')).toEqual([]);
  });

  it('says so (info line, Normal Event) when a reported namespace has become clean', async () => {
    const h = new Harness();
    h.namespaces.set(
      'team-a',
      namespace('team-a', { [RESOLVED]: MANDATE, [OWNER]: 'cloudark.io/Agent/team-a/agent-x' }),
    );
    h.pods.set('team-a', [bare('down'), placed('ok')]);
    const auditor = h.auditor();
    await auditor.reconcile('team-a', live());
    h.pods.set('team-a', [placed('ok'), placed('down-recreated')]);
    await auditor.reconcile('team-a', live());
    await auditor.reconcile('team-a', live());
    expect(h.events.map((e) => [e.event.type, e.event.reason])).toEqual([
      ['Warning', 'PodsNotIsolated'],
      ['Normal', 'PodsIsolated'],
    ]);
    expect(h.events[1]?.event.message).toBe(
      'No Pod in namespace team-a lacks the mandated node placement any more (1 did at the previous audit).',
    );
    expect(h.lines(/any more$/)).toHaveLength(1);
    expect(auditor.totals().both).toBe(0);
  });

  it('does not list a namespace that is gone or no longer isolated, and forgets its findings', async () => {
    const h = new Harness();
    h.namespaces.set('team-a', namespace('team-a'));
    h.pods.set('team-a', [bare('p')]);
    const auditor = h.auditor();
    await auditor.reconcile('team-a', live());
    expect(auditor.totals().both).toBe(1);

    h.namespaces.set('team-a', { ...namespace('team-a'), metadata: { name: 'team-a', labels: {} } });
    await auditor.reconcile('team-a', live());
    h.namespaces.delete('team-a');
    await auditor.reconcile('team-a', live());
    await auditor.reconcile('never-seen', live());
    expect(h.lists).toHaveLength(1);
    h.namespaces.set('team-a', namespace('team-a')); // back, but not audited yet: nothing stale counts
    expect(auditor.totals().both).toBe(0);
  });

  it('warns about a labelled namespace without a valid mandate and does not list it', async () => {
    const h = new Harness();
    h.namespaces.set('broken', namespace('broken', { [RESOLVED]: 'not json' }));
    await h.auditor().reconcile('broken', live());
    expect(h.lists).toEqual([]);
    expect(h.lines(/not audited/)[0]).toMatchObject({
      level: 'warn',
      namespace: 'broken',
      errors: [expect.stringMatching(/^not valid JSON/)],
    });
  });

  it('counts only namespaces still isolated, and forgets everything on reset (a leadership term ends)', async () => {
    const h = new Harness();
    for (const ns of ['a', 'b']) {
      h.namespaces.set(ns, namespace(ns));
      h.pods.set(ns, [bare(`${ns}-1`), selectorOnly(`${ns}-2`)]);
    }
    const auditor = h.auditor();
    await auditor.reconcile('a', live());
    await auditor.reconcile('b', live());
    expect(auditor.totals()).toEqual({ node_selector: 0, tolerations: 2, both: 2 });
    h.namespaces.delete('b'); // deleted; its delete event has not been handled yet
    expect(auditor.totals()).toEqual({ node_selector: 0, tolerations: 1, both: 1 });
    auditor.reset();
    expect(auditor.totals()).toEqual({ node_selector: 0, tolerations: 0, both: 0 });
  });

  it('a failing LIST rejects (the work queue retries with backoff) and keeps the last findings', async () => {
    const h = new Harness();
    h.namespaces.set('a', namespace('a'));
    h.pods.set('a', [bare('p')]);
    const auditor = h.auditor();
    await auditor.reconcile('a', live());
    h.listError = new HttpError(403, 'pods is forbidden');
    await expect(auditor.reconcile('a', live())).rejects.toThrow('pods is forbidden');
    expect(auditor.totals().both).toBe(1);
  });

  it('stops between pages once its signal aborts (the Lease is lost) and reports nothing', async () => {
    const h = new Harness();
    h.namespaces.set('a', namespace('a'));
    h.pods.set('a', [bare('1'), bare('2'), bare('3')]);
    const auditor = h.auditor({ pageSize: 1 });
    const abort = new AbortController();
    h.duringList = () => abort.abort(new Error('leadership lost'));
    await expect(auditor.reconcile('a', abort.signal)).rejects.toThrow('leadership lost');
    expect(h.lists).toHaveLength(1);
    expect(auditor.totals().both).toBe(0);
    expect(h.lines(/^Pods lack/)).toEqual([]);
  });

  it('logs an Event that cannot be recorded and still succeeds', async () => {
    const h = new Harness();
    h.namespaces.set(
      'team-a',
      namespace('team-a', { [RESOLVED]: MANDATE, [OWNER]: 'cloudark.io/Agent/team-a/agent-x' }),
    );
    h.pods.set('team-a', [bare('p')]);
    h.eventError = new Error('boom');
    const auditor = h.auditor();
    await expect(auditor.reconcile('team-a', live())).resolves.toBeUndefined();
    expect(h.lines(/could not record an event/)[0]).toMatchObject({ reason: 'PodsNotIsolated', error: 'boom' });
    expect(auditor.totals().both).toBe(1);
  });
});
