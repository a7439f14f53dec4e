/**
 * What the webhook's resident memory is made of before it holds any data: a fresh Node.js
 * process (the same binary) imports the webhook's dependencies one after the other — then the
 * webhook's own modules (dist/webhook.js, which imports everything main.js runs, without
 * starting) — and reports RSS and V8 heap after a full GC at each step. Median of `runs`.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@kubeplus-isolation/e2e';
import { median } from './stats.js';

export interface FootprintStep {
  step: string;
  rssMiB: number;
  heapUsedMiB: number;
}

const STEPS: readonly [string, string][] = [
  ['Node.js alone', ''],
  ['+ express', 'express'],
  ['+ winston', 'winston'],
  ['+ prom-client', 'prom-client'],
  ['+ fast-json-patch', 'fast-json-patch'],
  // Only with --kubeconfig (the webhook reads the file with it); in a cluster it is never loaded.
  ['+ js-yaml (kubeconfig only)', 'js-yaml'],
  ['+ the webhook’s own modules (dist/webhook.js)', './dist/webhook.js'],
];

function script(): string {
  const lines = [
    'const out = [];',
    'const MiB = 1024 * 1024;',
    'const snap = (step) => { globalThis.gc(); globalThis.gc(); const m = process.memoryUsage(); out.push({ step, rssMiB: m.rss / MiB, heapUsedMiB: m.heapUsed / MiB }); };',
  ];
  for (const [step, specifier] of STEPS) {
    if (specifier) lines.push(`await import(${JSON.stringify(specifier)});`);
    lines.push(`snap(${JSON.stringify(step)});`);
  }
  lines.push('process.stdout.write(JSON.stringify(out));');
  return lines.join('\n');
}

export function webhookFootprint(runs = 3): FootprintStep[] {
  const all: FootprintStep[][] = [];
  for (let i = 0; i < runs; i++) {
    const stdout = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script()], {
      cwd: join(repoRoot(), 'services', 'webhook'),
      encoding: 'utf8',
    });
    all.push(JSON.parse(stdout) as FootprintStep[]);
  }
  return STEPS.map(([step], i) => ({
    step,
    rssMiB: median(all.map((r) => r[i]?.rssMiB ?? Number.NaN)),
    heapUsedMiB: median(all.map((r) => r[i]?.heapUsedMiB ?? Number.NaN)),
  }));
}
