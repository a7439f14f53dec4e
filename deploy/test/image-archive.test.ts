/**
 * The image archives `make images` builds without a container engine
 * (deploy/image/build-images.sh), checked against their Dockerfiles' final stage — user,
 * entry point, environment, working directory, exposed ports, labels — and by what they hold:
 * the C runtime and the pinned node binary in the base layer, the service's payload as /app,
 * the nonroot user. Finally the image's own dynamic loader and libraries run the image's node on
 * the image's /app (`--version`): the archive is a working image, not just a well-formed one.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import { parseDockerfile, resolve, type Stage } from './dockerfile.js';
import { CHART_DIR, REPO_ROOT } from './helm.js';

// A first build on a machine fetches Debian packages and node from npm and builds crane.
jest.setTimeout(600_000);

const SERVICES = ['webhook', 'operator'] as const;
const REGISTRY = 'registry.test/kpi';
const TAG = /^appVersion:\s*"?([^"\n]+)"?$/m.exec(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8'))?.[1];

interface ImageConfig {
  architecture: string;
  os: string;
  config: {
    User?: string;
    Entrypoint?: string[];
    Env?: string[];
    WorkingDir?: string;
    ExposedPorts?: Record<string, object>;
    Labels?: Record<string, string>;
  };
  rootfs: { diff_ids: string[] };
}

interface Archive {
  manifest: { Config: string; RepoTags: string[]; Layers: string[] };
  config: ImageConfig;
  /** Each layer extracted into its own directory, in order. */
  layers: string[];
}

const work = mkdtempSync(join(tmpdir(), 'kpi-images-test-'));
const archives = new Map<string, Archive>();

function finalStage(service: string): { stage: Stage; args: Record<string, string> } {
  const df = parseDockerfile(readFileSync(join(REPO_ROOT, 'services', service, 'Dockerfile'), 'utf8'));
  const stage = df.stages.at(-1);
  if (stage === undefined) throw new Error(`no stage in ${service}'s Dockerfile`);
  return { stage, args: df.args };
}

function values(stage: Stage, op: string): string[] {
  return stage.instructions.filter((i) => i.op === op).map((i) => i.args);
}

/** `K=V K2="v 2"` → [K=V, K2=v 2]. */
function pairs(text: string): string[] {
  return [...text.matchAll(/([A-Za-z0-9_.-]+)=("([^"]*)"|\S+)/g)].map((m) => `${m[1]}=${m[3] ?? m[2]}`);
}

beforeAll(() => {
  const out = join(work, 'images');
  execFileSync(join(REPO_ROOT, 'deploy', 'image', 'build-images.sh'), [...SERVICES], {
    env: { ...process.env, IMAGE_OUT_DIR: out, IMAGE_REGISTRY: REGISTRY },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  for (const service of SERVICES) {
    const dir = join(work, service);
    mkdirSync(dir);
    execFileSync('tar', ['-xf', join(out, `${service}.tar`), '-C', dir]);
    const [manifest] = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as Archive['manifest'][];
    if (manifest === undefined) throw new Error(`${service}.tar has an empty manifest.json`);
    const config = JSON.parse(readFileSync(join(dir, manifest.Config), 'utf8')) as ImageConfig;
    const layers = manifest.Layers.map((layer, i) => {
      const target = join(dir, `layer-${i}`);
      mkdirSync(target);
      execFileSync('tar', ['-xzf', join(dir, layer), '-C', target]);
      return target;
    });
    archives.set(service, { manifest, config, layers });
  }
}, 600_000);

describe.each(SERVICES)('the %s image archive', (service) => {
  const archive = (): Archive => {
    const a = archives.get(service);
    if (a === undefined) throw new Error(`no archive for ${service}`);
    return a;
  };

  test('is named and tagged as the chart expects (IMAGE_REGISTRY/kubeplus-isolation-<service>:appVersion), linux/amd64', () => {
    expect(archive().manifest.RepoTags).toEqual([`${REGISTRY}/kubeplus-isolation-${service}:${TAG}`]);
    expect(archive().config).toMatchObject({ os: 'linux', architecture: 'amd64' });
  });

  test('has the config of its Dockerfile: user, entry point, working directory, environment, ports, labels', () => {
    const { stage, args } = finalStage(service);
    const c = archive().config.config;
    expect(c.User).toBe(values(stage, 'USER').at(-1));
    expect(c.Entrypoint).toEqual(JSON.parse(values(stage, 'ENTRYPOINT').at(-1) ?? '[]'));
    expect(c.WorkingDir).toBe(values(stage, 'WORKDIR').at(-1));
    const env = values(stage, 'ENV').flatMap((v) => pairs(resolve(v, args)));
    expect(env.length).toBeGreaterThan(0);
    for (const kv of env) expect(c.Env).toContain(kv);
    const ports = values(stage, 'EXPOSE')
      .flatMap((v) => v.split(/\s+/))
      .map((p) => (p.includes('/') ? p : `${p}/tcp`));
    expect(Object.keys(c.ExposedPorts ?? {}).sort()).toEqual(ports.sort());
    for (const kv of values(stage, 'LABEL').flatMap(pairs)) {
      const [k, ...v] = kv.split('=');
      expect(c.Labels?.[k as string]).toBe(v.join('='));
    }
    expect(c.Labels?.['org.opencontainers.image.version']).toBe(TAG);
  });

  test('holds a distroless-equivalent base (C runtime, pinned node, nonroot user) and the payload as /app, root-owned', () => {
    const [base, app] = archive().layers;
    if (base === undefined || app === undefined) throw new Error('expected two layers');
    expect(archive().layers).toHaveLength(2);
    for (const file of [
      'lib/x86_64-linux-gnu/libc.so.6',
      'usr/lib/x86_64-linux-gnu/libstdc++.so.6',
      'usr/local/bin/node',
    ])
      expect(() => readFileSync(join(base, file))).not.toThrow();
    expect(readFileSync(join(base, 'etc/passwd'), 'utf8')).toContain('nonroot:x:65532:65532:');
    const main = JSON.parse(readFileSync(join(REPO_ROOT, 'services', service, 'package.json'), 'utf8')).main as string;
    expect(() => readFileSync(join(app, 'app', main))).not.toThrow();
    // No shell and no package manager, as in distroless.
    for (const absent of ['bin/sh', 'bin/bash', 'usr/bin/apt-get', 'usr/bin/dpkg'])
      expect(() => readFileSync(join(base, absent))).toThrow();
    const listing = execFileSync('tar', ['-tvzf', join(work, service, archive().manifest.Layers[1] as string)], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    });
    expect(listing.split('\n').filter((l) => l !== '' && !/ root\/root | 0\/0 /.test(l))).toEqual([]);
  });

  test("runs: the image's own loader and C runtime start the image's node on /app (--version)", () => {
    const [base, app] = archive().layers as [string, string];
    const libs = [join(base, 'lib/x86_64-linux-gnu'), join(base, 'usr/lib/x86_64-linux-gnu')].join(':');
    const main = JSON.parse(readFileSync(join(REPO_ROOT, 'services', service, 'package.json'), 'utf8')).main as string;
    const out = execFileSync(
      join(base, 'lib64/ld-linux-x86-64.so.2'),
      ['--library-path', libs, join(base, 'usr/local/bin/node'), join(app, 'app', main), '--version'],
      { encoding: 'utf8', env: { PATH: '/nonexistent' } },
    );
    expect(out).toMatch(/^kubeplus-(node-isolation-webhook|isolation-operator) \d+\.\d+\.\d+\n$/);
  });
});
