/**
 * An in-memory API server for wiring tests: `FakeCluster` (test/cluster) holds the state and
 * takes the reconciler's reads and writes; every informer source of every replica is a
 * `FakeInformerSource` (test/runtime) fed from that state, so the operator's own writes come
 * back to it as watch events, as on a real cluster. `sync()` delivers pending changes (called
 * after every ClusterPort call and after the test changes the state).
 */

import type { PodLike, SandboxLike, SandboxPodLike } from '@kubeplus-isolation/spec';
import type {
  KubernetesObject,
  V1CustomResourceDefinition,
  V1Namespace,
  V1RuntimeClass,
} from '@kubernetes/client-node';
import type { ClusterPort, EventTarget, InstanceEvent } from '../src/cluster/port.js';
import type { PodLister } from '../src/controllers/audit/auditor.js';
import type { ExistingReport, Report } from '../src/controllers/compliance/openreport.js';
import type { ReportStore, SandboxLister } from '../src/controllers/compliance/reporter.js';
import type { ClusterPortOptions, InformerSources } from '../src/operator.js';
import { type GroupVersionResource, gvrString } from '../src/runtime/gvr.js';
import { FakeCluster } from './cluster/fake-cluster.js';
import { FakeInformerSource } from './runtime/fakes.js';

const POLICY_RESOURCES: Readonly<Record<string, string>> = {
  ValidatingAdmissionPolicy: 'validatingadmissionpolicies',
  ValidatingAdmissionPolicyBinding: 'validatingadmissionpolicybindings',
  MutatingAdmissionPolicy: 'mutatingadmissionpolicies',
  MutatingAdmissionPolicyBinding: 'mutatingadmissionpolicybindings',
};

type Objects = Map<string, KubernetesObject>;

const FORBIDDEN_PLAN = Array<'forbidden'>(1000).fill('forbidden');

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

export class FakeWorld {
  readonly cluster = new FakeCluster();
  /** CRDs exist only here (the reconciler never reads them). */
  readonly crds: Objects = new Map();
  /** Pods by namespace, for the audit's LIST (no informer watches Pods). */
  readonly pods = new Map<string, PodLike[]>();
  /** Sandboxes by namespace, for the reports' LIST. */
  readonly sandboxes = new Map<string, SandboxLike[]>();
  /** Per namespace, the Pods the Sandbox controller labelled (what the Sandboxes run). */
  readonly sandboxPods = new Map<string, SandboxPodLike[]>();
  /** Compliance Reports by namespace; `reportsServed` false: the Report API is not served (404). */
  readonly reports = new Map<string, ExistingReport & { metadata: { resourceVersion: string } }>();
  reportsServed = true;
  /** Every Report write, in order (`create ns`, `replace ns`, `delete ns`). */
  readonly reportWrites: string[] = [];
  private reportVersion = 0;
  private readonly sources = new Map<string, Array<FakeInformerSource<KubernetesObject>>>();
  private readonly forbidden = new Set<string>();

  /** Informer sources of one replica. */
  informerSources(): InformerSources {
    return {
      crds: () => this.source('crds') as unknown as FakeInformerSource<V1CustomResourceDefinition>,
      namespaces: (labelSelector) =>
        this.source(`namespaces?${labelSelector}`) as unknown as FakeInformerSource<V1Namespace>,
      runtimeClasses: () => this.source('runtimeclasses') as unknown as FakeInformerSource<V1RuntimeClass>,
      nodes: () => this.source('nodes'),
      policies: (type) => this.source(type.resource),
      instances: (gvr) => this.source(gvrString(gvr)),
    };
  }

  /**
   * The audit's Pod LIST over `pods` (by namespace), `pageSize` at most per page whatever the
   * caller asks, counting calls in `listCalls`; `listError` makes every call fail with it.
   */
  podLister(pageSize = Number.POSITIVE_INFINITY): PodLister & { listCalls: string[]; listError?: unknown } {
    const world = this;
    const lister = {
      listCalls: [] as string[],
      listError: undefined as unknown,
      async listPods(namespace: string, page: { limit: number; continueToken?: string | undefined }) {
        lister.listCalls.push(namespace);
        if (lister.listError !== undefined) throw lister.listError;
        const all = world.pods.get(namespace) ?? [];
        const from = Number(page.continueToken ?? '0');
        const to = from + Math.min(page.limit, pageSize);
        return { items: all.slice(from, to), continueToken: to < all.length ? String(to) : undefined };
      },
    };
    return lister;
  }

  /** The reports' Report store and Sandbox LIST over `reports` and `sandboxes`. */
  reportIo(): { store: ReportStore; sandboxes: SandboxLister } {
    const notServed = (): Error => Object.assign(new Error('404 page not found'), { code: 404 });
    const store: ReportStore = {
      read: async (namespace) =>
        this.reportsServed ? { served: true, report: structuredClone(this.reports.get(namespace)) } : { served: false },
      create: async (report: Report) => {
        if (!this.reportsServed) throw notServed();
        this.reportWrites.push(`create ${report.metadata.namespace}`);
        this.reports.set(report.metadata.namespace, this.stored(report));
      },
      replace: async (report: Report) => {
        if (!this.reportsServed) throw notServed();
        this.reportWrites.push(`replace ${report.metadata.namespace}`);
        this.reports.set(report.metadata.namespace, this.stored(report));
      },
      delete: async (namespace) => {
        this.reportWrites.push(`delete ${namespace}`);
        this.reports.delete(namespace);
      },
      listOwnNamespaces: async () =>
        this.reportsServed
          ? [...this.reports]
              .filter(([, r]) => r.metadata.labels?.['app.kubernetes.io/managed-by'] === 'kubeplus-isolation')
              .map(([ns]) => ns)
          : [],
    };
    const sandboxes: SandboxLister = {
      listSandboxes: async (namespace) => ({
        items: this.sandboxes.get(namespace) ?? [],
        apiVersion: 'agents.x-k8s.io/v1beta1',
      }),
      listSandboxPods: async (namespace) => ({ items: this.sandboxPods.get(namespace) ?? [] }),
    };
    return { store, sandboxes };
  }

  private stored(report: Report): ExistingReport & { metadata: { resourceVersion: string } } {
    const copy = structuredClone(report) as ExistingReport;
    return { ...copy, metadata: { ...copy.metadata, resourceVersion: String(++this.reportVersion) } };
  }

  putCrd(crd: V1CustomResourceDefinition): void {
    this.crds.set(keyOf(crd), crd);
    this.sync();
  }

  deleteCrd(name: string): void {
    this.crds.delete(`/${name}`);
    this.sync();
  }

  /**
   * The ClusterPort of one replica: FakeCluster, wired as controllers/instances/setup.ts wires KubeClusterPort
   * (RuntimeClasses from the replica's informer cache, Events through its recorder), with
   * `calls` naming every call and a `sync()` after each.
   */
  port(options: ClusterPortOptions, calls: string[]): ClusterPort {
    const cluster = this.cluster;
    const delegated: Record<string, unknown> = {
      listRuntimeClasses: async (tenant: string) => options.runtimeClasses(tenant),
      listSandboxInstances: async (tenant: string) => options.sandboxInstances(tenant),
      recordEvent: (target: EventTarget, event: InstanceEvent) => options.recordEvent(target, event),
    };
    return new Proxy(cluster, {
      get: (target, property, receiver) => {
        const value: unknown =
          typeof property === 'string' && property in delegated
            ? delegated[property]
            : Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]): Promise<unknown> => {
          calls.push(String(property));
          try {
            return await Reflect.apply(value, target, args);
          } finally {
            this.sync();
          }
        };
      },
    });
  }

  /** Brings every informer source to the current state, emitting add/update/delete events. */
  sync(): void {
    const views = this.views();
    for (const [resource, sources] of this.sources) {
      if (this.forbidden.has(resource)) continue; // no list, no watch events
      const want = views.get(resource) ?? new Map();
      for (const source of sources) {
        for (const [key, obj] of source.objects) if (!want.has(key)) source.remove(obj);
        for (const [key, obj] of want) {
          const have = source.objects.get(key);
          if (have?.metadata?.resourceVersion !== obj.metadata?.resourceVersion || have === undefined) {
            source.upsert(structuredClone(obj));
          }
        }
      }
    }
  }

  /** Every list of `resource` is refused with 403 from now on (no RBAC for it). */
  forbid(resource: string): void {
    this.forbidden.add(resource);
    for (const source of this.sources.get(resource) ?? []) source.startPlan.push(...FORBIDDEN_PLAN);
  }

  /** RBAC for `resource` is granted (e.g. by ClusterRole aggregation): its next list succeeds. */
  permit(resource: string): void {
    this.forbidden.delete(resource);
    for (const source of this.sources.get(resource) ?? []) source.startPlan.length = 0;
    this.sync();
  }

  private source(resource: string): FakeInformerSource<KubernetesObject> {
    const source = new FakeInformerSource<KubernetesObject>();
    if (this.forbidden.has(resource)) source.startPlan.push(...FORBIDDEN_PLAN);
    // A forbidden list returns nothing: its cache stays empty.
    else for (const [key, obj] of this.views().get(resource) ?? []) source.objects.set(key, structuredClone(obj));
    const list = this.sources.get(resource) ?? [];
    list.push(source);
    this.sources.set(resource, list);
    return source;
  }

  /** What each informer would list now, by resource (label selectors applied as the controllers' setups ask for them). */
  private views(): Map<string, Objects> {
    const views = new Map<string, Objects>();
    const add = (resource: string, obj: KubernetesObject): void => {
      const view = views.get(resource) ?? new Map();
      view.set(keyOf(obj), obj);
      views.set(resource, view);
    };
    for (const crd of this.crds.values()) add('crds', crd);
    for (const ns of this.cluster.namespaces.values()) {
      const obj: KubernetesObject = {
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: ns.name,
          uid: ns.uid,
          resourceVersion: ns.resourceVersion,
          labels: { ...ns.labels },
          annotations: { ...ns.annotations },
          creationTimestamp: new Date(ns.creationTimestamp),
        },
      };
      // The two Namespace selectors the setups use: owned namespaces, and the webhook's (isolated) ones.
      if (ns.labels['kubeplus.io/owner-uid'] !== undefined) add('namespaces?kubeplus.io/owner-uid', obj);
      if (ns.labels['kubeplus.io/node-isolation-enabled'] === 'true') {
        add('namespaces?kubeplus.io/node-isolation-enabled=true', obj);
      }
    }
    for (const obj of this.cluster.objects.values()) {
      const policy = POLICY_RESOURCES[obj.kind];
      if (obj.kind === 'RuntimeClass') add('runtimeclasses', obj as KubernetesObject);
      else if (policy !== undefined && obj.metadata.labels?.['app.kubernetes.io/managed-by'] === 'kubeplus-isolation') {
        add(policy, obj as KubernetesObject);
      }
    }
    for (const obj of this.cluster.instances.values()) {
      const kind = this.cluster.kinds.find((k) => k.kind === obj.kind);
      if (kind === undefined) continue;
      const gvr: GroupVersionResource = { group: kind.group, version: kind.version, resource: kind.plural };
      add(gvrString(gvr), obj as unknown as KubernetesObject);
    }
    return views;
  }
}
