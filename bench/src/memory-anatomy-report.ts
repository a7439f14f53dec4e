/**
 * The report of the §2 memory anatomy (memory-anatomy.ts, main.ts `memoryAnatomy`): what the §2
 * load adds to the webhook's and the reference's memory, by kind of mapping (§2's own processes)
 * and, inside V8's heap, by kind of object (fresh processes with heap snapshots). Pure.
 */
import type { MemoryMap } from './memory-anatomy.js';
import type { HeapPoint, MemoryAnatomyResult } from './results.js';

const KiB = 1024;
const MiB = 1024 * 1024;

function mib(n: number): string {
  return Number.isFinite(n) ? n.toFixed(1) : 'n/a';
}

function signed(n: number, digits = 1): string {
  const s = n.toFixed(digits);
  return n > 0 ? `+${s}` : s;
}

function bytes(n: number): string {
  const a = Math.abs(n);
  if (a >= MiB) return `${signed(n / MiB, 2)} MiB`;
  if (a >= KiB) return `${signed(n / KiB, 1)} KiB`;
  return `${n > 0 ? '+' : ''}${n} B`;
}

/** The rows of the memory-map table: a label and how to read it. */
const MAP_ROWS: ReadonlyArray<[string, (m: MemoryMap) => number]> = [
  ['**RSS**', (m) => m.rssMiB],
  ["the node binary's own pages (code, read-only data)", (m) => m.executableMiB],
  ['other files (shared libraries)', (m) => m.otherFilesMiB],
  [
    'the main malloc heap (`[heap]`: Node, OpenSSL, socket and TLS buffers, Buffer backing stores)',
    (m) => m.mallocHeapMiB,
  ],
  ["other anonymous memory (V8's heap pages, other malloc arenas, thread stacks)", (m) => m.anonymousMiB],
];

function row(label: string, wb: number, wa: number, rb: number, ra: number): string {
  return `| ${label} | ${mib(wb)} | ${mib(wa)} | ${signed(wa - wb)} | ${mib(rb)} | ${mib(ra)} | ${signed(ra - rb)} |`;
}

export function memoryAnatomySection(m: MemoryAnatomyResult): string[] {
  const out: string[] = [];
  const p = (line = ''): void => {
    out.push(line);
  };
  const { maps, heaps } = m;
  const header =
    '| | webhook before | webhook after | webhook added | reference before | reference after | reference added |';
  p('### What the load adds to memory');
  p();
  p(
    "The memory maps of this section's webhook and reference (`/proc/<pid>/smaps`, resident memory by kind of mapping; " +
      '`bench/src/memory-anatomy.ts`), read before and after the load above. MiB.',
  );
  p();
  p(header);
  p('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const [label, read] of MAP_ROWS)
    p(
      row(
        label,
        read(maps.webhook.before),
        read(maps.webhook.after),
        read(maps.reference.before),
        read(maps.reference.after),
      ),
    );
  p();
  const w = heaps.webhook;
  const r = heaps.reference;
  p(
    `Inside V8's heap: a fresh webhook and then a fresh reference, each with the image's NODE_OPTIONS plus ` +
      `\`--heapsnapshot-signal\`, pinned as above, a heap snapshot before and after one round of this section's load ` +
      `(${m.containerCounts.join(', ')}-container Pods, ${m.secondsPerSize} s each; ${w.admissions.toLocaleString('en-US')} ` +
      `and ${r.admissions.toLocaleString('en-US')} admissions). A snapshot collects garbage first: it shows the objects ` +
      "that are live, by V8's node type. (Those processes' memory maps are not shown: a snapshot's own C++ memory is " +
      'freed, but glibc keeps much of it.) MiB.',
  );
  p();
  p(header);
  p('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
  p(row("**V8's live heap**", w.before.heapMiB, w.after.heapMiB, r.before.heapMiB, r.after.heapMiB));
  const types = Object.entries(w.after.heapByTypeMiB)
    .filter(([, v]) => v >= 0.1)
    .map(([k]) => k);
  const of = (pt: HeapPoint, type: string): number => pt.heapByTypeMiB[type] ?? 0;
  for (const type of types)
    p(row(`… ${type}`, of(w.before, type), of(w.after, type), of(r.before, type), of(r.after, type)));
  p();
  const rssAdded = maps.webhook.after.rssMiB - maps.webhook.before.rssMiB;
  const liveAdded = w.after.heapMiB - w.before.heapMiB;
  const mallocAdded = maps.webhook.after.mallocHeapMiB - maps.webhook.before.mallocHeapMiB;
  const anonAdded = maps.webhook.after.anonymousMiB - maps.webhook.before.anonymousMiB;
  p(
    `Of the ${mib(rssAdded)} MiB the load added to the webhook's RSS, ${mib(mallocAdded)} MiB are the main malloc heap ` +
      `and ${mib(anonAdded)} MiB other anonymous memory, while the live V8 objects went from ${mib(w.before.heapMiB)} to ` +
      `${mib(w.after.heapMiB)} MiB (${signed(liveAdded)}): what the ` +
      'load leaves is memory the process keeps to serve again (freed malloc chunks glibc does not return, V8 heap pages ' +
      'beyond the live objects), not data it holds. The reference: ' +
      `${mib(maps.reference.after.rssMiB - maps.reference.before.rssMiB)} MiB added to its RSS, ` +
      `${signed(r.after.heapMiB - r.before.heapMiB)} MiB to its live objects.`,
  );
  p();
  p("What grew in the webhook's V8 heap (the largest changes by kind; objects by constructor):");
  p();
  p('| kind | objects added | bytes added | bytes after |');
  p('| --- | ---: | ---: | ---: |');
  for (const c of w.growth)
    p(
      `| ${c.kind.replaceAll('|', '\\|')} | ${c.countDelta > 0 ? '+' : ''}${c.countDelta.toLocaleString('en-US')} | ${bytes(c.bytesDelta)} | ${bytes(c.bytesAfter).replace(/^\+/, '')} |`,
    );
  p();
  return out;
}
