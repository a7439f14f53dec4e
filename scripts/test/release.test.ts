/**
 * One version and one project home everywhere (scripts/release/release.ts, issue 39): every place
 * agrees with `VERSION` and `PROJECT`, and the check would see a place that drifted.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import {
  FIXED_PLACES,
  isSemver,
  PROJECT,
  places,
  readVersion,
  runbookBaseUrl,
  type Stamp,
  stampChangelog,
  trackedPackageJsons,
} from '../release/release.js';

const ROOT = join(import.meta.dirname, '..', '..');
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');
const VERSION = readVersion(ROOT);
const CURRENT: Stamp = { version: VERSION, ...PROJECT };
const ALL = places(trackedPackageJsons(ROOT));

describe('one version, one home', () => {
  test('VERSION is SemVer', () => {
    expect(isSemver(VERSION)).toBe(true);
    expect(isSemver('v1.2.3')).toBe(false);
    expect(isSemver('1.2')).toBe(false);
    expect(isSemver('1.2.3-rc.1')).toBe(true);
  });

  test('every package.json of the workspace is a place', () => {
    const files = ALL.map((p) => p.file);
    for (const pkg of [
      'package.json',
      'packages/cli/package.json',
      'packages/service/package.json',
      'services/webhook/package.json',
      'services/operator/package.json',
    ]) {
      expect(files).toContain(pkg);
    }
  });

  test.each(ALL.map((p) => [p.file, p] as const))('%s names VERSION and PROJECT', (file, place) => {
    const text = read(file);
    expect(place.stamp(text, CURRENT)).toBe(text);
  });

  test.each(ALL.filter((p) => p.names.includes('version')).map((p) => [p.file, p] as const))(
    '%s drifting from VERSION is seen (the stamp changes it)',
    (file, place) => {
      const text = read(file);
      expect(place.stamp(text, { ...CURRENT, version: '99.98.97' })).not.toBe(text);
    },
  );

  test.each(ALL.filter((p) => p.names.includes('project')).map((p) => [p.file, p] as const))(
    '%s drifting from PROJECT is seen (the stamp changes it)',
    (file, place) => {
      const text = read(file);
      const elsewhere = { ...CURRENT, home: 'https://example.test/else', imageRegistry: 'example.test/else' };
      expect(place.stamp(text, elsewhere)).not.toBe(text);
    },
  );

  test('a place that lost what it stamps fails loudly', () => {
    const chart = FIXED_PLACES.find((p) => p.file.endsWith('kubeplus-isolation/Chart.yaml'));
    expect(() => chart?.stamp('name: x\n', CURRENT)).toThrow(/matched 0 time/);
  });

  test('the umbrella depends on its subcharts at the same version', () => {
    const chart = read('deploy/kubeplus-isolation/Chart.yaml');
    expect([...chart.matchAll(/^ {4}version: (.+)$/gm)].map((m) => m[1])).toEqual([VERSION, VERSION]);
    expect(chart).toMatch(new RegExp(`^appVersion: "${VERSION}"$`, 'm'));
  });

  test('the alerts link to docs/runbooks.md of this repository at the release tag', () => {
    expect(runbookBaseUrl(CURRENT)).toBe(`${PROJECT.home}/blob/v${VERSION}/docs/runbooks.md`);
    for (const service of ['webhook', 'operator']) {
      expect(read(`deploy/kubeplus-isolation/charts/${service}/values.yaml`)).toContain(
        `runbookBaseUrl: ${runbookBaseUrl(CURRENT)}`,
      );
    }
  });

  test('nothing in the tree names the project it was copied from', () => {
    for (const place of FIXED_PLACES) expect(read(place.file)).not.toMatch(/cloud-ark/);
    for (const file of ['Makefile', 'deploy/package.sh', 'deploy/image/build-images.sh', 'e2e/src/harness/images.ts']) {
      expect(read(file)).not.toMatch(/cloud-ark/);
    }
  });

  test('CHANGELOG.md has an entry for VERSION', () => {
    expect(read('CHANGELOG.md')).toMatch(new RegExp(`^## \\[${VERSION.replace(/\./g, '\\.')}\\]`, 'm'));
  });
});

describe('stampChangelog', () => {
  const log = [
    '# Changelog',
    '',
    '## [Unreleased]',
    '',
    '### Added',
    '',
    '- a thing',
    '',
    '## [0.2.0] - 2026-12-06',
    '',
    '- before',
    '',
    '[Unreleased]: https://h/compare/v0.2.0...HEAD',
    '[0.2.0]: https://h/compare/v0.1.0...v0.2.0',
    '',
  ].join('\n');

  test("a new version takes Unreleased's content, and the compare links follow", () => {
    const out = stampChangelog(log, '0.3.0', '2027-01-02');
    expect(out).toContain('## [Unreleased]\n\n## [0.3.0] - 2027-01-02\n\n### Added\n\n- a thing\n\n## [0.2.0]');
    expect(out).toContain(
      '[Unreleased]: https://h/compare/v0.3.0...HEAD\n[0.3.0]: https://h/compare/v0.2.0...v0.3.0\n',
    );
  });

  test('a version with an entry is left as it is', () => {
    expect(stampChangelog(log, '0.2.0', '2027-01-02')).toBe(log);
  });

  test('no Unreleased section: refused', () => {
    expect(() => stampChangelog('# Changelog\n', '0.3.0', '2027-01-02')).toThrow(/Unreleased/);
  });
});
