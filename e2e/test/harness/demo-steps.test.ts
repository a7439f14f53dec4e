/**
 * The demo's steps, one file each (e2e/src/demo/steps, e2e/DEMO.md "Code"): every file is in the
 * lists the demo runs, in the order of the file names, and a file's prefix is its step's number.
 */
import { readdirSync } from 'node:fs';
import { expect, test } from '@jest/globals';
import type { DemoStep } from '../../src/demo/scenario.js';
import { DEMO_STEPS, SETUP_STEPS } from '../../src/demo/steps/index.js';

const DIR = new URL('../../src/demo/steps/', import.meta.url);

/** `s1-control-plane.ts` → `S1`, `09g-gvisor-tenant.ts` → `9g`, `13-delete-team-a.ts` → `13`. */
function idOf(file: string): string {
  const prefix = file.split('-')[0] ?? '';
  return prefix.startsWith('s') ? prefix.toUpperCase() : prefix.replace(/^0/, '');
}

async function stepsByFile(): Promise<Array<{ file: string; steps: DemoStep[] }>> {
  const files = readdirSync(DIR)
    .filter((f) => f.endsWith('.ts') && f !== 'index.ts')
    .sort();
  return Promise.all(
    files.map(async (file) => ({
      file,
      steps: Object.values((await import(new URL(file, DIR).pathname)) as Record<string, DemoStep>),
    })),
  );
}

test('each file holds one step, numbered as its name says', async () => {
  for (const { file, steps } of await stepsByFile()) {
    expect({ file, ids: steps.map((s) => s.id) }).toEqual({ file, ids: [idOf(file)] });
  }
});

test('the demo runs every file, setup first, then the design documents’ steps in file-name order', async () => {
  const files = await stepsByFile();
  const setup = files.filter(({ file }) => file.startsWith('s'));
  const demo = files.filter(({ file }) => !file.startsWith('s'));
  expect(SETUP_STEPS).toEqual(setup.flatMap(({ steps }) => steps));
  expect(DEMO_STEPS).toEqual(demo.flatMap(({ steps }) => steps));
});

test('where two steps share a number (S4), exactly one of them runs in each mode', () => {
  const s4 = SETUP_STEPS.filter((s) => s.id === 'S4');
  expect(s4).toHaveLength(2);
  for (const realNode of [true, false]) {
    const demo = { realNode } as Parameters<NonNullable<DemoStep['when']>>[0];
    expect(s4.filter((s) => s.when?.(demo) ?? true)).toHaveLength(1);
  }
});
