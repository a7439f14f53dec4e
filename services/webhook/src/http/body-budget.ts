/**
 * How many bytes of AdmissionReviews the webhook holds at once (issue 34): one budget for every
 * request, whatever callers send, so no caller can buffer the replica past its memory limit.
 *
 * A request is admitted to the budget by its declared Content-Length before a byte of its body
 * is read (until then the socket is paused: TCP pushes back on the sender), and holds its bytes
 * until its response has been sent or its connection closed: the parsed review lives that long.
 * Two lanes, so that the reviews every real Pod produces are never starved by large ones:
 *
 * - **small** (≤ `smallReviewBytes`, a few KiB for a real Pod): admitted at once while the small
 *   lane's bytes stay within `smallBudgetBytes`; beyond it, refused at once (503), never queued;
 * - **large** (up to `--max-body-bytes`, 19 MiB by default: only a Pod built to be huge, e.g. a
 *   server-side dry-run of a 3 MiB Pod of `<`): served in arrival order while the large lane's bytes
 *   stay within `largeBudgetBytes` (by default one review of the largest size at a time); at most
 *   `maxQueued` wait, each at most `maxWaitMs`, and the rest are refused at once (503).
 *
 * A refusal is an answer the API server treats as a webhook failure, so under failurePolicy
 * Ignore the Pod is admitted unpatched: counted as a fail-open (reason `overloaded`), and seen by
 * the operator's Pod watch. Pure logic and timers; no I/O.
 */

export type Lane = 'small' | 'large';
export const LANES: readonly Lane[] = ['small', 'large'];

export interface BodyBudgetOptions {
  /** Reviews of at most this many bytes are small. */
  smallReviewBytes: number;
  /** Bytes of small reviews held at once. */
  smallBudgetBytes: number;
  /** Bytes of large reviews held at once; at least the largest review accepted, so it fits alone. */
  largeBudgetBytes: number;
  /** Large reviews waiting for their turn at once. */
  maxQueued: number;
  /** How long a large review may wait for its turn. */
  maxWaitMs: number;
}

/** Gives the bytes back; calling it again does nothing. */
export type Release = () => void;

export type Admission =
  | { kind: 'admitted'; lane: Lane; release: Release }
  | { kind: 'queued'; lane: 'large'; granted: Promise<Release | undefined>; cancel: () => void }
  | { kind: 'refused'; lane: Lane; message: string };

interface Waiter {
  bytes: number;
  resolve: (release: Release | undefined) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class BodyBudget {
  readonly #opts: BodyBudgetOptions;
  readonly #inUse: Record<Lane, number> = { small: 0, large: 0 };
  readonly #queue: Waiter[] = [];

  constructor(opts: BodyBudgetOptions) {
    this.#opts = opts;
  }

  /** The lane a review of `bytes` takes. Pure. */
  laneOf(bytes: number): Lane {
    return bytes <= this.#opts.smallReviewBytes ? 'small' : 'large';
  }

  /** Bytes held now, per lane. */
  inUse(): Readonly<Record<Lane, number>> {
    return { ...this.#inUse };
  }

  /** Large reviews waiting for their turn now. */
  queued(): number {
    return this.#queue.length;
  }

  /**
   * Admits a review of `bytes` (its declared Content-Length, already checked against the size
   * limit): at once, after a wait in the large lane's queue (`granted` resolves to undefined when
   * the wait times out or is cancelled), or refused.
   */
  admit(bytes: number): Admission {
    if (this.laneOf(bytes) === 'small') {
      if (this.#inUse.small + bytes > this.#opts.smallBudgetBytes) {
        return {
          kind: 'refused',
          lane: 'small',
          message: `webhook overloaded: ${this.#opts.smallBudgetBytes} bytes of reviews are being read already; try again`,
        };
      }
      return { kind: 'admitted', lane: 'small', release: this.#hold('small', bytes) };
    }
    if (this.#queue.length === 0 && this.#fitsLarge(bytes)) {
      return { kind: 'admitted', lane: 'large', release: this.#hold('large', bytes) };
    }
    if (this.#queue.length >= this.#opts.maxQueued) {
      return {
        kind: 'refused',
        lane: 'large',
        message: `webhook overloaded: ${this.#opts.maxQueued} large reviews (over ${this.#opts.smallReviewBytes} bytes) are waiting already; try again`,
      };
    }
    let waiter: Waiter | undefined;
    const granted = new Promise<Release | undefined>((resolve) => {
      waiter = {
        bytes,
        resolve,
        timer: setTimeout(() => this.#leave(waiter as Waiter), this.#opts.maxWaitMs),
      };
      this.#queue.push(waiter);
    });
    return { kind: 'queued', lane: 'large', granted, cancel: () => this.#leave(waiter as Waiter) };
  }

  #fitsLarge(bytes: number): boolean {
    // One review always fits an empty lane, so none can wait forever.
    return this.#inUse.large === 0 || this.#inUse.large + bytes <= this.#opts.largeBudgetBytes;
  }

  #hold(lane: Lane, bytes: number): Release {
    this.#inUse[lane] += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#inUse[lane] -= bytes;
      if (lane === 'large') this.#grant();
    };
  }

  /** Admits waiting large reviews in arrival order while they fit. */
  #grant(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0] as Waiter;
      if (!this.#fitsLarge(head.bytes)) return;
      this.#queue.shift();
      clearTimeout(head.timer);
      head.resolve(this.#hold('large', head.bytes));
    }
  }

  /** A waiter leaves the queue unserved (its wait timed out, or its client went away). */
  #leave(waiter: Waiter): void {
    const i = this.#queue.indexOf(waiter);
    if (i < 0) return;
    this.#queue.splice(i, 1);
    clearTimeout(waiter.timer);
    waiter.resolve(undefined);
    // The head may have left: the next one may fit now.
    if (i === 0) this.#grant();
  }
}
