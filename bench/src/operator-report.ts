/**
 * §5 "Operator with many instances": the scale points (one run per instance count, each on its
 * own control plane), their growth per 1,000 instances, and the operator's verdicts. Pure: the
 * lines and verdicts from the results.
 */
import type { BenchResults } from './results.js';
import type { OperatorScaleResult } from './scale.js';

export interface OperatorVerdict {
  target: string;
  /** What the target compares (verdicts.ts Verdict.basis): an absolute bound from the issue. */
  basis: string;
  measured: string;
  met: boolean | undefined;
  detail: string;
}

/** The time target of the issue: 1,000 instances within 60 s, 10,000 within 10 minutes. */
export const OPERATOR_TARGETS: ReadonlyArray<{ instances: number; seconds: number }> = [
  { instances: 1_000, seconds: 60 },
  { instances: 10_000, seconds: 600 },
];

function num(n: number | undefined, digits = 0): string {
  if (n === undefined || !Number.isFinite(n)) return 'n/a';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** 3 significant digits below 1,000, whole numbers above. */
function sig(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return 'n/a';
  return Math.abs(n) >= 1000 ? num(n, 0) : String(Number(n.toPrecision(3)));
}

/** The points of a result, in the order run (older results hold one). */
export function operatorScalePoints(r: BenchResults): OperatorScaleResult[] {
  const so = r.scaleOperator;
  if (so === undefined) return [];
  return Array.isArray(so) ? so : [so];
}

/** Seconds from the first create to the end of the wait of a point that timed out (the wait starts after the last create). */
function waited(p: OperatorScaleResult, timeoutSeconds: number): number {
  return p.createSeconds + timeoutSeconds;
}

/** Instances fully isolated per second, from the time or (timed out) from what was done by the deadline. */
function rate(p: OperatorScaleResult, timeoutSeconds: number): number {
  return p.timedOut ? doneCount(p) / waited(p, timeoutSeconds) : p.instances / p.fullyIsolatedSeconds;
}

/** The growth table and the per-point details. */
export function operatorScaleSection(r: BenchResults): { lines: string[]; verdicts: OperatorVerdict[] } {
  const lines: string[] = [];
  const p = (line = ''): void => {
    lines.push(line);
  };
  const points = operatorScalePoints(r);
  // A section re-measured later (BENCH_MERGE) ran with that run's parameters, not the first run's.
  const timeout =
    r.remeasured?.find((x) => x.sections.includes('scale-operator'))?.config.operatorTimeoutSeconds ??
    r.config.operatorTimeoutSeconds;
  const first = points[0];
  if (first === undefined) return { lines, verdicts: [] };
  const nodeOptions = first.nodeOptions;
  p(
    `The built operator (\`services/operator/dist/main.js --platform-namespace=kubeplus --leader-elect=false\`, admin ` +
      `kubeconfig, concurrency: ${first.concurrency}, ${
        nodeOptions === undefined
          ? 'NODE_OPTIONS not recorded'
          : nodeOptions === ''
            ? 'no NODE_OPTIONS'
            : `\`NODE_OPTIONS=${nodeOptions}\` (the operator image's, read from services/operator/Dockerfile)`
      }) watches an instance Kind registered as KubePlus does (CRD labeled \`registered-by=kubeplus\`; the Agent Sandbox ` +
      'CRDs installed). N instances are created in the platform namespace (16 concurrent creates), each annotated ' +
      '`kubeplus.io/node-isolation` (its own pool) and `kubeplus.io/sandbox-isolation` ' +
      '(`{"minRuntimeClass":"kata","enforce":true}`), so the operator creates a tenant namespace per instance (labeled + ' +
      `annotated) and ${
        (first.sandboxLayout ?? 'per-instance') === 'shared'
          ? 'a RuntimeClass, a SandboxIsolation parameter and a binding of the ONE shared ValidatingAdmissionPolicy ' +
            '(`--sandbox-policy-layout=shared`, `BENCH_OPERATOR_SANDBOX_LAYOUT`; no policy per instance)'
          : 'a RuntimeClass plus a ValidatingAdmissionPolicy and binding of its own (`--sandbox-policy-layout=per-instance`)'
      }. Fully isolated = every namespace labeled + annotated and ` +
      'every `kubeplus-sandbox-<instance>` RuntimeClass present, seen by two watches (a poll would LIST every namespace, ' +
      'a load that grows with N). Each point runs on a control plane of its own (the e2e harness’s, started for it and ' +
      'stopped after), so no point inherits another’s objects; the controller-manager creates each new namespace’s ' +
      'ServiceAccount and ConfigMap meanwhile, as in a real cluster. No cgroup limit: V8 sizes its heap from the ' +
      'machine’s memory, so RSS holds garbage a pod under the chart’s limit would collect; the V8 heap used at the ' +
      'end is the closer figure of what the operator keeps.' +
      (points.some((x) => x.sandbox === false)
        ? ' Rows marked “node isolation only” ran the same count with the node-isolation annotation alone ' +
          '(`BENCH_OPERATOR_SANDBOX`): no RuntimeClass, policy or binding per instance, done when every namespace is; ' +
          'beside the row of the same count with both annotations, the difference is what the per-instance sandbox ' +
          'objects cost. The verdicts judge only the rows with both.'
        : ''),
  );
  p();
  p(
    '| instances | created in s | **fully isolated after s** | s per 1,000 | instances/s | RSS ready / end / peak MiB | ' +
      'RSS end − ready per 1,000 done, MiB | V8 heap used at end MiB | CPU s | CPU s per 1,000 done |',
  );
  p('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const pt of points) {
    // Per 1,000 instances done: a point that timed out did fewer than it created.
    const k = (pt.timedOut ? doneCount(pt) : pt.instances) / 1000;
    const done = pt.timedOut
      ? `not within ${num(waited(pt, timeout))} (${num(pt.namespacesIsolated)} namespaces, ${num(pt.runtimeClasses)} classes)`
      : `**${num(pt.fullyIsolatedSeconds, 1)}**`;
    p(
      `| ${instancesCell(pt)} | ${num(pt.createSeconds, 1)} | ${done} | ${pt.timedOut ? 'n/a' : num(pt.fullyIsolatedSeconds / k, 1)} | ` +
        `${num(rate(pt, timeout), 1)} | ${num(pt.rssReadyMiB, 0)} / ${num(pt.rssMiB, 0)} / ${num(pt.peakRssMiB, 0)} | ` +
        `${pt.rssReadyMiB === undefined ? 'n/a' : num((pt.rssMiB - pt.rssReadyMiB) / k, 1)} | ${num(pt.heapUsedMiB, 0)} | ` +
        `${num(pt.cpuSeconds, 1)} | ${num(pt.cpuSeconds / k, 1)} |`,
    );
  }
  p();
  if (points.some((pt) => pt.components !== undefined)) {
    p(
      'The point’s own control plane at the end (RSS; CPU-seconds since the first create), beside the operator’s — ' +
        'where the time and memory of isolating N tenants go:',
    );
    p();
    p('| instances | kube-apiserver RSS MiB / CPU s | kube-controller-manager | etcd | operator |');
    p('| ---: | ---: | ---: | ---: | ---: |');
    const usage = (pt: OperatorScaleResult, name: string): string => {
      const u = pt.components?.[name];
      return u === undefined ? 'n/a' : `${num(u.rssMiB, 0)} / ${num(u.cpuSeconds, 1)}`;
    };
    for (const pt of points) {
      p(
        `| ${instancesCell(pt)} | ${usage(pt, 'kube-apiserver')} | ${usage(pt, 'kube-controller-manager')} | ` +
          `${usage(pt, 'etcd')} | ${num(pt.rssMiB, 0)} / ${num(pt.cpuSeconds, 1)} |`,
      );
    }
    p();
  }
  p('Per point, from the operator’s own metrics at the end (histogram quantiles) and the API server:');
  p();
  p(
    '| instances | reconcile p50 / p99 ms, instances | owned-objects | node-isolation-audit | reconciles by controller/result | ValidatingAdmissionPolicyBindings |',
  );
  p('| ---: | ---: | ---: | ---: | --- | ---: |');
  const quantiles = (pt: OperatorScaleResult, c: string): string =>
    pt.reconcileP50Ms[c] === undefined ? 'n/a' : `${sig(pt.reconcileP50Ms[c])} / ${sig(pt.reconcileP99Ms[c])}`;
  for (const pt of points) {
    const reconciles = Object.entries(pt.reconciles)
      .filter(([, v]) => v > 0)
      .map(([k, v]) => `${k} ${num(v)}`)
      .join(', ');
    p(
      `| ${instancesCell(pt)} | ${quantiles(pt, 'instances')} | ${quantiles(pt, 'owned-objects')} | ` +
        `${quantiles(pt, 'node-isolation-audit')} | ${reconciles} | ${num(pt.policyBindings)} |`,
    );
  }
  p();
  const withRequests = points.filter((pt) => pt.apiRequests !== undefined);
  if (withRequests.length > 0) {
    p(
      'The operator’s API requests per point (`kubeplus_operator_api_requests_total`, by method and code; watches once ' +
        'closed) and its `slow API request` log lines (a request of 10 s or more):',
    );
    p();
    p('| instances | requests by method and code | slow requests (≥ 10 s) | longest | first of them |');
    p('| ---: | --- | ---: | ---: | --- |');
    for (const pt of withRequests) {
      const requests = Object.entries(pt.apiRequests ?? {})
        .filter(([, v]) => v > 0)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${k} ${num(v)}`)
        .join(', ');
      const slow = pt.slowApiRequests;
      p(
        `| ${instancesCell(pt)} | ${requests} | ${num(slow?.count)} | ${slow && slow.count > 0 ? `${num(slow.longestMs / 1000, 1)} s` : '—'} | ` +
          `${slow?.examples.map((e) => `\`${e}\``).join('<br>') ?? ''} |`,
      );
    }
    p();
  }
  const verdicts: OperatorVerdict[] = [];
  for (const target of OPERATOR_TARGETS) {
    // The targets are for fully isolated instances: node and sandbox isolation both.
    const pt = points.find((x) => x.instances === target.instances && x.sandbox !== false);
    if (pt === undefined) continue;
    const t = pt.fullyIsolatedSeconds;
    const met = !pt.timedOut && Number.isFinite(t) ? t <= target.seconds : false;
    verdicts.push({
      target: `operator: ${num(target.instances)} instances fully isolated within ${target.seconds >= 120 ? `${target.seconds / 60} minutes` : `${target.seconds} s`}`,
      basis: 'absolute, from issue 24 (not a floor)',
      measured: pt.timedOut
        ? `not within ${num(waited(pt, timeout))} s: ${num(pt.namespacesIsolated)} namespaces / ${num(pt.runtimeClasses)} RuntimeClasses done by then`
        : `${num(t, 1)} s`,
      met,
      detail: pt.timedOut
        ? `at ${num(rate(pt, timeout), 1)} instances/s, ${num(pt.instances)} take ~${num(pt.instances / Math.max(1e-9, rate(pt, timeout)), 0)} s`
        : met
          ? `${num(target.seconds - t, 1)} s to spare`
          : `by ${num(t - target.seconds, 1)} s`,
    });
  }
  return { lines, verdicts };
}

/** The instances column: the count, and "node isolation only" for a point without sandbox isolation. */
function instancesCell(pt: OperatorScaleResult): string {
  return pt.sandbox === false ? `${num(pt.instances)} (node isolation only)` : num(pt.instances);
}

/** Instances fully isolated by the end of a point that timed out. */
function doneCount(pt: OperatorScaleResult): number {
  return pt.sandbox === false ? pt.namespacesIsolated : Math.min(pt.namespacesIsolated, pt.runtimeClasses);
}
