/**
 * How much memory AdmissionReviews may take at once (issue 34): one budget for every request,
 * whatever callers send, so no caller can push a replica past its memory limit.
 *
 * The budget counts estimated bytes of memory (parse-cost.ts), not bytes on the wire: a review is
 * held as its bytes, as the text JSON.parse reads, and as the parsed value, and a body of `{}`s
 * parses to 21× its size. A request is admitted by its declared Content-Length before a byte of
 * its body is read (until then the socket is paused: TCP pushes back on the sender), holding
 * `READ_COST_PER_BYTE` × that; once read, its estimate is known and the hold grows to it (`grow`),
 * or the review is refused. It holds the memory until its response has been sent or its
 * connection closed: the parsed review lives that long. Two lanes, chosen by the declared size,
 * so that the reviews every real Pod produces are never starved by large ones:
 *
 * - **small** (≤ `smallReviewBytes` on the wire, a few KiB for a real Pod): admitted at once while
 *   the small lane stays within `smallBudgetBytes`; beyond it, refused at once (503), never queued;
 * - **large** (up to `--max-body-bytes`, 19 MiB by default: only a Pod built to be huge, e.g. a
 *   server-side dry-run of a 3 MiB Pod of `<`): served in arrival order while the large lane stays
 *   within `largeBudgetBytes`; at most `maxQueued` wait, each at most `maxWaitMs`, and the rest are
 *   refused at once (503).
 *
 * A refusal is an answer the API server treats as a webhook failure, so under failurePolicy
 * Ignore the Pod is admitted unpatched: counted as a fail-open (reason `overloaded`), and seen by
 * the operator's Pod watch. Pure logic and timers; no I/O.
 */

export type Lane = 'small' | 'large';

/**
 * Memory held per declared byte while a body is read: the bytes themselves, the text JSON.parse
 * reads, and at least as much again for the parsed value (parse-cost.ts).
 */
export const READ_COST_PER_BYTE = 3;
export const LANES: readonly Lane[] = ['small', 'large'];

export interface BodyBudgetOptions {
  /** Reviews of at most this many bytes (declared) are small. */
  smallReviewBytes: number;
  /** Estimated memory of small reviews held at once. */
  smallBudgetBytes: number;
  /** Estimated memory of large reviews held at once; also the most one review may take. */
  largeBudgetBytes: number;
  /** Large reviews waiting for their turn at once. */
  maxQueued: number;
  /** How long a large review may wait for its turn. */
  maxWaitMs: number;
}

const MiB = 1024 * 1024;

/**
 * The webhook's default budget (config.ts's flag defaults) for reviews of at most `maxBodyBytes`:
 * small reviews up to 256 KiB taking 32 MiB at once; larger ones 64 MiB (or 3 × the largest, so it
 * can be read), 16 waiting at most 5 s.
 */
export function defaultBodyBudget(maxBodyBytes: number): BodyBudgetOptions {
  return {
    smallReviewBytes: 256 * 1024,
    smallBudgetBytes: 32 * MiB,
    largeBudgetBytes: Math.max(64 * MiB, READ_COST_PER_BYTE * maxBodyBytes),
    maxQueued: 16,
    maxWaitMs: 5_000,
  };
}

/** Memory held in a lane for one review. */
export interface Hold {
  readonly lane: Lane;
  /** Estimated bytes held now. */
  readonly bytes: number;
  /**
   * Holds `total` estimated bytes instead (the review's estimate, once its body is read): true
   * when that fits its lane (or is less than it holds), false when it does not (nothing changes).
   */
  resize(total: number): boolean;
  /** Gives the memory back; calling it again does nothing. */
  release(): void;
}

export type Admission =
  | { kind: 'admitted'; hold: Hold }
  | { kind: 'queued'; lane: 'large'; granted: Promise<Hold | undefined>; cancel: () => void }
  | { kind: 'refused'; lane: Lane; message: string };

interface Waiter {
  bytes: number;
  resolve: (hold: Hold | undefined) => void;
  timer: ReturnType<typeof setTimeout>;
}

export class BodyBudget {
  readonly #opts: BodyBudgetOptions;
  readonly #inUse: Record<Lane, number> = { small: 0, large: 0 };
  readonly #queue: Waiter[] = [];

  constructor(opts: BodyBudgetOptions) {
    this.#opts = opts;
  }

  /** The lane a review of `bytes` (declared) takes. Pure. */
  laneOf(bytes: number): Lane {
    return bytes <= this.#opts.smallReviewBytes ? 'small' : 'large';
  }

  /** The most one review of `lane` may take: the lane's whole budget. */
  capacity(lane: Lane): number {
    return lane === 'small' ? this.#opts.smallBudgetBytes : this.#opts.largeBudgetBytes;
  }

  /** Estimated bytes held now, per lane. */
  inUse(): Readonly<Record<Lane, number>> {
    return { ...this.#inUse };
  }

  /** Large reviews waiting for their turn now. */
  queued(): number {
    return this.#queue.length;
  }

  /**
   * Admits a review of `declared` bytes (its Content-Length, already checked against the size
   * limit), holding `READ_COST_PER_BYTE` × that: at once, after a wait in the large lane's queue
   * (`granted` resolves to undefined when the wait times out or is cancelled), or refused.
   */
  admit(declared: number): Admission {
    const bytes = declared * READ_COST_PER_BYTE;
    if (this.laneOf(declared) === 'small') {
      if (this.#inUse.small + bytes > this.#opts.smallBudgetBytes) {
        return {
          kind: 'refused',
          lane: 'small',
          message: `webhook overloaded: small reviews take ${this.#opts.smallBudgetBytes} bytes of memory already; try again`,
        };
      }
      return { kind: 'admitted', hold: this.#hold('small', bytes) };
    }
    if (this.#queue.length === 0 && this.#fitsLarge(bytes)) {
      return { kind: 'admitted', hold: this.#hold('large', bytes) };
    }
    if (this.#queue.length >= this.#opts.maxQueued) {
      return {
        kind: 'refused',
        lane: 'large',
        message: `webhook overloaded: ${this.#opts.maxQueued} large reviews (over ${this.#opts.smallReviewBytes} bytes) are waiting already; try again`,
      };
    }
    let waiter: Waiter | undefined;
    const granted = new Promise<Hold | undefined>((resolve) => {
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

  #hold(lane: Lane, initial: number): Hold {
    this.#inUse[lane] += initial;
    let held = initial;
    let released = false;
    const budget = this.#opts[lane === 'small' ? 'smallBudgetBytes' : 'largeBudgetBytes'];
    return {
      lane,
      get bytes() {
        return released ? 0 : held;
      },
      resize: (total) => {
        if (released) return false;
        if (total > held && this.#inUse[lane] - held + total > budget) return false;
        this.#inUse[lane] += total - held;
        const shrunk = total < held;
        held = total;
        if (shrunk && lane === 'large') this.#grant();
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.#inUse[lane] -= held;
        if (lane === 'large') this.#grant();
      },
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
