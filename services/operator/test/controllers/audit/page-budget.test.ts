import { describe, expect, it } from '@jest/globals';
import {
  LARGEST_POD_BYTES,
  POD_PAGE_BUDGET_BYTES,
  PodPageSizer,
  podsPerPage,
} from '../../../src/controllers/audit/page-budget.js';

const KiB = 1024;
const MiB = 1024 * KiB;

describe('podsPerPage', () => {
  it('fits the budget, between 1 and the caller’s limit', () => {
    expect(podsPerPage(200 * KiB, 8 * MiB, 500)).toBe(40);
    expect(podsPerPage(4 * KiB, 8 * MiB, 500)).toBe(500);
    expect(podsPerPage(16 * KiB, 8 * MiB, 500)).toBe(500); // an ordinary Pod: full pages
    expect(podsPerPage(9 * MiB, 8 * MiB, 500)).toBe(1); // never 0: a Pod larger than the budget still comes
    expect(podsPerPage(0, 8 * MiB, 500)).toBe(500);
    expect(podsPerPage(Number.NaN, 8 * MiB, 500)).toBe(1);
  });
});

describe('PodPageSizer', () => {
  it('starts as if Pods were the largest etcd stores, then sizes each page by the last one', () => {
    const pages = new PodPageSizer();
    expect(POD_PAGE_BUDGET_BYTES).toBe(8 * MiB);
    expect(pages.limit(500)).toBe(Math.floor(POD_PAGE_BUDGET_BYTES / LARGEST_POD_BYTES)); // 5
    pages.observe(5, 5 * 200 * KiB);
    expect(pages.limit(500)).toBe(40); // lowered for large Pods
    pages.observe(40, 40 * 2 * KiB);
    expect(pages.limit(500)).toBe(500); // raised again, up to the caller's limit
    expect(pages.limit(100)).toBe(100);
    pages.observe(0, 120); // an empty page says nothing about Pods
    expect(pages.limit(500)).toBe(500);
    pages.observe(500, 500 * MiB);
    expect(pages.limit(500)).toBe(8);
  });

  it('takes its budget and first guess as options', () => {
    const pages = new PodPageSizer({ budgetBytes: MiB, initialBytesPerPod: 10 * KiB });
    expect(pages.limit(500)).toBe(102);
    pages.observe(102, 102 * 100 * KiB);
    expect(pages.limit(500)).toBe(10);
  });
});
