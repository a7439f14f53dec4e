import type { ChartComplexityResult } from './chart-complexity.js';
import type { BenchConfig, Section } from './config.js';
import type { EngineTrimsResult } from './engine-trims.js';
import type { ExclusivePoolsBenchResult } from './exclusive-pools.js';
import type { FootprintStep } from './memory.js';
import type { HeapChange, MemoryMap } from './memory-anatomy.js';
import type { NativeProfile } from './native-profile.js';
import type { PatchCase } from './patch-bench.js';
import type { PodCreateResult } from './pod-create.js';
import type { MachineInfo, MachineSnapshot } from './proc.js';
import type { ProfileSummary } from './profile.js';
import type { RefusalResult } from './refusal.js';
import type { SandboxPodsResult } from './sandbox-pods.js';
import type { OperatorScaleResult, WebhookScaleResult } from './scale.js';
import type { PolicyScaleResult } from './scale-policy.js';
import type { StrengthResult } from './strength.js';
import type { WebhookLoadResult } from './webhook-bench.js';

/** Everything one `make bench` measured; bench/results/latest.json; docs/benchmarks.md is rendered from it. */
export interface BenchResults {
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  config: BenchConfig;
  machine: MachineInfo;
  versions: {
    kubernetes?: string;
    etcd?: string;
    webhookFlags?: string[];
    /** The commit the measured build came from, and files under services/ packages/ e2e/ that differed from it. */
    commit?: string;
    uncommitted?: string[];
  };
  loadStart: MachineSnapshot;
  loadEnd?: MachineSnapshot;
  /** Whether the webhook could be pinned to one CPU (taskset, ≥ 2 CPUs). */
  pinned: boolean;
  patch?: PatchCase[];
  webhook?: WebhookLoadResult;
  /** The webhook's RSS right after start (cache synced, no request yet) and after the §2 load. */
  webhookMemory?: {
    idleRssMiB: number;
    afterLoadRssMiB?: number;
    footprint?: FootprintStep[];
    /** The reference webhook (same NODE_OPTIONS and malloc settings) before and after the same rounds. */
    referenceIdleRssMiB?: number;
    referenceAfterLoadRssMiB?: number;
  };
  /** Where a profiled copy of the webhook spent its time under the §2 load. */
  webhookProfile?: ProfileSummary & { seconds: number; rps: number; file: string };
  /** perf's view of one admission's CPU time, the webhook and the reference under the same load (native-profile.ts). */
  webhookNative?: WebhookNativeProfile;
  /** What the §2 load adds to the memory of a fresh webhook and a fresh reference (memory-anatomy.ts). */
  webhookMemoryAnatomy?: MemoryAnatomyResult;
  podCreate?: PodCreateResult;
  /** Pod CREATE in a namespace governed by a sandbox policy (its Pod rule), against a plain one. */
  sandboxPods?: SandboxPodsResult;
  refusal?: RefusalResult;
  /** Pod CREATE through the exclusive-pools policy with 1 and with 1,000 mandates, against no policy. */
  exclusivePools?: ExclusivePoolsBenchResult;
  /** The cost of strength on the real node: Pod startup and Sandbox CREATE → Ready, runc vs runsc. */
  strength?: StrengthResult;
  chart?: ChartComplexityResult;
  scaleWebhook?: WebhookScaleResult;
  /** The same webhook after namespaces were added up to config.scaleLargeNamespaces. */
  scaleWebhookLarge?: WebhookScaleResult;
  scalePolicy?: PolicyScaleResult;
  /** One result per scale point, in the order run (a single result in older results). */
  scaleOperator?: OperatorScaleResult | OperatorScaleResult[];
  /** Candidate trims of the policy engine, side by side with e and f (section engine-trims). */
  engineTrims?: EngineTrimsResult;
  /** Sections that failed, with the error; they are reported as not measured. */
  errors: Partial<Record<Section, string>>;
  /** Sections measured again in later runs and merged in (BENCH_MERGE=1); the rest is this run's. */
  remeasured?: Remeasured[];
}

/** The native profiles of §2, or why they were not taken. */
export type WebhookNativeProfile =
  | { seconds: number; webhook: NativeProfile; reference: NativeProfile }
  | { skipped: string };

/** A later run of some sections, merged into the results of an earlier one (BENCH_MERGE=1). */
export interface Remeasured {
  sections: Section[];
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  versions: BenchResults['versions'];
  loadStart: MachineSnapshot;
  loadEnd?: MachineSnapshot;
  /** The run's parameters (rounds, creates per block, …). */
  config: BenchConfig;
}

/** The result fields each section writes. */
export const SECTION_RESULTS: Readonly<Record<Section, readonly (keyof BenchResults)[]>> = {
  patch: ['patch'],
  webhook: ['webhook', 'webhookMemory', 'webhookProfile', 'webhookNative', 'webhookMemoryAnatomy'],
  podcreate: ['podCreate'],
  'engine-trims': ['engineTrims'],
  chart: ['chart'],
  'scale-operator': ['scaleOperator'],
  'scale-webhook': ['scaleWebhook', 'scaleWebhookLarge'],
  'scale-policy': ['scalePolicy'],
  'sandbox-pods': ['sandboxPods'],
  refusal: ['refusal'],
  'exclusive-pools': ['exclusivePools'],
  strength: ['strength'],
};

/**
 * `previous` with the sections `run` measured successfully (run.config.sections without an
 * error) replaced by run's results, and run recorded in `remeasured` (if it measured any); everything else — the other sections' figures,
 * the run they came from, its machine and parameters — stays as it was. Pure.
 */
export function mergeResults(previous: BenchResults, run: BenchResults): BenchResults {
  // A section that failed in run keeps its earlier figures (main reports the failure).
  const sections = run.config.sections.filter((s) => run.errors[s] === undefined);
  const merged: BenchResults = { ...previous, errors: { ...previous.errors } };
  const writable = merged as unknown as Record<string, unknown>;
  for (const section of sections) {
    for (const key of SECTION_RESULTS[section]) {
      if (run[key] === undefined) delete writable[key];
      else writable[key] = run[key];
    }
    delete merged.errors[section];
  }
  merged.config = {
    ...previous.config,
    sections: [...new Set([...previous.config.sections, ...sections])],
  };
  const entry: Remeasured = {
    sections: [...sections],
    startedAt: run.startedAt,
    finishedAt: run.finishedAt,
    durationSeconds: run.durationSeconds,
    versions: run.versions,
    loadStart: run.loadStart,
    ...(run.loadEnd && { loadEnd: run.loadEnd }),
    config: run.config,
  };
  // A section measured again replaces its earlier re-measurement.
  const kept = (previous.remeasured ?? [])
    .map((r) => ({ ...r, sections: r.sections.filter((s) => !sections.includes(s)) }))
    .filter((r) => r.sections.length > 0);
  merged.remeasured = sections.length > 0 ? [...kept, entry] : (previous.remeasured ?? []);
  if (merged.remeasured.length === 0) delete merged.remeasured;
  return merged;
}

/** V8's live heap at one moment (a heap snapshot), by node type. */
export interface HeapPoint {
  heapMiB: number;
  heapByTypeMiB: Record<string, number>;
}

/** A fresh process's V8 heap before and after one round of the §2 load, and what grew in it. */
export interface HeapAnatomyTarget {
  before: HeapPoint;
  after: HeapPoint;
  admissions: number;
  growth: HeapChange[];
}

export interface MemoryAnatomyResult {
  /** The memory maps of §2's own processes (no snapshot taken): before and after its load. */
  maps: Record<'webhook' | 'reference', { before: MemoryMap; after: MemoryMap }>;
  /** Seconds of load per Pod size (containerCounts), one round, on the processes with heap snapshots. */
  secondsPerSize: number;
  containerCounts: number[];
  heaps: Record<'webhook' | 'reference', HeapAnatomyTarget>;
}
