/**
 * The hold (issue 35): a Pod or Sandbox CREATE in a namespace KubePlus has just created waits
 * until the operator has settled that namespace (its isolation is in effect), so nothing of a
 * chart's first install is admitted ungoverned. Event-driven: a held request is a waiter on the
 * SettleCache, released by the informer event that brings the settled label; no timer polls and
 * no API call is made. Bounded: at most `maxHeld` requests at once (one more is refused at once),
 * each at most `timeoutMs` (then refused: the client, a controller, retries).
 *
 * The API server calls the hold entry only for namespaces labeled `managedby=kubeplus` without
 * the settled label (its namespaceSelector): once settled, the hold costs nothing.
 */
import type { HoldOutcome } from '../admission/metric-labels.js';
import { type HoldVerdict, holdVerdict, type SettleCache, type SettleView } from './settle-cache.js';

/** What the admission does next: answer as usual (with the namespace's current view, if known), or refuse. */
export type HoldAnswer =
  | { kind: 'proceed'; outcome: HoldOutcome; view: SettleView | undefined }
  | { kind: 'refuse'; outcome: 'timeout' | 'over_capacity' | 'shutdown'; message: string };

/** The exact refusal texts (README "The hold"). */
export function holdRefusalMessage(namespace: string, outcome: 'timeout' | 'over_capacity' | 'shutdown'): string {
  const base = `namespace ${namespace} is not yet settled by kubeplus-isolation (its isolation is not yet in effect)`;
  switch (outcome) {
    case 'timeout':
      return `${base}; the request can be retried`;
    case 'over_capacity':
      return `${base} and too many requests are held already; the request can be retried`;
    case 'shutdown':
      return `${base} and this webhook replica is shutting down; the request can be retried`;
  }
}

export interface HolderOptions {
  /** How long one request is held at most (below the entry's timeoutSeconds). */
  timeoutMs: number;
  /** Namespaces at least this old are never held. */
  windowMs: number;
  /** Requests held at once; one more is refused at once. */
  maxHeld: number;
  now?: () => number;
  /** Each answer's outcome and, for held ones, how long it was held. Must not throw. */
  onOutcome?: (outcome: HoldOutcome, heldSeconds: number | undefined) => void;
}

interface Held {
  finish(answer: HoldAnswer): void;
  namespace: string;
}

const NOT_HELD: Readonly<Record<Exclude<HoldVerdict, 'hold'>, HoldOutcome>> = {
  settled: 'settled',
  not_release: 'not_release',
  too_old: 'too_old',
};

export type { HoldOutcome };

export class Holder {
  readonly #cache: SettleCache;
  readonly #opts: HolderOptions;
  readonly #now: () => number;
  readonly #held = new Set<Held>();
  #closed = false;

  constructor(cache: SettleCache, opts: HolderOptions) {
    this.#cache = cache;
    this.#opts = opts;
    this.#now = opts.now ?? Date.now;
  }

  /** Requests held right now (the gauge). */
  get held(): number {
    return this.#held.size;
  }

  /**
   * At once when the request is not to be held (a Map read, no Promise), else a Promise that
   * settles on the namespace's settling event, on its timeout, or at shutdown. Never rejects.
   */
  admit(namespace: string, dryRun: boolean): HoldAnswer | Promise<HoldAnswer> {
    // A dry run persists nothing: nothing to hold back (and the operator proves a binding in
    // effect with one, hold/README: it must not wait for the settling it is about to allow).
    if (this.#opts.timeoutMs <= 0)
      return this.#done({ kind: 'proceed', outcome: 'disabled', view: this.#cache.get(namespace) });
    if (dryRun) return this.#done({ kind: 'proceed', outcome: 'dry_run', view: this.#cache.get(namespace) });
    const view = this.#cache.get(namespace);
    const arrivedAt = this.#now();
    if (view !== undefined) {
      const verdict = holdVerdict(view, arrivedAt, this.#opts.windowMs);
      if (verdict !== 'hold') return this.#done({ kind: 'proceed', outcome: NOT_HELD[verdict], view });
    }
    // Unsettled and young, or not delivered by the informer yet (the API server saw the
    // namespace labeled, so the informer's event is on its way): wait for its events.
    if (this.#closed) return this.#done(this.#refusal(namespace, 'shutdown'));
    if (this.#held.size >= this.#opts.maxHeld) return this.#done(this.#refusal(namespace, 'over_capacity'));
    return new Promise<HoldAnswer>((resolve) => {
      const started = performance.now();
      let stopWaiting = (): void => {};
      const held: Held = {
        namespace,
        finish: (answer) => {
          if (!this.#held.delete(held)) return;
          clearTimeout(timer);
          stopWaiting();
          this.#opts.onOutcome?.(answer.outcome, (performance.now() - started) / 1e3);
          resolve(answer);
        },
      };
      const timer = setTimeout(() => held.finish(this.#refusal(namespace, 'timeout')), this.#opts.timeoutMs);
      this.#held.add(held);
      stopWaiting = this.#cache.wait(namespace, (next) => {
        if (next === undefined) {
          held.finish({ kind: 'proceed', outcome: 'namespace_gone', view: undefined });
          return;
        }
        // Judged by the age it had on arrival: a request is never let go by its own wait.
        const verdict = holdVerdict(next, arrivedAt, this.#opts.windowMs);
        if (verdict === 'settled') held.finish({ kind: 'proceed', outcome: 'released', view: next });
        else if (verdict !== 'hold') held.finish({ kind: 'proceed', outcome: 'released_not_held', view: next });
      });
    });
  }

  /** Refuses every held request (shutdown: the client retries against another replica) and any later one. */
  close(): void {
    this.#closed = true;
    for (const h of [...this.#held]) h.finish(this.#refusal(h.namespace, 'shutdown'));
  }

  #refusal(namespace: string, outcome: 'timeout' | 'over_capacity' | 'shutdown'): HoldAnswer {
    return { kind: 'refuse', outcome, message: holdRefusalMessage(namespace, outcome) };
  }

  #done(answer: HoldAnswer): HoldAnswer {
    this.#opts.onOutcome?.(answer.outcome, undefined);
    return answer;
  }
}
