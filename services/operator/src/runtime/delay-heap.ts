/** The keys a work queue holds back until a time (requeue-after, rate-limited retries), earliest first. */

export interface Delayed {
  readyAt: number;
  seq: number;
  key: string;
}

/** Binary min-heap on (readyAt, seq). */
export class DelayHeap {
  private readonly items: Delayed[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): Delayed | undefined {
    return this.items[0];
  }

  push(item: Delayed): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): Delayed | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    items[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let smallest = i;
      if (left < items.length && this.less(left, smallest)) smallest = left;
      if (right < items.length && this.less(right, smallest)) smallest = right;
      if (smallest === i) return top;
      this.swap(i, smallest);
      i = smallest;
    }
  }

  clear(): void {
    this.items.length = 0;
  }

  private less(a: number, b: number): boolean {
    const x = this.items[a];
    const y = this.items[b];
    if (x === undefined || y === undefined) return false;
    return x.readyAt < y.readyAt || (x.readyAt === y.readyAt && x.seq < y.seq);
  }

  private swap(a: number, b: number): void {
    const x = this.items[a];
    const y = this.items[b];
    if (x === undefined || y === undefined) return;
    this.items[a] = y;
    this.items[b] = x;
  }
}
