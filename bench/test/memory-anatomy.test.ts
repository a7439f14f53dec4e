/**
 * The memory anatomy of docs/benchmarks.md §2 ("What the load adds to memory"): the memory map
 * split by kind of mapping, and V8 heap snapshots taken by signal, summarized and compared.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  classifyMaps,
  heapGrowth,
  readMemoryMap,
  summarizeHeapSnapshot,
  takeHeapSnapshot,
} from '../src/memory-anatomy.js';
import { memoryAnatomySection } from '../src/memory-anatomy-report.js';

const NODE = '/opt/node/bin/node';
/** An excerpt of /proc/<pid>/smaps: one mapping of each kind (Rss lines only matter). */
const SMAPS = `00400000-00600000 r-xp 00000000 08:01 123 ${NODE}
Size:               2048 kB
Rss:                1024 kB
Pss:                1024 kB
02000000-02100000 rw-p 00000000 00:00 0                                  [heap]
Rss:                 512 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0 
Rss:                 256 kB
7f0000200000-7f0000300000 r-xp 00000000 08:01 456                        /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 128 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Rss:                  64 kB
7f0000400000-7f0000500000 r--p 00200000 08:01 123 ${NODE} (deleted)
Rss:                  32 kB
`;

describe('classifyMaps', () => {
  it("splits resident memory into the executable's pages, other files, the malloc heap and other anonymous memory", () => {
    expect(classifyMaps(SMAPS, NODE)).toEqual({
      rssMiB: (1024 + 512 + 256 + 128 + 64 + 32) / 1024,
      executableMiB: (1024 + 32) / 1024,
      otherFilesMiB: 128 / 1024,
      mallocHeapMiB: 512 / 1024,
      anonymousMiB: (256 + 64) / 1024,
    });
  });
});

describe('summarizeHeapSnapshot and heapGrowth', () => {
  const snapshot = (nodes: number[]) => ({
    snapshot: {
      meta: {
        node_fields: ['type', 'name', 'id', 'self_size', 'edge_count', 'detachedness'],
        node_types: [['hidden', 'array', 'string', 'object', 'code', 'closure'], 'string'] as [string[], ...unknown[]],
      },
    },
    // strings: 0 "Foo", 1 "hello", 2 "(object properties)", 3 "bar"
    strings: ['Foo', 'hello', '(object properties)', 'bar'],
    nodes,
  });
  const row = (type: number, name: number, size: number): number[] => [type, name, 1, size, 0, 0];

  it('tallies objects by constructor, arrays by their V8 name, and strings and closures by type only', () => {
    const s = summarizeHeapSnapshot(
      snapshot([...row(3, 0, 24), ...row(3, 0, 24), ...row(2, 1, 16), ...row(1, 2, 40), ...row(5, 3, 32)]),
    );
    expect(s.totalBytes).toBe(136);
    expect(s.byType).toEqual({
      object: { count: 2, bytes: 48 },
      string: { count: 1, bytes: 16 },
      array: { count: 1, bytes: 40 },
      closure: { count: 1, bytes: 32 },
    });
    expect(s.byKind).toEqual({
      'object Foo': { count: 2, bytes: 48 },
      string: { count: 1, bytes: 16 }, // never by its text: a string's name is its content
      'array (object properties)': { count: 1, bytes: 40 },
      closure: { count: 1, bytes: 32 },
    });
  });

  it('lists what changed, the largest change first, and leaves out what did not', () => {
    const before = summarizeHeapSnapshot(snapshot([...row(3, 0, 24), ...row(2, 1, 16)]));
    const after = summarizeHeapSnapshot(snapshot([...row(3, 0, 24), ...row(3, 0, 24), ...row(5, 3, 100)]));
    expect(heapGrowth(before, after)).toEqual([
      { kind: 'closure', countDelta: 1, bytesDelta: 100, bytesAfter: 100 },
      { kind: 'object Foo', countDelta: 1, bytesDelta: 24, bytesAfter: 48 },
      { kind: 'string', countDelta: -1, bytesDelta: -16, bytesAfter: 0 },
    ]);
  });
});

describe('a running process, read from outside', () => {
  let dir: string;
  let child: ChildProcess;
  let output = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kubeplus-bench-anatomy-'));
    // On SIGUSR1 the child keeps 5,000 instances of a class no other code has.
    const script = `class KubeplusAnatomyMarker { constructor(i) { this.i = i; this.s = 'x' + i; } }
      globalThis.kept = [];
      process.on('SIGUSR1', () => { for (let i = 0; i < 5000; i++) kept.push(new KubeplusAnatomyMarker(i)); console.log('allocated'); });
      setInterval(() => {}, 1000);
      console.log('ready');`;
    child = spawn(process.execPath, ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`, '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    child.stdout?.on('data', (d) => {
      output += String(d);
    });
    while (!output.includes('ready')) await new Promise((r) => setTimeout(r, 20));
  });

  afterAll(() => {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads the memory map: the node binary's pages are resident and the parts add up to the RSS", () => {
    const map = readMemoryMap(child.pid ?? 0);
    expect(map.executableMiB).toBeGreaterThan(1);
    expect(map.anonymousMiB).toBeGreaterThan(1);
    expect(map.executableMiB + map.otherFilesMiB + map.mallocHeapMiB + map.anonymousMiB).toBeCloseTo(map.rssMiB, 6);
  });

  it('takes two heap snapshots by signal; their growth shows the objects kept in between, and the files are removed', async () => {
    const before = await takeHeapSnapshot(child.pid ?? 0, dir);
    expect(before.byKind['object KubeplusAnatomyMarker']).toBeUndefined();
    process.kill(child.pid ?? 0, 'SIGUSR1');
    while (!output.includes('allocated')) await new Promise((r) => setTimeout(r, 20));
    const after = await takeHeapSnapshot(child.pid ?? 0, dir);
    const marker = heapGrowth(before, after, 1000).find((c) => c.kind === 'object KubeplusAnatomyMarker');
    expect(marker?.countDelta).toBe(5000);
    expect(marker?.bytesDelta).toBeGreaterThanOrEqual(5000 * 16);
    expect(after.totalBytes).toBeGreaterThan(before.totalBytes);
    expect(readdirSync(dir)).toEqual([]);
  }, 60_000);
});

describe('memoryAnatomySection', () => {
  const map = (rss: number, malloc: number, anon: number) => ({
    rssMiB: rss,
    executableMiB: rss - 2 - malloc - anon,
    otherFilesMiB: 2,
    mallocHeapMiB: malloc,
    anonymousMiB: anon,
  });
  const heap = (live: number, code: number) => ({ heapMiB: live, heapByTypeMiB: { code, object: live - code } });
  const result = {
    maps: {
      webhook: { before: map(85, 5, 25), after: map(110, 20, 35) },
      reference: { before: map(60, 4, 10), after: map(120, 25, 30) },
    },
    secondsPerSize: 5,
    containerCounts: [1, 10, 100],
    heaps: {
      webhook: {
        before: heap(12, 2),
        after: heap(14.5, 3.5),
        admissions: 150_000,
        growth: [{ kind: 'code', countDelta: 1200, bytesDelta: 1.5 * 1024 * 1024, bytesAfter: 3.5 * 1024 * 1024 }],
      },
      reference: { before: heap(5, 1), after: heap(6, 1.5), admissions: 220_000, growth: [] },
    },
  };

  it('shows each part before and after and what the load added, against how much the live V8 objects grew', () => {
    const text = memoryAnatomySection(result).join('\n');
    expect(text).toContain('| **RSS** | 85.0 | 110.0 | +25.0 | 60.0 | 120.0 | +60.0 |');
    expect(text).toContain(
      '| the main malloc heap (`[heap]`: Node, OpenSSL, socket and TLS buffers, Buffer backing stores) | 5.0 | 20.0 | +15.0 | 4.0 | 25.0 | +21.0 |',
    );
    expect(text).toContain("| **V8's live heap** | 12.0 | 14.5 | +2.5 | 5.0 | 6.0 | +1.0 |");
    expect(text).toContain('| … code | 2.0 | 3.5 | +1.5 | 1.0 | 1.5 | +0.5 |');
    expect(text).toContain(
      "Of the 25.0 MiB the load added to the webhook's RSS, 15.0 MiB are the main malloc heap and 10.0 MiB other anonymous memory, while the live V8 objects went from 12.0 to 14.5 MiB (+2.5)",
    );
    expect(text).toContain('150,000 and 220,000 admissions');
    expect(text).toContain('| code | +1,200 | +1.50 MiB | 3.50 MiB |');
  });
});
