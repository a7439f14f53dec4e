import type { ChartComplexityResult } from './chart-complexity.js';
import type { BenchConfig, Section } from './config.js';
import type { FootprintStep } from './memory.js';
import type { PatchCase } from './patch-bench.js';
import type { PodCreateResult } from './pod-create.js';
import type { MachineInfo, MachineSnapshot } from './proc.js';
import type { ProfileSummary } from './profile.js';
import type { OperatorScaleResult, WebhookScaleResult } from './scale.js';
import type { PolicyScaleResult } from './scale-policy.js';
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
  webhookMemory?: { idleRssMiB: number; afterLoadRssMiB?: number; footprint?: FootprintStep[] };
  /** Where a profiled copy of the webhook spent its time under the §2 load. */
  webhookProfile?: ProfileSummary & { seconds: number; rps: number; file: string };
  podCreate?: PodCreateResult;
  chart?: ChartComplexityResult;
  scaleWebhook?: WebhookScaleResult;
  scalePolicy?: PolicyScaleResult;
  scaleOperator?: OperatorScaleResult;
  /** Sections that failed, with the error; they are reported as not measured. */
  errors: Partial<Record<Section, string>>;
}
