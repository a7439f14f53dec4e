/**
 * operator.reports.installCrds (issue 39): the chart can install the OpenReports CRDs, so the
 * operator's compliance Reports work on a fresh cluster, as Kyverno's chart does. The CRDs are the
 * pinned Go module's (e2e/components/openreports), copied into the chart at build time by
 * deploy/chart-crds.sh (never in git); off by default, kept on uninstall.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { load } from 'js-yaml';
import { CHART_DIR, findHelm, type K8sObject, REPO_ROOT, render } from './helm.js';

jest.setTimeout(120_000);

const FILES = ['openreports.io_reports.yaml', 'openreports.io_clusterreports.yaml'];
const ON = { operator: { reports: { installCrds: true } } };
let moduleDir = '';

beforeAll(() => {
  // What `make chart-test` does first (make chart-crds); a no-op when the files are current.
  execFileSync(join(REPO_ROOT, 'deploy', 'chart-crds.sh'), { stdio: ['ignore', 'ignore', 'inherit'] });
  moduleDir =
    execFileSync(join(REPO_ROOT, 'e2e', 'scripts', 'module-crds.sh'), ['openreports'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    })
      .trim()
      .split('\n')
      .at(-1) ?? '';
});

/** The OpenReports CRDs (the chart renders its own isolation.kubeplus.io CRDs too). */
const crds = (objects: K8sObject[]) =>
  objects.filter((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name.endsWith('.openreports.io'));

describe('operator.reports.installCrds', () => {
  test('off by default: no CRD is rendered', async () => {
    expect(crds(await render())).toEqual([]);
  });

  test('on: the Report and ClusterReport CRDs of the pinned module, unmodified but for the keep policy and labels', async () => {
    const rendered = crds(await render(ON));
    expect(rendered.map((c) => c.metadata.name).sort()).toEqual([
      'clusterreports.openreports.io',
      'reports.openreports.io',
    ]);
    for (const file of FILES) {
      const upstream = load(readFileSync(join(moduleDir, file), 'utf8')) as K8sObject;
      const crd = rendered.find((c) => c.metadata.name === upstream.metadata.name) as K8sObject;
      expect(crd.spec).toEqual(upstream.spec);
      expect(crd.metadata.annotations).toEqual({
        ...upstream.metadata.annotations,
        'helm.sh/resource-policy': 'keep',
      });
      expect(crd.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('Helm');
    }
    // The version the e2e tests install: the one e2e/components/openreports pins.
    const pinned = /github\.com\/openreports\/reports-api (v\S+)/.exec(
      readFileSync(join(REPO_ROOT, 'e2e', 'components', 'openreports', 'go.mod'), 'utf8'),
    )?.[1];
    expect(
      readFileSync(join(CHART_DIR, 'charts', 'operator', 'files', 'openreports', FILES[0] as string), 'utf8'),
    ).toMatch(new RegExp(`^# github\\.com/openreports/reports-api ${pinned} `));
  });

  test('with reports off, nothing to install them for', async () => {
    expect(crds(await render({ operator: { reports: { enabled: false, installCrds: true } } }))).toEqual([]);
  });

  test('a chart without the build-time files refuses, saying how to get them', () => {
    const copy = mkdtempSync(join(tmpdir(), 'kpi-chart-nocrds-'));
    try {
      cpSync(CHART_DIR, copy, { recursive: true, filter: (src) => !src.includes(join('files', 'openreports')) });
      const r = spawnSync(
        findHelm(),
        ['template', 'kpi', copy, '-n', 'kubeplus-system', '--set', 'operator.reports.installCrds=true'],
        { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/dev/null' } },
      );
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(
        'operator.reports.installCrds: files/openreports/openreports.io_reports.yaml is not in this chart',
      );
      expect(r.stderr).toContain('make chart-crds');
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });
});
