/**
 * Where one admission's CPU time goes, down to the kernel: `perf record` (the software cpu-clock
 * event, with call chains) of a running server, all its threads, while the pinned load runs; each
 * sample goes into one bucket by its call chain (`bucketOf`), and a bucket's samples become µs of
 * CPU per admission. V8's --cpu-prof (profile.ts) sees JavaScript and names native time only by
 * the JavaScript function that called it; this sees what that native time is (the kernel's part
 * of a socket write, OpenSSL, malloc, V8's JSON parser, GC threads). Run for the webhook and the
 * reference one after the other, it shows where the webhook's extra time per admission goes.
 *
 * Needs `perf` and permission to profile another process (root, or perf_event_paranoid ≤ 1);
 * `nativeProfileUnavailable` says why not otherwise, and the section is reported as skipped.
 * JIT-compiled JavaScript has no symbols here (no --perf-basic-prof: it writes /tmp/perf-<pid>.map
 * and changes what runs); it is one bucket.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';

/** The buckets, in the order the rules try them (first match wins) and the report lists them. */
export const NATIVE_BUCKETS = [
  'kernel: waking the load generator (loopback socket delivery)',
  'kernel: TCP/IP, system calls, scheduler',
  'TLS record encryption and decryption (OpenSSL)',
  'garbage collection',
  'V8 compilers (background threads)',
  'JSON.parse',
  'JSON.stringify',
  'hidden-class changes (V8 MapUpdater, setPrototypeOf)',
  'HTTP parser (llhttp)',
  'JavaScript (JIT-compiled code)',
  'malloc, free, memcpy (libc)',
  'V8 and Node.js runtime, builtins, interpreter',
] as const;
export type NativeBucket = (typeof NATIVE_BUCKETS)[number];

export interface Frame {
  sym: string;
  dso: string;
}

const isKernel = (f: Frame): boolean => f.dso === '[kernel.kallsyms]' || f.dso.startsWith('[kernel');
const anyFrame = (stack: readonly Frame[], re: RegExp): boolean => stack.some((f) => re.test(f.sym));

/**
 * The bucket of one sample, its call chain leaf first. Kernel time spent in `sock_def_readable`
 * is the server's write waking the reader of the other end of a loopback connection: the load
 * generator, on the other core. It is charged to the server only because both ends are on one
 * machine, and it costs more the more often that reader is asleep (a slower server leaves it idle).
 */
export function bucketOf(stack: readonly Frame[]): NativeBucket {
  const leaf = stack[0] ?? { sym: '[unknown]', dso: '[unknown]' };
  if (isKernel(leaf)) {
    return anyFrame(stack, /^sock_def_readable$/)
      ? 'kernel: waking the load generator (loopback socket delivery)'
      : 'kernel: TCP/IP, system calls, scheduler';
  }
  if (/^(ossl_|aesni_|aes_|gcm_|SSL_|ssl3_|tls1?_|EVP_|CRYPTO_|OPENSSL_)/i.test(leaf.sym)) {
    return 'TLS record encryption and decryption (OpenSSL)';
  }
  if (
    anyFrame(
      stack,
      /Scavenger|MarkCompact|ConcurrentMarking|MinorMarkSweep|Sweeper|MarkingVisitor|GCTracer|Heap::Collect/,
    )
  ) {
    return 'garbage collection';
  }
  if (anyFrame(stack, /v8::internal::(compiler|maglev|baseline)::/)) return 'V8 compilers (background threads)';
  if (anyFrame(stack, /JsonParser/)) return 'JSON.parse';
  if (anyFrame(stack, /JsonStringifier/)) return 'JSON.stringify';
  if (anyFrame(stack, /MapUpdater|JSObject::SetPrototype|JSObject::MigrateToMap/)) {
    return 'hidden-class changes (V8 MapUpdater, setPrototypeOf)';
  }
  if (/^llhttp/.test(leaf.sym)) return 'HTTP parser (llhttp)';
  if (
    leaf.dso.startsWith('[JIT]') ||
    /perf-\d+\.map$/.test(leaf.dso) ||
    (leaf.sym === '[unknown]' && leaf.dso === '[unknown]')
  ) {
    return 'JavaScript (JIT-compiled code)';
  }
  if (/(^|\/)libc[.-]/.test(leaf.dso)) return 'malloc, free, memcpy (libc)';
  return 'V8 and Node.js runtime, builtins, interpreter';
}

/** Nanoseconds of CPU per bucket, from `perf script -F period,ip,sym,dso` output. */
export function bucketsOfPerfScript(text: string): Map<NativeBucket, number> {
  const out = new Map<NativeBucket, number>();
  let period = 0;
  let stack: Frame[] = [];
  const flush = (): void => {
    if (period > 0 && stack.length > 0) {
      const b = bucketOf(stack);
      out.set(b, (out.get(b) ?? 0) + period);
    }
    period = 0;
    stack = [];
  };
  for (const line of text.split('\n')) {
    const head = /^\s*(\d+)\s*$/.exec(line);
    if (head) {
      flush();
      period = Number(head[1]);
      continue;
    }
    const frame = /^\s+[0-9a-f]+\s+(.*?)\s+\(([^()]*)\)\s*$/.exec(line);
    if (frame) stack.push({ sym: frame[1] ?? '', dso: frame[2] ?? '' });
    else if (line.trim() === '') flush();
  }
  flush();
  return out;
}

export interface NativeProfile {
  /** Admissions answered while perf recorded. */
  admissions: number;
  /** CPU time perf sampled, all threads. */
  sampledCpuSeconds: number;
  /** Sampled CPU µs per admission, per bucket (every bucket, 0 when none). */
  usPerAdmission: Record<NativeBucket, number>;
}

/** All sampled CPU µs of one admission: the buckets summed. */
export function totalUsPerAdmission(p: NativeProfile): number {
  return Object.values(p.usPerAdmission).reduce((s, v) => s + v, 0);
}

/** Why perf cannot profile another process here, or undefined when it can. */
export function nativeProfileUnavailable(): string | undefined {
  try {
    execFileSync('perf', ['--version'], { stdio: 'ignore' });
  } catch {
    return '`perf` is not installed (Debian: linux-perf)';
  }
  const paranoid = '/proc/sys/kernel/perf_event_paranoid';
  if (process.getuid?.() !== 0 && existsSync(paranoid) && Number(readFileSync(paranoid, 'utf8')) > 1) {
    return `not root and ${paranoid} > 1: perf may not profile another process`;
  }
  return undefined;
}

/**
 * Records `pid` (all threads) into `file` while `during` runs; returns what `during` returned and
 * the per-admission buckets (`admissions(result)`: how many admissions it answered).
 */
export async function profileNative<T>(
  pid: number,
  file: string,
  during: () => Promise<T>,
  admissions: (result: T) => number,
): Promise<{ result: T; profile: NativeProfile }> {
  const perf = spawn('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '1999', '-g', '-p', String(pid), '-o', file], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  perf.stderr.on('data', (d) => {
    stderr += String(d);
  });
  const exited = new Promise<number | null>((resolve) => perf.on('exit', (code) => resolve(code)));
  // perf attaches within a few ms; a short wait keeps the first admissions inside the recording.
  await new Promise((r) => setTimeout(r, 300));
  let result: T;
  try {
    result = await during();
  } finally {
    perf.kill('SIGINT');
  }
  const code = await exited;
  if (code !== 0 && !existsSync(file)) throw new Error(`perf record failed (${code}): ${stderr.trim()}`);
  const script = execFileSync('perf', ['script', '-i', file, '-F', 'period,ip,sym,dso'], {
    encoding: 'utf8',
    maxBuffer: 1024 * 1024 * 1024,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const buckets = bucketsOfPerfScript(script);
  const n = admissions(result);
  const totalNs = [...buckets.values()].reduce((s, v) => s + v, 0);
  const usPerAdmission = Object.fromEntries(
    NATIVE_BUCKETS.map((b) => [b, n > 0 ? (buckets.get(b) ?? 0) / 1e3 / n : Number.NaN]),
  ) as Record<NativeBucket, number>;
  return { result, profile: { admissions: n, sampledCpuSeconds: totalNs / 1e9, usPerAdmission } };
}
