/**
 * One version, and one project home, everywhere (issue 39).
 *
 * The single sources: the top-level `VERSION` file (the release's version) and `PROJECT` below
 * (where the project lives and where its images are published). Everything else that names either
 * is a *place*, stamped from them by `make release VERSION=x.y.z` (`node scripts/release/release.ts
 * x.y.z`) and checked by scripts/test/release.test.ts, which fails when one drifts:
 *
 * - every tracked package.json's `version` (the services read theirs for `--version` and
 *   `<prefix>_build_info`, the CLI for its `--version`);
 * - the umbrella chart's and both subcharts' `version` and `appVersion` (the images' default tag),
 *   the umbrella's dependency versions, and their `home`, `sources` and maintainers' `url`;
 * - the subcharts' default image repositories and alert `runbookBaseUrl` (docs/runbooks.md of this
 *   repository at the release's tag), and the chart README's rows of the image repositories;
 * - the Dockerfiles' `org.opencontainers.image.source` label;
 * - a `## [x.y.z]` entry in CHANGELOG.md (a release moves "Unreleased" under it).
 *
 * Shell defaults (Makefile, deploy/package.sh, deploy/image/build-images.sh) and the e2e harness
 * read the chart (appVersion, image repository) instead of repeating them.
 *
 * Pure functions of (text, stamp) → text; `main` is the thin I/O shell.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where this project lives: its repository (chart home, sources, image source label, runbooks) and its images. */
export const PROJECT = {
  home: 'https://github.com/kubeplus-isolation/kubeplus-isolation',
  imageRegistry: 'ghcr.io/kubeplus-isolation',
} as const;

export interface Stamp {
  version: string;
  home: string;
  imageRegistry: string;
}

/** A file that names the version or the project's home, and how to make it name the given ones. */
export interface Place {
  file: string;
  /** What it names: the version, the project (home, image registry), or both. */
  names: readonly ('version' | 'project')[];
  stamp: (text: string, s: Stamp) => string;
}

/** SemVer 2.0.0 without a leading v (what Helm requires of a chart version). */
const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

export function isSemver(version: string): boolean {
  return SEMVER.test(version);
}

/** The git tag of a version, as the upgrade test and the runbook links name it. */
export const releaseTag = (version: string): string => `v${version}`;

export const runbookBaseUrl = (s: Stamp): string => `${s.home}/blob/${releaseTag(s.version)}/docs/runbooks.md`;

export const imageRepository = (s: Stamp, service: 'webhook' | 'operator'): string =>
  `${s.imageRegistry}/kubeplus-isolation-${service}`;

/**
 * Replaces the first capture group of every match of `pattern` (global, multiline) with `value`.
 * Throws when nothing matches (or fewer than `min` times): a place that no longer holds what is
 * stamped must fail loudly, not be skipped.
 */
function replaceGroup(file: string, text: string, pattern: RegExp, value: string, min = 1): string {
  let count = 0;
  const out = text.replace(pattern, (match: string, group: string) => {
    count++;
    const at = match.lastIndexOf(group);
    return match.slice(0, at) + value + match.slice(at + group.length);
  });
  if (count < min) throw new Error(`${file}: ${pattern} matched ${count} time(s), expected at least ${min}`);
  return out;
}

const CHART = 'deploy/kubeplus-isolation';

const chartYaml = (file: string, dependencies: number): Place => ({
  file,
  names: ['version', 'project'],
  stamp: (text, s) => {
    let t = replaceGroup(file, text, /^version: (.+)$/m, s.version);
    t = replaceGroup(file, t, /^appVersion: (.+)$/m, JSON.stringify(s.version));
    t = replaceGroup(file, t, /^home: (.+)$/m, s.home);
    t = replaceGroup(file, t, /^sources:\n {2}- (.+)$/m, s.home);
    t = replaceGroup(file, t, /^maintainers:\n(?: {2,}.*\n)*? {4}url: (.+)$/m, s.home);
    if (dependencies > 0) t = replaceGroup(file, t, /^ {4}version: (.+)$/gm, s.version, dependencies);
    return t;
  },
});

const subchartValues = (service: 'webhook' | 'operator'): Place => {
  const file = `${CHART}/charts/${service}/values.yaml`;
  return {
    file,
    names: ['version', 'project'],
    stamp: (text, s) => {
      const t = replaceGroup(file, text, /^image:\n(?: {2}.*\n)*? {2}repository: (.+)$/m, imageRepository(s, service));
      return replaceGroup(file, t, /^ {2}runbookBaseUrl: (.+)$/m, runbookBaseUrl(s));
    },
  };
};

const chartReadme: Place = {
  file: `${CHART}/README.md`,
  names: ['project'],
  stamp: (text, s) => {
    const file = `${CHART}/README.md`;
    let t = replaceGroup(
      file,
      text,
      /default references \(`([^`]+)\/kubeplus-isolation-\{webhook,operator\}:<appVersion>`/,
      s.imageRegistry,
    );
    for (const service of ['webhook', 'operator'] as const) {
      t = replaceGroup(
        file,
        t,
        new RegExp(`^\\| \`${service}\\.image\\.repository\` \\| string \\| \`"([^"]+)"\``, 'm'),
        imageRepository(s, service),
      );
    }
    return t;
  },
};

const dockerfile = (service: 'webhook' | 'operator'): Place => {
  const file = `services/${service}/Dockerfile`;
  return {
    file,
    names: ['project'],
    stamp: (text, s) => replaceGroup(file, text, /org\.opencontainers\.image\.source="([^"]+)"/, s.home),
  };
};

const packageJson = (file: string): Place => ({
  file,
  names: ['version'],
  // The top-level "version" key (two-space indent), as pnpm and npm write package.json.
  stamp: (text, s) => replaceGroup(file, text, /^ {2}"version": "([^"]*)"/m, s.version),
});

/** The changelog has an entry for the version; a new version gets "Unreleased"'s content. */
export function stampChangelog(text: string, version: string, date: string): string {
  const heading = new RegExp(`^## \\[${version.replace(/[.+]/g, '\\$&')}\\]`, 'm');
  if (heading.test(text)) return text;
  const unreleased = /^## \[Unreleased\]\n/m;
  if (!unreleased.test(text)) throw new Error('CHANGELOG.md: no "## [Unreleased]" section to release');
  let out = text.replace(unreleased, `## [Unreleased]\n\n## [${version}] - ${date}\n`);
  out = out.replace(/\n{3,}(## \[)/g, '\n\n$1');
  // The compare links at the bottom: Unreleased from this tag, this version from the previous tag.
  const unreleasedLink = /^\[Unreleased\]: (.*)\/compare\/(v[^.\s]+\.[^.\s]+\.[^.\s]+)\.\.\.HEAD$/m.exec(out);
  if (unreleasedLink) {
    const [line, base, previous] = unreleasedLink as unknown as [string, string, string];
    out = out.replace(
      line,
      `[Unreleased]: ${base}/compare/${releaseTag(version)}...HEAD\n[${version}]: ${base}/compare/${previous}...${releaseTag(version)}`,
    );
  }
  return out;
}

/** Every place but the package.json files and the changelog, which depend on the tree and the date. */
export const FIXED_PLACES: readonly Place[] = [
  chartYaml(`${CHART}/Chart.yaml`, 2),
  chartYaml(`${CHART}/charts/webhook/Chart.yaml`, 0),
  chartYaml(`${CHART}/charts/operator/Chart.yaml`, 0),
  subchartValues('webhook'),
  subchartValues('operator'),
  chartReadme,
  dockerfile('webhook'),
  dockerfile('operator'),
];

/** The places of a tree whose tracked package.json files are `packageJsons`. */
export function places(packageJsons: readonly string[]): Place[] {
  return [...FIXED_PLACES, ...packageJsons.map(packageJson)];
}

export function trackedPackageJsons(root: string): string[] {
  return execFileSync('git', ['ls-files', '--', 'package.json', '*/package.json'], { cwd: root, encoding: 'utf8' })
    .split('\n')
    .filter((f) => f !== '' && !f.includes('node_modules/'));
}

export function readVersion(root: string): string {
  const version = readFileSync(join(root, 'VERSION'), 'utf8').trim();
  if (!isSemver(version)) throw new Error(`VERSION: ${JSON.stringify(version)} is not a SemVer version (x.y.z)`);
  return version;
}

/** Stamps the tree at `root` with `version` (VERSION first); returns the files it changed. */
export function release(root: string, version: string, date: string): string[] {
  if (!isSemver(version)) throw new Error(`${JSON.stringify(version)} is not a SemVer version (x.y.z, no leading v)`);
  const changed: string[] = [];
  const write = (file: string, next: string): void => {
    const path = join(root, file);
    if (readFileSync(path, 'utf8') !== next) {
      writeFileSync(path, next);
      changed.push(file);
    }
  };
  write('VERSION', `${version}\n`);
  const stamp: Stamp = { version, ...PROJECT };
  for (const place of places(trackedPackageJsons(root))) {
    write(place.file, place.stamp(readFileSync(join(root, place.file), 'utf8'), stamp));
  }
  write('CHANGELOG.md', stampChangelog(readFileSync(join(root, 'CHANGELOG.md'), 'utf8'), version, date));
  return changed;
}

function main(argv: readonly string[]): number {
  const root = join(fileURLToPath(import.meta.url), '..', '..', '..');
  const [version] = argv;
  if (version === undefined || argv.length !== 1) {
    process.stderr.write('usage: make release VERSION=x.y.z   (node scripts/release/release.ts x.y.z)\n');
    return 2;
  }
  try {
    const changed = release(root, version, new Date().toISOString().slice(0, 10));
    process.stdout.write(
      `release: ${version} stamped into ${changed.length} file(s)${changed.length > 0 ? `:\n  ${changed.join('\n  ')}` : ''}\n` +
        `next: write the CHANGELOG entry, make test, commit, then git tag -a ${releaseTag(version)} -m "kubeplus-isolation ${version}"\n`,
    );
    return 0;
  } catch (e) {
    process.stderr.write(`release: ${(e as Error).message}\n`);
    return 1;
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.exitCode = main(process.argv.slice(2));
}
