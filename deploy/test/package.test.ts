/**
 * `make package` (deploy/package.sh): the chart archive a user installs, named after the one
 * version (VERSION), with maintainers and sources in its Chart.yaml and the image references
 * filled in from IMAGE_REGISTRY at that version, so that installing the archive pulls exactly the
 * images `make images` tagged alike (the image archives themselves are checked by
 * image-archive.test.ts). An IMAGE_TAG or VERSION other than the tree's is refused (issue 39:
 * `IMAGE_TAG=0.2.0` used to write kubeplus-isolation-0.1.0.tgz).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, test } from '@jest/globals';
import { load, loadAll } from 'js-yaml';
import { readVersion } from '../../scripts/release/release.js';
import { findHelm, type K8sObject, REPO_ROOT } from './helm.js';

const REGISTRY = 'registry.test/kpi';
const TAG = readVersion(REPO_ROOT);
let archive = '';

/** The environment package.sh runs in: no VERSION or IMAGE_TAG of the caller's. */
function packageEnv(extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    HELM: findHelm(),
    IMAGE_REGISTRY: REGISTRY,
    PACKAGE_CHART_ONLY: '1',
  };
  delete env.VERSION;
  delete env.IMAGE_TAG;
  return { ...env, ...extra };
}

beforeAll(() => {
  const out = mkdtempSync(join(tmpdir(), 'kpi-package-test-'));
  const stdout = execFileSync(join(REPO_ROOT, 'deploy', 'package.sh'), {
    env: packageEnv({ IMAGE_TAG: TAG, PACKAGE_OUT_DIR: out }),
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  archive = stdout.trim().split('\n').at(-1) ?? '';
}, 120_000);

describe('make package: one version', () => {
  test.each([
    ['IMAGE_TAG', { IMAGE_TAG: '99.0.0' }],
    ['VERSION', { VERSION: '99.0.0' }],
  ])('%s other than the VERSION file is refused, saying to release it first; nothing is written', (_, extra) => {
    const out = mkdtempSync(join(tmpdir(), 'kpi-package-refused-'));
    const r = spawnSync(join(REPO_ROOT, 'deploy', 'package.sh'), {
      env: packageEnv({ ...extra, PACKAGE_OUT_DIR: out }),
      encoding: 'utf8',
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(`is not the version of this tree (${TAG}, the VERSION file)`);
    expect(r.stderr).toContain('make release VERSION=99.0.0');
    expect(readdirSync(out)).toEqual([]);
  });
});

describe('make package: the chart archive', () => {
  test('is a helm package of the umbrella chart named after VERSION, with maintainers, sources and VERSION as appVersion', () => {
    expect(archive).toMatch(new RegExp(`/kubeplus-isolation-${TAG.replace(/\./g, '\\.')}\\.tgz$`));
    const chart = load(execFileSync(findHelm(), ['show', 'chart', archive], { encoding: 'utf8' })) as {
      name: string;
      version: string;
      appVersion: string;
      maintainers?: { name: string }[];
      sources?: string[];
    };
    expect(chart.name).toBe('kubeplus-isolation');
    expect(chart.version).toBe(TAG);
    expect(chart.appVersion).toBe(TAG);
    expect(chart.maintainers?.length).toBeGreaterThan(0);
    expect(chart.sources?.length).toBeGreaterThan(0);
  });

  test('installs the images IMAGE_REGISTRY names, at VERSION', () => {
    const rendered = execFileSync(
      findHelm(),
      [
        'template',
        'kpi',
        archive,
        '--namespace',
        'kubeplus-system',
        '--set-json',
        'operator.instanceGroups=[{"group":"cloudark.io","resources":["agents"]}]',
      ],
      { encoding: 'utf8', env: { ...process.env, KUBECONFIG: '/dev/null' } },
    );
    const images = (loadAll(rendered) as (K8sObject | null)[])
      .filter((o): o is K8sObject => o?.kind === 'Deployment')
      .flatMap((d) => (d.spec as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers)
      .map((c) => c.image)
      .sort();
    expect(images).toEqual([
      `${REGISTRY}/kubeplus-isolation-operator:${TAG}`,
      `${REGISTRY}/kubeplus-isolation-webhook:${TAG}`,
    ]);
  });
});

/** The environment without KUBEPLUS_ISOLATION_ASSETS: crane is built into the cache, as build-images.sh does. */
function withoutAssets(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.KUBEPLUS_ISOLATION_ASSETS;
  return env;
}

describe('make package: the images, their SBOMs and the checksums to verify them by', () => {
  let images = '';
  beforeAll(() => {
    const out = mkdtempSync(join(tmpdir(), 'kpi-package-images-test-'));
    execFileSync(join(REPO_ROOT, 'deploy', 'package.sh'), {
      env: { ...packageEnv({ PACKAGE_OUT_DIR: out }), PACKAGE_CHART_ONLY: '' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    images = join(out, 'images');
  }, 600_000);

  test('SHA256SUMS covers each image index archive and each image’s SBOM, and verifies (sha256sum -c)', () => {
    const sums = readFileSync(join(images, 'SHA256SUMS'), 'utf8');
    const files = sums
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'))
      .map((l) => l.split(/\s+\*?/)[1])
      .sort();
    expect(files).toEqual(
      ['webhook', 'operator']
        .flatMap((s) => [`${s}.tar`, `${s}.linux-amd64.spdx.json`, `${s}.linux-arm64.spdx.json`])
        .sort(),
    );
    const checked = execFileSync('sha256sum', ['--strict', '-c', 'SHA256SUMS'], { cwd: images, encoding: 'utf8' });
    expect(checked.trim().split('\n').sort()).toEqual(files.map((f) => `${f}: OK`));
  });

  test('SHA256SUMS names the digests a registry reports once pushed: each index and its per-platform images', () => {
    const sums = readFileSync(join(images, 'SHA256SUMS'), 'utf8');
    for (const service of ['webhook', 'operator']) {
      const top = JSON.parse(
        execFileSync('tar', ['-xOf', join(images, `${service}.tar`), 'index.json'], { encoding: 'utf8' }),
      ).manifests[0] as { digest: string };
      expect(sums).toContain(`# ${service} index ${top.digest}\n`);
      const index = JSON.parse(
        execFileSync('tar', ['-xOf', join(images, `${service}.tar`), `blobs/${top.digest.replace(':', '/')}`], {
          encoding: 'utf8',
        }),
      ) as { manifests: { digest: string; platform: { os: string; architecture: string } }[] };
      expect(index.manifests).toHaveLength(2);
      for (const m of index.manifests)
        expect(sums).toContain(`# ${service} ${m.platform.os}/${m.platform.architecture} ${m.digest}\n`);
    }
  });

  test('pushed as the README shows (crane push of the untarred layout), the registry reports the digests SHA256SUMS names', async () => {
    const crane = join(
      execFileSync(join(REPO_ROOT, 'e2e', 'scripts', 'build-components.sh'), ['crane'], {
        encoding: 'utf8',
        env: withoutAssets(),
        stdio: ['ignore', 'pipe', 'ignore'],
      })
        .trim()
        .split('\n')
        .at(-1) ?? '',
      'crane',
    );
    // A registry on loopback, as build-images.sh uses one; stopped at the end of the test.
    const registry = spawn(crane, ['registry', 'serve', '--address', '127.0.0.1:0'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    try {
      const address = await new Promise<string>((resolvePort, reject) => {
        let log = '';
        registry.stderr.on('data', (d: Buffer) => {
          log += d.toString();
          const m = /serving on port (\d+)/.exec(log);
          if (m) resolvePort(`127.0.0.1:${m[1]}`);
        });
        registry.on('exit', () => reject(new Error(`crane registry exited: ${log}`)));
      });
      const sums = readFileSync(join(images, 'SHA256SUMS'), 'utf8');
      const expected = (what: string): string =>
        new RegExp(`^# ${what} (sha256:[0-9a-f]{64})$`, 'm').exec(sums)?.[1] ?? '';
      for (const service of ['webhook', 'operator']) {
        const layout = mkdtempSync(join(tmpdir(), `kpi-oci-${service}-`));
        execFileSync('tar', ['-xf', join(images, `${service}.tar`), '-C', layout]);
        const ref = `${address}/kubeplus-isolation-${service}:${TAG}`;
        execFileSync(crane, ['push', layout, ref], { stdio: 'ignore' });
        const digest = (...args: string[]): string =>
          execFileSync(crane, ['digest', ...args, ref], { encoding: 'utf8' }).trim();
        expect(digest()).toBe(expected(`${service} index`));
        for (const platform of ['linux/amd64', 'linux/arm64'])
          expect(digest('--platform', platform)).toBe(expected(`${service} ${platform}`));
      }
    } finally {
      registry.kill();
    }
  });
});
