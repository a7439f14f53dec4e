/**
 * The object cache behind each informer (client-go's reflector + store): the shared list/watch loop
 * (`ListWatchLoop` in @kubeplus-isolation/service: resume from the last resourceVersion, relist on
 * 410 Gone, reopen an idle watch, wait before reopening one that keeps ending at once) filling a
 * cache of the objects by namespace and name, with client-node's `Informer` events and
 * `ObjectCache` reads — what client-node's `ListWatch` (`makeInformer`) offered, so
 * `ResourceInformer` (informer.ts) drives either. The I/O is an `ObjectListWatch`: client-node's
 * list call and Watch on a cluster (kube/informer-sources.ts), fakes in tests.
 *
 * Like client-node's ListWatch: `start()` resolves once the list is done and a watch has connected;
 * any other failure is reported through `error` and ends the run (ResourceInformer restarts it
 * with backoff, and it resumes from its resourceVersion); a relist delivers deletes for what is
 * gone and adds or updates (when the resourceVersion changed) for the rest; and the very object a
 * callback gets is the one cached.
 */
import { ListWatchLoop, type WatchClock, type WatchStream } from '@kubeplus-isolation/service';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { InformerSource } from './informer.js';

/** One list and one watch of a resource (kube/informer-sources.ts: client-node). */
export interface ObjectListWatch<T extends KubernetesObject> {
  /** Every object, and the list's resourceVersion. */
  list(signal: AbortSignal): Promise<{ items: readonly T[]; resourceVersion: string }>;
  /** One watch from `resourceVersion` (see WatchStream for what it calls when). */
  watch(resourceVersion: string, stream: WatchStream, signal: AbortSignal): void;
}

type ObjectVerb = 'add' | 'update' | 'delete';
type Verb = ObjectVerb | 'change' | 'error' | 'connect';
type Callback = (arg: never) => void;

function keyOf(obj: KubernetesObject): { namespace: string; name: string } {
  return { namespace: obj.metadata?.namespace || '', name: obj.metadata?.name || '' };
}

export class ListWatchCache<T extends KubernetesObject> implements InformerSource<T> {
  readonly #io: ObjectListWatch<T>;
  readonly #loop: ListWatchLoop;
  /** namespace ('' for cluster-scoped) → name → object. */
  readonly #objects = new Map<string, Map<string, T>>();
  readonly #callbacks: Record<ObjectVerb | 'error' | 'connect', Callback[]> = {
    add: [],
    update: [],
    delete: [],
    error: [],
    connect: [],
  };
  /** Resolves the pending start() (once connected, or when the run ends). */
  #started: (() => void) | undefined;
  #running: Promise<void> | undefined;

  constructor(io: ObjectListWatch<T>, options: { clock?: WatchClock } = {}) {
    this.#io = io;
    this.#loop = new ListWatchLoop(
      { list: (signal) => this.#list(signal), watch: (rv, stream, signal) => this.#io.watch(rv, stream, signal) },
      {
        event: (type, object) => this.#onEvent(type, object as T),
        connected: () => this.#onConnected(),
        ...(options.clock !== undefined && { clock: options.clock }),
      },
    );
  }

  on(verb: Verb, cb: Callback): void {
    if (verb === 'change') {
      for (const v of ['add', 'update', 'delete'] as const) this.#callbacks[v].push(cb);
      return;
    }
    this.#callbacks[verb].push(cb);
  }

  off(verb: Verb, cb: Callback): void {
    if (verb === 'change') {
      for (const v of ['add', 'update', 'delete'] as const) this.off(v, cb);
      return;
    }
    const list = this.#callbacks[verb];
    const i = list.indexOf(cb);
    if (i !== -1) list.splice(i, 1);
  }

  /** The resourceVersion it resumes from ('' = relist first). */
  latestResourceVersion(): string {
    return this.#loop.resourceVersion;
  }

  /** Resolves once listed and watching, or once the run failed (reported through `error`). */
  start(): Promise<void> {
    if (this.#running !== undefined) return Promise.resolve();
    return new Promise((resolve) => {
      this.#started = resolve;
      this.#running = this.#loop
        .start()
        .catch((err: unknown) => {
          for (const cb of this.#callbacks.error) (cb as (e: unknown) => void)(err);
        })
        .finally(() => {
          this.#running = undefined;
          this.#resolveStart();
        });
    });
  }

  async stop(): Promise<void> {
    await this.#loop.stop();
    await this.#running;
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#objects.get(namespace || '')?.get(name);
  }

  list(namespace?: string): T[] {
    if (!namespace) {
      const all: T[] = [];
      for (const objects of this.#objects.values()) all.push(...objects.values());
      return all;
    }
    return [...(this.#objects.get(namespace)?.values() ?? [])];
  }

  #resolveStart(): void {
    const resolve = this.#started;
    this.#started = undefined;
    resolve?.();
  }

  #onConnected(): void {
    for (const cb of this.#callbacks.connect) (cb as (e: unknown) => void)(undefined);
    this.#resolveStart();
  }

  /** The whole list: what it no longer has is deleted, the rest added or updated. */
  async #list(signal: AbortSignal): Promise<string> {
    const { items, resourceVersion } = await this.#io.list(signal);
    const listed = new Map<string, Set<string>>();
    for (const obj of items) {
      const { namespace, name } = keyOf(obj);
      let names = listed.get(namespace);
      if (names === undefined) {
        names = new Set();
        listed.set(namespace, names);
      }
      names.add(name);
    }
    for (const [namespace, objects] of this.#objects) {
      const names = listed.get(namespace);
      for (const [name, obj] of objects) {
        if (names?.has(name)) continue;
        objects.delete(name);
        this.#emit('delete', obj);
      }
      if (objects.size === 0) this.#objects.delete(namespace);
    }
    for (const obj of items) this.#addOrUpdate(obj);
    return resourceVersion;
  }

  #onEvent(type: string, obj: T): void {
    if (typeof obj !== 'object' || obj === null) return;
    if (type === 'ADDED' || type === 'MODIFIED') this.#addOrUpdate(obj);
    else if (type === 'DELETED') this.#delete(obj);
    // BOOKMARK: only its resourceVersion, which the loop takes.
  }

  #addOrUpdate(obj: T): void {
    const { namespace, name } = keyOf(obj);
    let objects = this.#objects.get(namespace);
    if (objects === undefined) {
      objects = new Map();
      this.#objects.set(namespace, objects);
    }
    const found = objects.get(name);
    if (found === undefined) {
      objects.set(name, obj);
      this.#emit('add', obj);
      return;
    }
    const rv = found.metadata?.resourceVersion;
    if (rv !== undefined && rv !== null && rv === obj.metadata?.resourceVersion) return;
    objects.set(name, obj);
    this.#emit('update', obj);
  }

  #delete(obj: T): void {
    const { namespace, name } = keyOf(obj);
    const objects = this.#objects.get(namespace);
    if (objects === undefined || !objects.delete(name)) return;
    this.#emit('delete', obj);
    if (objects.size === 0) this.#objects.delete(namespace);
  }

  #emit(verb: ObjectVerb, obj: T): void {
    // A copy: a callback may add or remove callbacks.
    for (const cb of this.#callbacks[verb].slice()) (cb as (o: T) => void)(obj);
  }
}
