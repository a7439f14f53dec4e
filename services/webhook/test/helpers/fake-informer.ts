/** An informer driven by the test: emits add/update/delete/error like NamespaceListWatch. */
import type { InformerLike, WatchHooks } from '../../src/cache/informer.js';
import type { NamespaceLike } from '../../src/cache/namespace-cache.js';

type Verb = 'add' | 'update' | 'delete' | 'error';

export class FakeInformer implements InformerLike<NamespaceLike> {
  hooks: WatchHooks | undefined;
  starts = 0;
  stops = 0;
  /** What the next start() does; default: connect the watch and resolve. */
  onStart: () => Promise<void> = async () => this.hooks?.connected();
  readonly #callbacks: Record<Verb, Array<(x: never) => void>> = { add: [], update: [], delete: [], error: [] };

  on(verb: 'add' | 'update' | 'delete', cb: (obj: NamespaceLike) => void): void;
  on(verb: 'error', cb: (err?: unknown) => void): void;
  on(verb: Verb, cb: (x: never) => void): void {
    this.#callbacks[verb].push(cb);
  }

  start(): Promise<void> {
    this.starts += 1;
    return this.onStart();
  }

  async stop(): Promise<void> {
    this.stops += 1;
  }

  emit(verb: 'add' | 'update' | 'delete', ns: NamespaceLike): void;
  emit(verb: 'error', err: unknown): void;
  emit(verb: Verb, x: unknown): void {
    for (const cb of this.#callbacks[verb]) (cb as (x: unknown) => void)(x);
  }

  /** Factory for NamespaceWatcher: captures the hooks the watch would call. */
  factory = (hooks: WatchHooks): InformerLike<NamespaceLike> => {
    this.hooks = hooks;
    return this;
  };
}

/** A logger that records what it was asked to log. */
export function recordingLogger(): {
  records: Array<{ level: string; message: string; meta: Record<string, unknown> }>;
  info: (m: string, meta?: Record<string, unknown>) => void;
  warn: (m: string, meta?: Record<string, unknown>) => void;
  error: (m: string, meta?: Record<string, unknown>) => void;
  debug: (m: string, meta?: Record<string, unknown>) => void;
} {
  const records: Array<{ level: string; message: string; meta: Record<string, unknown> }> = [];
  const at =
    (level: string) =>
    (message: string, meta: Record<string, unknown> = {}) => {
      records.push({ level, message, meta });
    };
  return { records, info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') };
}
