import { describe, expect, it } from '@jest/globals';
import type { NamespaceSandboxPolicy, SandboxLike, UnisolatedPod } from '@kubeplus-isolation/spec';
import type { PodFindings } from '../../../src/controllers/compliance/openreport.js';
import {
  NamespaceReporter,
  type ReporterOptions,
  type ReportHooks,
  type ReportWriteResult,
} from '../../../src/controllers/compliance/reporter.js';
import type { InvolvedObject } from '../../../src/runtime/event-recorder.js';
import { FakeWorld } from '../../fake-world.js';
import { captureLogger, HttpError } from '../../runtime/fakes.js';

const SELF: InvolvedObject = { apiVersion: 'v1', kind: 'Pod', namespace: 'kubeplus-isolation', name: 'op-0' };

const bare = (name: string): UnisolatedPod => ({
  name,
  missing: ['nodeSelector'],
  missingNodeSelector: { pool: 'a' },
  missingTolerations: [],
});
const findings = (checked: number, ...pods: UnisolatedPod[]): PodFindings => ({
  checked,
  unisolated: pods.length,
  pods,
});
const sandbox = (name: string, runtimeClassName: string): SandboxLike => ({
  metadata: { name },
  spec: { podTemplate: { spec: { runtimeClassName } } },
});

class Harness {
  readonly world = new FakeWorld();
  readonly io = this.world.reportIo();
  readonly events: Array<{ target: InvolvedObject; type: string; reason: string; message: string }> = [];
  readonly writes: ReportWriteResult[] = [];
  readonly availability: boolean[] = [];
  unchanged = 0;
  sandboxLists = 0;
  sandboxPodLists = 0;
  readonly policies = new Map<string, NamespaceSandboxPolicy>();
  readonly log = captureLogger('debug');
  readonly hooks: ReportHooks = {
    write: (r) => this.writes.push(r),
    unchanged: () => this.unchanged++,
    apiAvailable: (a) => this.availability.push(a),
    sandboxListRequest: () => this.sandboxLists++,
    sandboxPodListRequest: () => this.sandboxPodLists++,
  };

  reporter(over: Partial<ReporterOptions> = {}): NamespaceReporter {
    return new NamespaceReporter({
      store: this.io.store,
      sandboxes: this.io.sandboxes,
      sandboxPolicy: (ns) => this.policies.get(ns),
      runtimeClasses: () =>
        new Map([
          ['fast', { name: 'fast', handler: 'runc', generated: false }],
          ['vm', { name: 'vm', handler: 'kata', generated: false }],
        ]),
      self: SELF,
      recordEvent: async (target, type, reason, message) => {
        this.events.push({ target, type, reason, message });
      },
      hooks: this.hooks,
      logger: this.log.logger,
      ...over,
    });
  }
}

const signal = new AbortController().signal;

describe('NamespaceReporter', () => {
  it('creates the Report, then writes nothing while nothing changes, and follows a Pod fixed or deleted', async () => {
    const h = new Harness();
    const r = h.reporter();
    await r.sync('team-a', findings(3, bare('p1'), bare('p2')), signal);
    expect(h.world.reportWrites).toEqual(['create team-a']);
    const created = h.world.reports.get('team-a');
    expect(created?.summary).toEqual({ pass: 1, fail: 2, warn: 0, error: 0, skip: 0 });

    for (let i = 0; i < 3; i++) await r.sync('team-a', findings(3, bare('p1'), bare('p2')), signal);
    expect(h.world.reportWrites).toEqual(['create team-a']);
    expect(h.world.reports.get('team-a')?.metadata.resourceVersion).toBe(created?.metadata.resourceVersion);
    expect(h.unchanged).toBe(3);

    // p1 fixed (recreated, so it passes) and p2 deleted: both leave the results.
    await r.sync('team-a', findings(2), signal);
    expect(h.world.reportWrites).toEqual(['create team-a', 'replace team-a']);
    expect(h.world.reports.get('team-a')).toMatchObject({
      summary: { pass: 2, fail: 0 },
      results: [],
    });
    expect(h.writes).toEqual(['created', 'updated']);
  });

  it('deletes its Report when nothing in the namespace is isolated any more, and never someone else’s', async () => {
    const h = new Harness();
    const r = h.reporter();
    await r.sync('team-a', findings(1, bare('p1')), signal);
    await r.sync('team-a', undefined, signal);
    expect(h.world.reportWrites).toEqual(['create team-a', 'delete team-a']);
    expect(h.world.reports.has('team-a')).toBe(false);
    // Not the operator's: left alone.
    h.world.reports.set('other', {
      metadata: { resourceVersion: '1', labels: { 'app.kubernetes.io/managed-by': 'x' } },
    });
    await r.sync('other', undefined, signal);
    expect(h.world.reports.has('other')).toBe(true);
    expect(h.writes).toEqual(['created', 'deleted']);
  });

  it('knows which namespaces hold its Report: those it wrote, and those a previous leader wrote', async () => {
    const h = new Harness();
    h.world.reports.set('old-leader', {
      metadata: { resourceVersion: '1', labels: { 'app.kubernetes.io/managed-by': 'kubeplus-isolation' } },
    });
    h.world.reports.set('someone-else', { metadata: { resourceVersion: '1', labels: { team: 'x' } } });
    const r = h.reporter();
    await r.sync('team-a', findings(1, bare('p')), signal);
    expect(r.knownNamespaces()).toEqual(['team-a']);
    await r.discover();
    expect(r.knownNamespaces().sort()).toEqual(['old-leader', 'team-a']);
    // Audited while no longer isolated: its Report goes, and so does the namespace from the set.
    await r.sync('old-leader', undefined, signal);
    expect(h.world.reports.has('old-leader')).toBe(false);
    expect(r.knownNamespaces()).toEqual(['team-a']);

    const failing = h.reporter({
      store: {
        ...h.io.store,
        listOwnNamespaces: async () => {
          throw new HttpError(500);
        },
      },
    });
    await expect(failing.discover()).resolves.toBeUndefined();
    expect(h.writes.at(-1)).toBe('error');
  });

  it('judges the Pod each Sandbox runs: one Pod LIST per namespace holding Sandboxes, none without', async () => {
    const h = new Harness();
    h.policies.set('team-a', { minimum: 'kata', enforce: true });
    h.world.sandboxes.set('team-a', [{ ...sandbox('agent-1', 'vm'), metadata: { name: 'agent-1', uid: 'sb-1' } }]);
    h.world.sandboxPods.set('team-a', [
      {
        metadata: { name: 'agent-1', ownerReferences: [{ uid: 'sb-1', controller: true }] },
        spec: { runtimeClassName: 'fast' },
      },
    ]);
    await h.reporter().sync('team-a', undefined, signal);
    const report = h.world.reports.get('team-a');
    expect(report?.summary).toMatchObject({ pass: 0, fail: 1 });
    expect(report?.results).toEqual([
      expect.objectContaining({ message: expect.stringContaining('but its Pod agent-1 runs RuntimeClass "fast"') }),
    ]);
    expect(h.sandboxPodLists).toBe(1);
    // The Pod replaced from the template: compliant again.
    h.world.sandboxPods.set('team-a', [
      {
        metadata: { name: 'agent-1', ownerReferences: [{ uid: 'sb-1', controller: true }] },
        spec: { runtimeClassName: 'vm' },
      },
    ]);
    await h.reporter().sync('team-a', undefined, signal);
    expect(h.world.reports.get('team-a')?.summary).toMatchObject({ pass: 1, fail: 0 });
    // No Sandbox: no Pod LIST.
    h.policies.set('team-b', { minimum: 'kata', enforce: true });
    await h.reporter().sync('team-b', undefined, signal);
    expect(h.sandboxPodLists).toBe(2);
  });

  it("finds a Sandbox's Pod by its controller's UID, whatever kind the reference names or the Pod is called (issue 36)", async () => {
    const h = new Harness();
    h.policies.set('team-a', { minimum: 'kata', enforce: true });
    h.world.sandboxes.set('team-a', [{ ...sandbox('agent-1', 'vm'), metadata: { name: 'agent-1', uid: 'sb-1' } }]);
    const forged = { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', uid: 'sb-1', controller: true };
    h.world.sandboxPods.set('team-a', [
      {
        metadata: { name: 'agent-1', ownerReferences: [{ uid: 'sb-1', controller: true }] },
        spec: { runtimeClassName: 'vm' },
      },
      { metadata: { name: 'impostor', ownerReferences: [forged] }, spec: { runtimeClassName: 'fast' } },
      { metadata: { name: 'plain' }, spec: { runtimeClassName: 'fast' } },
    ]);
    await h.reporter().sync('team-a', undefined, signal);
    expect(h.world.reports.get('team-a')?.results).toEqual([
      expect.objectContaining({ message: expect.stringContaining('but its Pod impostor runs RuntimeClass "fast"') }),
    ]);
  });

  it('reports the Sandboxes weaker than the namespace minimum, listing them page by page', async () => {
    const h = new Harness();
    h.policies.set('team-a', { minimum: 'kata', enforce: true });
    h.world.sandboxes.set('team-a', [sandbox('old', 'fast'), sandbox('new', 'vm')]);
    await h.reporter().sync('team-a', undefined, signal);
    const report = h.world.reports.get('team-a');
    expect(report?.summary).toEqual({ pass: 1, fail: 1, warn: 0, error: 0, skip: 0 });
    expect(report?.results).toEqual([
      expect.objectContaining({
        policy: 'sandbox-isolation',
        resources: [expect.objectContaining({ kind: 'Sandbox', name: 'old' })],
      }),
    ]);
    expect(h.sandboxLists).toBe(1);

    // More than a page: every one counted, and the results capped.
    const paged = new Harness();
    paged.policies.set('team-b', { minimum: 'kata', enforce: false });
    const all = Array.from({ length: 7 }, (_, i) => sandbox(`s${i}`, i % 2 === 0 ? 'fast' : 'vm'));
    const lister = {
      listSandboxes: async (_ns: string, page: { limit: number; continueToken?: string | undefined }) => {
        const from = Number(page.continueToken ?? '0');
        const to = from + page.limit;
        return {
          items: all.slice(from, to),
          continueToken: to < all.length ? String(to) : undefined,
          apiVersion: 'agents.x-k8s.io/v1alpha1',
        };
      },
      listSandboxPods: async () => ({ items: [] }),
    };
    await paged.reporter({ sandboxes: lister, pageSize: 3, maxResults: 2 }).sync('team-b', undefined, signal);
    const capped = paged.world.reports.get('team-b');
    expect(paged.sandboxLists).toBe(3);
    expect(capped?.summary).toMatchObject({ pass: 3, fail: 4 });
    expect(capped?.results).toHaveLength(2);
    expect(capped?.metadata?.annotations?.['kubeplus.io/report-results-omitted']).toBe('2');
  });

  it('without the Report API says so once, keeps going, and notices the API appearing', async () => {
    const h = new Harness();
    h.world.reportsServed = false;
    const r = h.reporter();
    for (const ns of ['a', 'b', 'a']) await r.sync(ns, findings(1, bare('p')), signal);
    expect(h.events).toEqual([
      {
        target: SELF,
        type: 'Warning',
        reason: 'ReportsApiUnavailable',
        message: expect.stringContaining('not served'),
      },
    ]);
    expect(h.availability).toEqual([false]);
    expect(h.world.reportWrites).toEqual([]);
    expect(h.log.lines().filter((l) => l.level === 'warn')).toHaveLength(1);

    h.world.reportsServed = true;
    await r.sync('a', findings(1, bare('p')), signal);
    await r.sync('b', findings(1, bare('p')), signal);
    expect(h.events.map((e) => [e.type, e.reason])).toEqual([
      ['Warning', 'ReportsApiUnavailable'],
      ['Normal', 'ReportsApiAvailable'],
    ]);
    expect(h.availability).toEqual([false, true]);
    expect(h.world.reportWrites).toEqual(['create a', 'create b']);
  });

  it('with no Pod of its own to put Events on, only logs', async () => {
    const h = new Harness();
    h.world.reportsServed = false;
    await h.reporter({ self: undefined }).sync('a', findings(0), signal);
    expect(h.events).toEqual([]);
    expect(h.log.lines().find((l) => l.level === 'warn')).toMatchObject({
      event: 'none (POD_NAME/POD_NAMESPACE unset)',
    });
  });

  it('counts a failed read or write as an error and does not throw; the next sync retries', async () => {
    const h = new Harness();
    let fail = true;
    const store = {
      ...h.io.store,
      create: async (report: Parameters<typeof h.io.store.create>[0]) => {
        if (fail) throw new HttpError(409, 'conflict');
        return h.io.store.create(report);
      },
    };
    const r = h.reporter({ store });
    await expect(r.sync('a', findings(1, bare('p')), signal)).resolves.toBeUndefined();
    expect(h.writes).toEqual(['error']);
    fail = false;
    await r.sync('a', findings(1, bare('p')), signal);
    expect(h.writes).toEqual(['error', 'created']);

    const broken = h.reporter({
      sandboxes: {
        listSandboxes: async () => {
          throw new HttpError(403, 'forbidden');
        },
        listSandboxPods: async () => ({ items: [] }),
      },
    });
    h.policies.set('b', { minimum: 'kata', enforce: true });
    await broken.sync('b', findings(1), signal);
    // A Report without its Sandbox findings would mislead: nothing is written.
    expect(h.world.reports.has('b')).toBe(false);
    expect(h.writes).toEqual(['error', 'created', 'error']);
  });

  it('writes nothing once the signal is aborted (leadership lost)', async () => {
    const h = new Harness();
    const controller = new AbortController();
    controller.abort(new Error('lost'));
    await expect(h.reporter().sync('a', findings(1, bare('p')), controller.signal)).rejects.toThrow('lost');
    expect(h.world.reportWrites).toEqual([]);
  });
});
