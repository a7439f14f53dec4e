/**
 * Which distribution the images' Debian packages really come from, read from the apt sources the
 * build used (scripts/debian-download.sh writes apt's own answers next to the .deb files):
 *   apt-policy.txt      `apt-cache policy`: every package index and its Release file's fields
 *                       (`release v=12.15,o=Debian,a=oldstable,n=bookworm,...`);
 *   apt-candidates.txt  `apt-cache policy <package>...`: each package's candidate version (what
 *                       `apt-get download` fetches) and the package indexes that offer it.
 * `candidates` joins them (pure): per package, its version and the Release it came from;
 * `distroOf` decides the distribution from those Releases, or refuses when they are not one
 * Debian release or not the one the Dockerfile's runtime image names (`cc-debian12`).
 *
 * deploy/image/build-images.sh uses it twice: `versions` (the base layer's cache key holds each
 * package's candidate version, so a security update makes a new base: `versions`, `cache-key`)
 * and `os-release` (the base's /etc/os-release, from which scanners and deploy/image/sbom.ts take
 * the distro):
 *   node deploy/image/apt-source.ts versions <dir>
 *   node deploy/image/apt-source.ts cache-key <dir> <word>...
 *   node deploy/image/apt-source.ts os-release <dir> <expected, e.g. debian-12>
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

/** The fields of a Release file apt prints as `release v=…,o=…,a=…,n=…,l=…,c=…,b=…`. */
export interface Release {
  /** Origin (o=), e.g. Debian. */
  origin: string;
  /** Version (v=), e.g. 12.15, 12-updates, 12. */
  version: string;
  /** Codename (n=), e.g. bookworm, bookworm-security. */
  codename: string;
  /** Suite / archive (a=), e.g. oldstable-security. */
  suite: string;
  /** Label (l=). */
  label: string;
}

export interface Candidate {
  package: string;
  version: string;
  /** The package index line, e.g. `http://deb.debian.org/debian bookworm/main arm64 Packages`. */
  index: string;
  release: Release;
}

export interface Distro {
  /** os-release ID: debian. */
  id: string;
  /** os-release VERSION_ID: 12. */
  versionId: string;
  /** os-release VERSION_CODENAME: bookworm. */
  codename: string;
}

/** `apt-cache policy` (no package): package index line → its Release fields. */
export function releasesByIndex(policy: string): Map<string, Release> {
  const out = new Map<string, Release>();
  let index: string | undefined;
  for (const line of policy.split('\n')) {
    const source = /^\s*-?\d+\s+(\S+:\/\/.*\S)\s*$/.exec(line);
    if (source?.[1] !== undefined) {
      index = source[1];
      continue;
    }
    const release = /^\s+release\s+(.*\S)\s*$/.exec(line);
    if (release?.[1] !== undefined && index !== undefined) {
      const f = Object.fromEntries(
        release[1].split(',').map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      );
      out.set(index, {
        origin: f.o ?? '',
        version: f.v ?? '',
        codename: f.n ?? '',
        suite: f.a ?? '',
        label: f.l ?? '',
      });
      index = undefined;
    }
  }
  return out;
}

/**
 * `apt-cache policy <package>...` joined with the Releases: each package's candidate, from the
 * first index offering it (apt's own order, highest priority first). Throws for a package with no
 * candidate or whose index has no Release.
 */
export function candidates(policy: string, packagesPolicy: string): Candidate[] {
  const releases = releasesByIndex(policy);
  const out: Candidate[] = [];
  let pkg: string | undefined;
  let candidate: string | undefined;
  let inCandidate = false;
  const done = new Set<string>();
  for (const line of packagesPolicy.split('\n')) {
    const head = /^(\S+):$/.exec(line);
    if (head?.[1] !== undefined) {
      pkg = head[1];
      candidate = undefined;
      inCandidate = false;
      continue;
    }
    const cand = /^\s+Candidate:\s*(\S+)/.exec(line);
    if (cand?.[1] !== undefined) {
      if (cand[1] === '(none)') throw new Error(`apt has no candidate for ${pkg}: no configured source offers it`);
      candidate = cand[1];
      continue;
    }
    const version = /^\s+(?:\*\*\*\s+)?(\S+)\s+-?\d+\s*$/.exec(line);
    if (version?.[1] !== undefined) {
      inCandidate = version[1] === candidate;
      continue;
    }
    const source = /^\s+-?\d+\s+(\S+:\/\/.*\S)\s*$/.exec(line);
    if (source?.[1] !== undefined && inCandidate && pkg !== undefined && candidate !== undefined && !done.has(pkg)) {
      const release = releases.get(source[1]);
      if (release === undefined) throw new Error(`${pkg} ${candidate}: no Release recorded for ${source[1]}`);
      out.push({ package: pkg, version: candidate, index: source[1], release });
      done.add(pkg);
    }
  }
  return out;
}

/**
 * The one distribution the candidates come from: Debian, one major version (12.15, 12-updates and
 * 12 are all 12), one codename (bookworm-security and bookworm-updates are bookworm). Throws (the
 * build refuses) when they mix origins or releases, or are not `expected` (`debian-12`), the
 * distribution the Dockerfile's runtime image is built from.
 */
export function distroOf(cands: readonly Candidate[], expected: string): Distro {
  if (cands.length === 0) throw new Error('no packages: cannot tell the distribution');
  const seen = new Map<string, string[]>();
  for (const c of cands) {
    const major = /^(\d+)/.exec(c.release.version)?.[1] ?? '';
    const codename = c.release.codename.replace(/-(security|updates|backports|proposed-updates)$/, '');
    const key = `${c.release.origin.toLowerCase()}-${major}/${codename}`;
    seen.set(key, [...(seen.get(key) ?? []), `${c.package} ${c.version} (${c.index})`]);
  }
  const describe = () => [...seen].map(([k, pkgs]) => `${k.replace('/', ' ')}: ${pkgs.join(', ')}`).join('; ');
  if (seen.size !== 1) throw new Error(`the packages come from more than one distribution release: ${describe()}`);
  const [key] = [...seen.keys()] as [string];
  const [idVersion, codename] = key.split('/') as [string, string];
  const [id, versionId] = [
    idVersion.slice(0, idVersion.lastIndexOf('-')),
    idVersion.slice(idVersion.lastIndexOf('-') + 1),
  ];
  if (id !== 'debian' || versionId === '' || codename === '')
    throw new Error(`the packages do not come from a Debian release with a version and codename: ${describe()}`);
  if (idVersion !== expected)
    throw new Error(
      `the apt sources used give ${idVersion} (${codename}), but the Dockerfile's runtime image is ${expected}: ` +
        `${describe()}. Build on a ${expected} machine (or with its apt sources), or change the Dockerfiles' RUNTIME_IMAGE`,
    );
  return { id, versionId, codename };
}

/** /etc/os-release of the base layer, as distroless writes it (ID, VERSION_ID, VERSION_CODENAME). */
export function osRelease(d: Distro): string {
  return [
    `PRETTY_NAME="Distroless-equivalent (kubeplus-isolation) ${d.id === 'debian' ? 'Debian GNU/Linux' : d.id} ${d.versionId} (${d.codename})"`,
    `NAME="Debian GNU/Linux"`,
    `ID=${d.id}`,
    `VERSION_ID="${d.versionId}"`,
    `VERSION="${d.versionId} (${d.codename})"`,
    `VERSION_CODENAME=${d.codename}`,
    'HOME_URL="https://www.debian.org/"',
    '',
  ].join('\n');
}

/** `<package> <version>` lines: what the base layer would hold. */
export const versionLines = (cands: readonly Candidate[]): string =>
  cands.map((c) => `${c.package} ${c.version}\n`).join('');

/**
 * The base layer's cache key: a hash of the packages' candidate versions and of `extra` (the
 * layout's revision, node's package and version), so a Debian (security) update gives a new key.
 */
export const baseCacheKey = (cands: readonly Candidate[], extra: readonly string[]): string =>
  createHash('sha256')
    .update(`${extra.join(' ')}\n${versionLines(cands)}`)
    .digest('hex')
    .slice(0, 16);

function main(argv: string[]): void {
  const [command, dir, ...rest] = argv;
  if (dir === undefined || (command !== 'versions' && command !== 'os-release' && command !== 'cache-key'))
    throw new Error(
      'usage: apt-source.ts versions <dir> | cache-key <dir> <word>... | os-release <dir> <expected distro, e.g. debian-12>',
    );
  const cands = candidates(
    readFileSync(join(dir, 'apt-policy.txt'), 'utf8'),
    readFileSync(join(dir, 'apt-candidates.txt'), 'utf8'),
  );
  if (command === 'versions') {
    process.stdout.write(versionLines(cands));
    return;
  }
  if (command === 'cache-key') {
    process.stdout.write(`${baseCacheKey(cands, rest)}\n`);
    return;
  }
  const [expected] = rest;
  if (expected === undefined) throw new Error('os-release: the expected distribution (e.g. debian-12) is required');
  process.stdout.write(osRelease(distroOf(cands, expected)));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`apt-source: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
