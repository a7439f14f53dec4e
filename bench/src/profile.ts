/**
 * Reads a V8 .cpuprofile (node --cpu-prof) and attributes the samples taken inside a time window
 * (the load run) to packages and functions. Idle samples are left out, so shares are of the
 * time the process was busy. The profiler samples wall-clock time of the running thread, so on a
 * contended core a descheduled function keeps being charged: shares are indicative, not exact.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Share {
  name: string;
  /** Share of busy samples, percent. */
  percent: number;
}

export interface ProfileSummary {
  busyMs: number;
  idleMs: number;
  /** Self time by package (node_modules package, Node internals, the webhook's files, V8 native). */
  packages: Share[];
  /** Self time by function. */
  functions: Share[];
  /** Inclusive time of the webhook's own functions (services/webhook/dist) and of GC. */
  webhookInclusive: Share[];
}

/** "express", "node:internal", "webhook: http/app.js", "(native)". */
export function packageOf(url: string): string {
  if (!url) return '(V8 / native)';
  const pnpm = /node_modules\/\.pnpm\/((?:@[^+/]+\+)?[^@/]+)@/.exec(url);
  if (pnpm?.[1]) return pnpm[1].replace('+', '/');
  const plain = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
  if (plain?.[1]) return plain[1];
  const ours = /\/(services\/[^/]+|packages\/[^/]+)\/dist\/(.+)$/.exec(url);
  if (ours) return `${ours[1]}: ${ours[2]}`;
  if (url.startsWith('node:')) return url.replace(/^node:internal\/.*/, 'node:internal (streams, modules, timers)');
  return url;
}

function frameName(cf: CallFrame): string {
  const where = packageOf(cf.url);
  return `${cf.functionName || '(anonymous)'} — ${where}${cf.url ? `:${cf.lineNumber + 1}` : ''}`;
}

function top(map: Map<string, number>, busy: number, n: number): Share[] {
  return [...map]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, t]) => ({ name, percent: (100 * t) / busy }));
}

/** `windowUs`: [start, end] in the monotonic clock of process.hrtime (µs); samples outside are ignored. */
export function summarizeProfile(path: string, windowUs?: [number, number]): ProfileSummary {
  const prof = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inWindow =
    windowUs !== undefined && windowUs[0] < prof.endTime && windowUs[1] > prof.startTime ? windowUs : undefined;
  const selfById = new Map<number, number>();
  let t = prof.startTime;
  for (let i = 0; i < prof.samples.length; i++) {
    t += prof.timeDeltas[i] ?? 0;
    if (inWindow && (t < inWindow[0] || t > inWindow[1])) continue;
    const id = prof.samples[i] as number;
    selfById.set(id, (selfById.get(id) ?? 0) + (prof.timeDeltas[i] ?? 0));
  }
  let busy = 0;
  let idle = 0;
  const packages = new Map<string, number>();
  const functions = new Map<string, number>();
  const inclusive = new Map<string, number>();
  for (const [id, us] of selfById) {
    const node = byId.get(id);
    if (!node) continue;
    if (node.callFrame.functionName === '(idle)') {
      idle += us;
      continue;
    }
    busy += us;
    const pkg = packageOf(node.callFrame.url);
    packages.set(pkg, (packages.get(pkg) ?? 0) + us);
    functions.set(frameName(node.callFrame), (functions.get(frameName(node.callFrame)) ?? 0) + us);
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const cf = byId.get(cur)?.callFrame;
      if (!cf) break;
      const ours = cf.url.includes('/services/webhook/dist/') || cf.functionName === '(garbage collector)';
      if (!ours) continue;
      const key = frameName(cf);
      if (seen.has(key)) continue;
      seen.add(key);
      inclusive.set(key, (inclusive.get(key) ?? 0) + us);
    }
  }
  return {
    busyMs: busy / 1000,
    idleMs: idle / 1000,
    packages: top(packages, busy, 14),
    functions: top(functions, busy, 14),
    webhookInclusive: top(inclusive, busy, 12),
  };
}
