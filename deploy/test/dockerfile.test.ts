/**
 * The services' Dockerfiles, checked without a container engine: pinned Node 24 base (the same
 * version the toolchain bootstraps), a distroless runtime of the same Debian release, the
 * runtime user 65532, no RUN in the runtime stage (nothing to execute a shell with), an entry
 * point that is the package's built `main`, the ports the chart and the services agree on, and a
 * .dockerignore that keeps local builds, dependencies and git metadata out of the context.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { load } from 'js-yaml';
import { parseDockerfile, resolve } from './dockerfile.js';
import { CHART_DIR, REPO_ROOT } from './helm.js';

const NODE_VERSION = /^NODE_VERSION=(\S+)$/m.exec(
  readFileSync(join(REPO_ROOT, 'scripts', 'ensure-node.sh'), 'utf8'),
)?.[1];
const PNPM_VERSION = (
  JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { packageManager: string }
).packageManager.replace(/^pnpm@/, '');

const SERVICES = [
  { service: 'webhook', ports: () => webhookPorts() },
  { service: 'operator', ports: () => operatorPorts() },
] as const;

function chartValues(sub: string): Record<string, unknown> {
  return load(readFileSync(join(CHART_DIR, 'charts', sub, 'values.yaml'), 'utf8')) as Record<string, unknown>;
}

function webhookPorts(): number[] {
  const v = chartValues('webhook') as { containerPort: number; metrics: { port: number } };
  return [v.containerPort, v.metrics.port];
}

function operatorPorts(): number[] {
  const v = chartValues('operator') as { metrics: { port: number } };
  return [v.metrics.port];
}

describe.each(SERVICES)('services/$service/Dockerfile', ({ service, ports }) => {
  const dir = join(REPO_ROOT, 'services', service);
  const dockerfile = parseDockerfile(readFileSync(join(dir, 'Dockerfile'), 'utf8'));
  const [build, runtime] = dockerfile.stages;
  const runtimeOps = (op: string) => (runtime?.instructions ?? []).filter((i) => i.op === op).map((i) => i.args);

  test('two stages: a build stage on the pinned Node 24 image, a distroless runtime of the same Debian', () => {
    expect(dockerfile.stages).toHaveLength(2);
    expect(NODE_VERSION).toMatch(/^24\.\d+\.\d+$/);
    expect(resolve(build?.from ?? '', dockerfile.args)).toBe(`node:${NODE_VERSION}-bookworm-slim`);
    expect(build?.name).toBe('build');
    // bookworm is Debian 12; the runtime must be the same release (glibc/libstdc++ of the node binary).
    expect(resolve(runtime?.from ?? '', dockerfile.args)).toMatch(
      /^gcr\.io\/distroless\/cc-debian12(:nonroot|@sha256:[a-f0-9]{64})$/,
    );
    expect(build?.instructions.find((i) => i.op === 'ARG' && i.args.startsWith('PNPM_VERSION='))?.args).toBe(
      `PNPM_VERSION=${PNPM_VERSION}`,
    );
  });

  test('only production dependencies ship: the payload comes from build-payload.sh (pnpm deploy --prod)', () => {
    const runs = (build?.instructions ?? []).filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs.some((r) => r.includes(`deploy/image/build-payload.sh ${service} /out`))).toBe(true);
    expect(readFileSync(join(REPO_ROOT, 'deploy', 'image', 'build-payload.sh'), 'utf8')).toMatch(/deploy --prod/);
    expect(runtimeOps('COPY')).toEqual([
      '--from=build /usr/local/bin/node /usr/local/bin/node',
      '--from=build --chown=0:0 /out /app',
    ]);
  });

  test('runs as 65532 with nothing to run a shell with, the package main as entry point', () => {
    expect(runtimeOps('USER')).toEqual(['65532:65532']);
    expect(runtimeOps('RUN')).toEqual([]);
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { main: string };
    expect(pkg.main).toBe('./dist/main.js');
    const [entrypoint] = runtimeOps('ENTRYPOINT');
    expect(JSON.parse(entrypoint as string)).toEqual(['/usr/local/bin/node', `/app/${pkg.main.replace(/^\.\//, '')}`]);
    expect(runtimeOps('CMD')).toEqual([]);
    // dist/main.js is what tsc makes of src/main.ts (rootDir src, outDir dist).
    const tsconfig = JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: { rootDir: string; outDir: string };
    };
    expect(tsconfig.compilerOptions).toEqual(expect.objectContaining({ rootDir: 'src', outDir: 'dist' }));
    expect(existsSync(join(dir, 'src', 'main.ts'))).toBe(true);
  });

  test('EXPOSE matches the ports the chart configures', () => {
    expect(
      runtimeOps('EXPOSE')
        .flatMap((e) => e.split(/\s+/))
        .map(Number),
    ).toEqual(ports());
  });
});

describe('.dockerignore', () => {
  const patterns = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));

  test('keeps dependencies, build output, generated sources, toolchains, git metadata and keys out of the context', () => {
    for (const p of [
      '**/node_modules',
      '**/dist',
      '**/src/generated',
      '.git',
      '.tools',
      '**/*.tsbuildinfo',
      '**/*.pem',
      '**/*.key',
    ]) {
      expect(patterns).toContain(p);
    }
  });

  test('keeps in what the build needs: workspace manifests and the payload script', () => {
    expect(patterns).toEqual(
      expect.arrayContaining(['!deploy/package.json', '!e2e/package.json', '!deploy/image/build-payload.sh']),
    );
    for (const p of patterns)
      expect(p).not.toMatch(/^(packages|services|pnpm-lock\.yaml|pnpm-workspace\.yaml|package\.json|tsconfig)/);
  });
});
