/**
 * The standalone CLI (packages/cli/bundle/pack.ts, `make cli-package`): packed once, then installed
 * and run where only Node.js is: an empty temporary directory outside the repository, a PATH of
 * node (and npm, which ships with it) and the system's /usr/bin:/bin, a fresh HOME and npm cache,
 * npm offline — so nothing can come from the workspace, pnpm or a registry.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, jest, test } from '@jest/globals';
import { loadYaml } from '@kubernetes/client-node';
import { BUNDLE, KREW_NAME, type Packed, pack, releaseVersion, tarballName } from '../bundle/pack.js';

jest.setTimeout(120_000);

const work = mkdtempSync(join(tmpdir(), 'kpi-cli-standalone-'));
let packed: Packed;

/** npm's own script (npm-cli.js), found on PATH outside the workspace's node_modules. */
function npmCli(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir.includes('node_modules')) continue;
    const npm = join(dir, 'npm');
    if (existsSync(npm)) return realpathSync(npm);
  }
  throw new Error('npm not found on PATH (it ships with Node.js)');
}

/** An environment with nothing but Node.js and npm: node, npm and npx in bin/, then /usr/bin:/bin. */
function bareEnv(): { env: NodeJS.ProcessEnv; cwd: string; prefix: string } {
  const root = mkdtempSync(join(work, 'bare-'));
  const bin = join(root, 'node-bin');
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, 'node'));
  const cli = npmCli();
  for (const [name, script] of [
    ['npm', cli],
    ['npx', join(dirname(cli), 'npx-cli.js')],
  ] as const) {
    writeFileSync(join(bin, name), `#!/bin/sh\nexec "${process.execPath}" "${script}" "$@"\n`, { mode: 0o755 });
  }
  const cwd = join(root, 'empty');
  mkdirSync(cwd);
  const prefix = join(root, 'prefix');
  return {
    cwd,
    prefix,
    env: {
      PATH: [join(prefix, 'bin'), bin, '/usr/bin', '/bin'].join(delimiter),
      HOME: join(root, 'home'),
      npm_config_cache: join(root, 'npm-cache'),
      npm_config_offline: 'true',
      npm_config_update_notifier: 'false',
      npm_config_fund: 'false',
      npm_config_audit: 'false',
    },
  };
}

function run(cmd: string, args: string[], where: { env: NodeJS.ProcessEnv; cwd: string }) {
  const r = spawnSync(cmd, args, { ...where, encoding: 'utf8' });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const VALID = `apiVersion: platformapi.kubeplus/v1alpha1
kind: WordpressService
metadata:
  name: tenant-a
  annotations:
    kubeplus.io/node-isolation: '{"nodeSelector":{"pool":"tenant-a"}}'
`;
const INVALID = VALID.replace('{"nodeSelector":{"pool":"tenant-a"}}', '{"nodeSelector":{"pool":7}}');

beforeAll(async () => {
  packed = await pack(join(work, 'out'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('the packed CLI', () => {
  test("is one tarball named and versioned by the release (the chart's version), with no dependencies", () => {
    expect(packed.version).toBe(releaseVersion());
    expect(packed.tarball).toBe(join(work, 'out', tarballName(packed.version)));
    const listing = execFileSync('tar', ['-tzf', packed.tarball], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .sort();
    expect(listing).toEqual(
      expect.arrayContaining([
        'package/package.json',
        `package/${BUNDLE}`,
        'package/README.md',
        'package/THIRD-PARTY-NOTICES.md',
      ]),
    );
    expect(listing.filter((f) => f.includes('node_modules'))).toEqual([]);
    const pkg = JSON.parse(
      execFileSync('tar', ['-xzOf', packed.tarball, 'package/package.json'], { encoding: 'utf8' }),
    );
    expect(pkg).toMatchObject({
      version: packed.version,
      bin: { 'kubeplus-isolation': BUNDLE, 'kubectl-kubeplus_isolation': BUNDLE },
    });
    expect(pkg.dependencies).toBeUndefined();
    // The bundled client's licence is among the notices.
    expect(
      execFileSync('tar', ['-xzOf', packed.tarball, 'package/THIRD-PARTY-NOTICES.md'], { encoding: 'utf8' }),
    ).toMatch(/^## @kubernetes\/client-node \S+ \(Apache-2\.0\)$/m);
  });

  test('installs with `npm install -g` from the tarball, offline, where there is only Node.js, and runs --version and validate', () => {
    const bare = bareEnv();
    const install = run('npm', ['install', '-g', '--prefix', bare.prefix, packed.tarball], bare);
    expect(install).toMatchObject({ status: 0 });
    expect(run('kubeplus-isolation', ['--version'], bare)).toEqual({
      status: 0,
      stdout: `kubeplus-isolation ${packed.version}\n`,
      stderr: '',
    });
    writeFileSync(join(bare.cwd, 'valid.yaml'), VALID);
    writeFileSync(join(bare.cwd, 'invalid.yaml'), INVALID);
    const ok = run('kubeplus-isolation', ['validate', 'valid.yaml', '-o', 'json'], bare);
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ valid: true });
    // The kubectl plugin's executable is the same program.
    const bad = run('kubectl-kubeplus_isolation', ['validate', 'invalid.yaml'], bare);
    expect(bad.status).toBe(1);
    expect(bad.stdout).toMatch(/invalid\.yaml:1 .*\n.*kubeplus\.io\/node-isolation is invalid/);
    expect(bad.stdout).toContain('nodeSelector.pool must be a label value');
  });

  test('runs with `npx file:<tarball>` (and `npx --package <tarball> kubeplus-isolation`) in an empty directory, offline', () => {
    const bare = bareEnv();
    writeFileSync(join(bare.cwd, 'invalid.yaml'), INVALID);
    // A bare path is taken for a command to run; file: makes it a package spec.
    const version = run('npx', ['--yes', `file:${packed.tarball}`, '--version'], bare);
    expect(version).toEqual({ status: 0, stdout: `kubeplus-isolation ${packed.version}\n`, stderr: '' });
    const bad = run(
      'npx',
      ['--yes', '--package', packed.tarball, 'kubeplus-isolation', 'validate', 'invalid.yaml'],
      bare,
    );
    expect(bad.status).toBe(1);
    expect(bad.stdout).toContain('INVALID: 1 file(s)');
  });

  test('has a krew plugin manifest naming that very tarball by its sha256, whose bin krew links as kubectl-kubeplus_isolation', () => {
    const manifest = loadYaml(readFileSync(packed.krew, 'utf8')) as {
      apiVersion: string;
      kind: string;
      metadata: { name: string };
      spec: {
        version: string;
        platforms: { uri: string; sha256: string; bin: string; files: { from: string; to: string }[] }[];
      };
    };
    expect(manifest).toMatchObject({
      apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
      kind: 'Plugin',
      metadata: { name: KREW_NAME },
      spec: { version: `v${packed.version}` },
    });
    const [platform] = manifest.spec.platforms;
    if (platform === undefined) throw new Error('no platform');
    expect(platform.sha256).toBe(createHash('sha256').update(readFileSync(packed.tarball)).digest('hex'));
    expect(platform.uri.endsWith(`/${tarballName(packed.version)}`)).toBe(true);
    // What krew does: unpack, copy `files`, link kubectl-<name, - as _> to `bin`; then kubectl execs it.
    const bare = bareEnv();
    const unpacked = join(bare.cwd, 'archive');
    const installed = join(bare.cwd, 'plugin');
    mkdirSync(unpacked);
    mkdirSync(installed);
    execFileSync('tar', ['-xzf', packed.tarball, '-C', unpacked]);
    for (const f of platform.files) execFileSync('cp', [join(unpacked, f.from), join(installed, f.to)]);
    const link = join(bare.cwd, `kubectl-${KREW_NAME.replaceAll('-', '_')}`);
    symlinkSync(join(installed, platform.bin), link);
    expect(run(link, ['--version'], bare)).toMatchObject({
      status: 0,
      stdout: `kubeplus-isolation ${packed.version}\n`,
    });
  });
});
