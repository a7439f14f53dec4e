/**
 * Benchmark 1: the pure patch builder (services/webhook/src/admission/patch.ts) and its check
 * (patch-check.ts), in process.
 * Operations/s for Pods of growing size; every case measured in each of `rounds` runs
 * (cases interleaved within a run, so drift hits them alike); median and spread of the runs.
 */
import { buildNodeIsolationPatch } from '@kubeplus-isolation/webhook/dist/admission/patch.js';
import { patchProblem } from '@kubeplus-isolation/webhook/dist/admission/patch-check.js';
import { Bench } from 'tinybench';
import { admissionReview, makePod, type PodShape, poolMandate } from './pods.js';
import { type Summary, summarize } from './stats.js';

export interface PatchCase extends PodShape {
  /** AdmissionReview JSON size, bytes. */
  bodyBytes: number;
  /** JSON Patch operations produced. */
  patchOps: number;
  /** buildNodeIsolationPatch alone, ops/s. */
  patch: Summary;
  /** buildNodeIsolationPatch + patchProblem: what admit() runs per Pod, ops/s. */
  patchAndCheck: Summary;
  /** JSON.parse of the AdmissionReview body (the webhook's body reader does this per request), ops/s. */
  parseReview: Summary;
}

export interface PatchBenchOptions {
  rounds: number;
  containers: readonly number[];
  tolerations: readonly number[];
  /** Time budget per task and run, ms. */
  timeMs: number;
}

export async function runPatchBench(opts: PatchBenchOptions, log: (line: string) => void): Promise<PatchCase[]> {
  const mandate = poolMandate('team-a-pool');
  const cases = opts.containers.flatMap((containers) =>
    opts.tolerations.map((tolerations) => ({ containers, tolerations })),
  );
  const fixtures = cases.map((shape) => {
    const pod = makePod(shape);
    const body = JSON.stringify(admissionReview(pod, 'tenant'));
    const ops = buildNodeIsolationPatch(pod, mandate);
    if (ops.length === 0 || patchProblem(pod, ops) !== undefined)
      throw new Error(`bad fixture ${JSON.stringify(shape)}`);
    return { shape, pod, body, patchOps: ops.length };
  });
  const samples = new Map<string, number[]>();
  const record = (name: string, opsPerSecond: number): void => {
    const list = samples.get(name) ?? [];
    list.push(opsPerSecond);
    samples.set(name, list);
  };
  let sink = 0;
  for (let round = 0; round < opts.rounds; round++) {
    const bench = new Bench({ time: opts.timeMs, warmupTime: Math.max(50, opts.timeMs / 4) });
    for (const f of fixtures) {
      const key = `${f.shape.containers}/${f.shape.tolerations}`;
      bench.add(`patch ${key}`, () => {
        sink += buildNodeIsolationPatch(f.pod, mandate).length;
      });
      bench.add(`check ${key}`, () => {
        const ops = buildNodeIsolationPatch(f.pod, mandate);
        if (patchProblem(f.pod, ops) === undefined) sink += ops.length;
      });
      bench.add(`parse ${key}`, () => {
        sink += (JSON.parse(f.body) as { kind: string }).kind.length;
      });
    }
    await bench.run();
    for (const task of bench.tasks) {
      const r = task.result;
      if (r.state !== 'completed') throw new Error(`${task.name}: ${r.state}`);
      // Mean throughput of the run: iterations / time (includes GC pauses, as production does).
      record(task.name, 1000 / r.period);
    }
    log(`  patch builder: run ${round + 1}/${opts.rounds} done`);
  }
  if (sink === 42) log('');
  return fixtures.map((f) => {
    const key = `${f.shape.containers}/${f.shape.tolerations}`;
    const get = (name: string): Summary => summarize(samples.get(`${name} ${key}`) ?? []);
    return {
      ...f.shape,
      bodyBytes: Buffer.byteLength(f.body),
      patchOps: f.patchOps,
      patch: get('patch'),
      patchAndCheck: get('check'),
      parseReview: get('parse'),
    };
  });
}
