/**
 * What a process's memory is made of, read from outside it (docs/benchmarks.md §2, "What the
 * load adds to memory"):
 *
 * - the memory map (`/proc/<pid>/smaps`): resident memory by kind of mapping — the node binary's
 *   own pages (code and read-only data, shared with every process of the same binary), other
 *   files (shared libraries, ICU data), the main thread's malloc heap (`[heap]`: Node's and
 *   OpenSSL's C++ allocations, socket and TLS buffers, Buffers' backing stores), and the other
 *   anonymous mappings (V8's heap pages, glibc's other malloc arenas, thread stacks);
 * - V8's heap, from a heap snapshot the process writes when signalled (`--heapsnapshot-signal`,
 *   `--diagnostic-dir`): live objects only (a snapshot collects garbage first), by node type and,
 *   for objects, by constructor; two snapshots give what grew between them.
 *
 * Pure functions decide (classifyMaps, summarizeHeapSnapshot, heapGrowth); readMemoryMap and
 * takeHeapSnapshot are the I/O around them.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

const MiB = 1024 * 1024;

/** Resident memory of one process by kind of mapping, in MiB. */
export interface MemoryMap {
  rssMiB: number;
  /** File-backed pages of the process's own executable (the node binary: V8, Node, OpenSSL code). */
  executableMiB: number;
  /** Other file-backed pages (shared libraries, data files). */
  otherFilesMiB: number;
  /** The main malloc arena (`[heap]`). */
  mallocHeapMiB: number;
  /** Other anonymous memory: V8's heap pages, glibc's other arenas, thread stacks, [stack]. */
  anonymousMiB: number;
}

/** Splits `/proc/<pid>/smaps` (`text`) by kind of mapping; `executable` is the process's exe path. */
export function classifyMaps(text: string, executable: string): MemoryMap {
  const kB = { executable: 0, otherFiles: 0, mallocHeap: 0, anonymous: 0 };
  let kind: keyof typeof kB = 'anonymous';
  for (const line of text.split('\n')) {
    const header = /^[0-9a-f]+-[0-9a-f]+\s+\S+\s+\S+\s+\S+\s+\d+\s*(.*)$/.exec(line);
    if (header) {
      const path = (header[1] ?? '').trim().replace(/ \(deleted\)$/, '');
      if (path === executable) kind = 'executable';
      else if (path === '[heap]') kind = 'mallocHeap';
      else if (path.startsWith('/')) kind = 'otherFiles';
      else kind = 'anonymous';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) kB[kind] += Number(rss[1]);
  }
  const mib = (v: number): number => (v * 1024) / MiB;
  return {
    rssMiB: mib(kB.executable + kB.otherFiles + kB.mallocHeap + kB.anonymous),
    executableMiB: mib(kB.executable),
    otherFilesMiB: mib(kB.otherFiles),
    mallocHeapMiB: mib(kB.mallocHeap),
    anonymousMiB: mib(kB.anonymous),
  };
}

export function readMemoryMap(pid: number): MemoryMap {
  const executable = readlinkSync(`/proc/${pid}/exe`).replace(/ \(deleted\)$/, '');
  return classifyMaps(readFileSync(`/proc/${pid}/smaps`, 'utf8'), executable);
}

/** Count and bytes of one kind of heap object. */
export interface HeapTally {
  count: number;
  bytes: number;
}

/** A heap snapshot reduced to what it holds by kind. */
export interface HeapSummary {
  totalBytes: number;
  /** By V8's node type (object, code, string, closure, array, hidden, native, …). */
  byType: Record<string, HeapTally>;
  /**
   * By kind: `object <constructor>`, `native <name>`, `hidden <name>`, `array <name>` (names V8
   * gives internal arrays, e.g. "(object properties)"), and the bare type for the rest, whose
   * names are per instance (a string's text, a function's name).
   */
  byKind: Record<string, HeapTally>;
}

/** The fields of a .heapsnapshot this reads (V8's JSON format; `snapshot.meta` describes `nodes`). */
export interface HeapSnapshotJson {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Node types whose names are bounded (constructors, V8's internal names): tallied by name too. */
const NAMED_TYPES = new Set(['object', 'native', 'hidden', 'array']);

export function summarizeHeapSnapshot(snapshot: HeapSnapshotJson): HeapSummary {
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  if (typeAt < 0 || nameAt < 0 || sizeAt < 0) throw new Error('heap snapshot: no type, name or self_size field');
  const byType: Record<string, HeapTally> = {};
  const byKind: Record<string, HeapTally> = {};
  const add = (into: Record<string, HeapTally>, key: string, bytes: number): void => {
    const t = into[key] ?? { count: 0, bytes: 0 };
    t.count += 1;
    t.bytes += bytes;
    into[key] = t;
  };
  let totalBytes = 0;
  const { nodes, strings } = snapshot;
  for (let i = 0; i + width <= nodes.length; i += width) {
    const type = types[nodes[i + typeAt] ?? -1] ?? 'unknown';
    const bytes = nodes[i + sizeAt] ?? 0;
    totalBytes += bytes;
    add(byType, type, bytes);
    add(byKind, NAMED_TYPES.has(type) ? `${type} ${strings[nodes[i + nameAt] ?? -1] ?? '?'}` : type, bytes);
  }
  return { totalBytes, byType, byKind };
}

/** What grew (or shrank) between two summaries, kind by kind, largest change in bytes first. */
export interface HeapChange {
  kind: string;
  countDelta: number;
  bytesDelta: number;
  bytesAfter: number;
}

export function heapGrowth(before: HeapSummary, after: HeapSummary, top = 12): HeapChange[] {
  const kinds = new Set([...Object.keys(before.byKind), ...Object.keys(after.byKind)]);
  return [...kinds]
    .map((kind) => {
      const b = before.byKind[kind] ?? { count: 0, bytes: 0 };
      const a = after.byKind[kind] ?? { count: 0, bytes: 0 };
      return { kind, countDelta: a.count - b.count, bytesDelta: a.bytes - b.bytes, bytesAfter: a.bytes };
    })
    .filter((c) => c.bytesDelta !== 0 || c.countDelta !== 0)
    .sort((x, y) => Math.abs(y.bytesDelta) - Math.abs(x.bytesDelta) || x.kind.localeCompare(y.kind))
    .slice(0, top);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Makes process `pid` (started with `--heapsnapshot-signal=<signal> --diagnostic-dir=<dir>`) write
 * a heap snapshot, waits for the file to be complete (it parses), summarizes and removes it.
 */
export async function takeHeapSnapshot(
  pid: number,
  dir: string,
  opts: { signal?: NodeJS.Signals; timeoutMs?: number } = {},
): Promise<HeapSummary> {
  const list = (): string[] => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.heapsnapshot')) : []);
  const known = new Set(list());
  process.kill(pid, opts.signal ?? 'SIGUSR2');
  const deadline = Date.now() + (opts.timeoutMs ?? 120_000);
  let lastSize = -1;
  for (;;) {
    if (Date.now() > deadline) throw new Error(`process ${pid} wrote no complete heap snapshot to ${dir} in time`);
    await sleep(200);
    const file = list().find((f) => !known.has(f));
    if (file === undefined) continue;
    const path = join(dir, file);
    const size = statSync(path).size;
    if (size === 0 || size !== lastSize) {
      lastSize = size;
      continue;
    }
    let parsed: HeapSnapshotJson;
    try {
      parsed = JSON.parse(readFileSync(path, 'utf8')) as HeapSnapshotJson;
    } catch {
      continue; // still being written
    }
    rmSync(path, { force: true });
    return summarizeHeapSnapshot(parsed);
  }
}
