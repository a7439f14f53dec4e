import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from '@jest/globals';
import { loadConfig } from '../src/config.js';
import { renderReport } from '../src/report.js';
import type { BenchResults } from '../src/results.js';

function results(): BenchResults {
  const snap: BenchResults['loadStart'] = { at: 't', loadAverage: [1, 1, 1], otherProcesses: {}, busiest: [] };
  return {
    startedAt: 's',
    finishedAt: 'f',
    durationSeconds: 60,
    config: { ...loadConfig(), sections: ['patch' as const], rounds: 3 },
    machine: { nproc: 2, cpuModel: 'cpu', memoryGiB: 1, kernel: 'k', node: 'v24' } as BenchResults['machine'],
    versions: { commit: 'aaa' },
    loadStart: snap,
    pinned: false,
    errors: {},
  };
}

describe('notes kept by hand (bench/notes.md)', () => {
  test('are copied verbatim after the verdicts, under their own heading', () => {
    const notes = '### An investigation\n\nfully isolated after **13.7 s** (`make bench` at `d6789ad`)\n';
    const report = renderReport(results(), [], notes);
    const heading = report.indexOf('## Notes kept by hand');
    expect(heading).toBeGreaterThan(report.indexOf('## Verdicts'));
    expect(report.slice(heading)).toContain(notes.trim());
  });

  test('no notes, no heading', () => {
    expect(renderReport(results(), [])).not.toContain('Notes kept by hand');
    expect(renderReport(results(), [], '  \n')).not.toContain('Notes kept by hand');
  });

  test("the repository's notes hold the operator measurements its README points to", () => {
    const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
    const notes = readFileSync(join(root, 'bench', 'notes.md'), 'utf8');
    const readme = readFileSync(join(root, 'services', 'operator', 'README.md'), 'utf8');
    // The README names these headings of the notes; each must exist there.
    for (const name of ['Operator memory', 'Sandbox policy layouts, measured']) {
      expect(readme).toContain(name);
      expect(notes).toMatch(new RegExp(`^### ${name}`, 'm'));
    }
  });
});
