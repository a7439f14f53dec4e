/**
 * The standalone CLI: one npm package that installs without the workspace, and its krew manifest.
 *
 *   node packages/cli/bundle/pack.ts [--out DIR]     (make cli-package; default DIR dist/cli)
 *
 * writes into DIR
 *   kubeplus-isolation-cli-<version>.tgz   `npm install -g <it>` / `npx <it>`: package.json (no
 *        dependencies), dist/kubeplus-isolation.mjs (the CLI, its workspace package
 *        @kubeplus-isolation/spec and @kubernetes/client-node bundled into one ES module by esbuild),
 *        THIRD-PARTY-NOTICES.md (each bundled package's name, version, licence and licence text),
 *        README.md, LICENSE (when the repository has one). Both commands of the workspace package,
 *        `kubeplus-isolation` and the kubectl plugin `kubectl-kubeplus_isolation`, are its bins.
 *   kubeplus-isolation.yaml                the krew plugin manifest: the same tarball, by its sha256.
 *
 * Why a bundle: @kubernetes/client-node pulls in dozens of packages and the spec package is a
 * private workspace package; one file with no dependencies installs offline, from the tarball
 * alone, with any npm, and starts without resolving a node_modules tree.
 *
 * The version is the release's (`releaseVersion`, one function), stamped into the packed
 * package.json and compiled into the bundle, which `--version` prints (src/version.ts). Nothing
 * here talks to a registry.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const CLI_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const REPO_ROOT = resolve(CLI_DIR, '..', '..');

/** The npm package's name: a bin of the same name is what `npx <tarball>` runs. */
export const PACKAGE_NAME = 'kubeplus-isolation';
/** The plugin's name in krew: `kubectl kubeplus-isolation`, whose executable is kubectl-kubeplus_isolation. */
export const KREW_NAME = 'kubeplus-isolation';
export const BUNDLE = 'dist/kubeplus-isolation.mjs';

/**
 * The release's version: the VERSION file, the one place a release is numbered (scripts/release
 * stamps the charts, package.json files and image tags from it; scripts/test/release.test.ts checks).
 */
export function releaseVersion(repoRoot: string = REPO_ROOT): string {
  // The single source of the version (VERSION; `make release` stamps it everywhere else).
  const v = readFileSync(join(repoRoot, 'VERSION'), 'utf8').trim();
  if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(v)) throw new Error(`VERSION: no semantic version (${v || 'empty'})`);
  return v;
}

/** Where the release's files are downloaded from: the chart's first `sources` entry's GitHub release. */
export function releaseDownloadBase(version: string, repoRoot: string = REPO_ROOT): string {
  const chart = readFileSync(join(repoRoot, 'deploy', 'kubeplus-isolation', 'Chart.yaml'), 'utf8');
  const source = /^sources:\s*\n\s*-\s*(\S+)/m.exec(chart)?.[1];
  if (source === undefined) throw new Error('deploy/kubeplus-isolation/Chart.yaml: no sources entry');
  return `${source.replace(/\/$/, '')}/releases/download/v${version}/`;
}

/** What `npm pack` names the tarball. */
const npmPackName = (version: string): string => `${PACKAGE_NAME}-${version}.tgz`;
/** The released file's name: -cli, beside the chart's kubeplus-isolation-<version>.tgz. */
export const tarballName = (version: string): string => `${PACKAGE_NAME}-cli-${version}.tgz`;

/** package.json of the standalone package: no dependencies, both commands. */
export function packageJson(version: string, hasLicense: boolean): Record<string, unknown> {
  const workspace = JSON.parse(readFileSync(join(CLI_DIR, 'package.json'), 'utf8')) as { description: string };
  const root = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } };
  return {
    name: PACKAGE_NAME,
    version,
    description: workspace.description,
    license: 'Apache-2.0',
    type: 'module',
    bin: { 'kubeplus-isolation': BUNDLE, 'kubectl-kubeplus_isolation': BUNDLE },
    engines: { node: root.engines.node },
    files: ['dist', 'README.md', 'THIRD-PARTY-NOTICES.md', ...(hasLicense ? ['LICENSE'] : [])],
  };
}

/** The krew manifest (krew.googlecontainertools.github.com/v1alpha2) of the packed tarball. */
export function krewManifest(o: {
  version: string;
  uri: string;
  sha256: string;
  homepage: string;
  hasLicense: boolean;
}): string {
  const files = [
    `    - from: package/${BUNDLE}\n      to: .`,
    ...(o.hasLicense ? ['    - from: package/LICENSE\n      to: .'] : []),
  ];
  return `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: ${KREW_NAME}
spec:
  version: v${o.version}
  homepage: ${o.homepage}
  shortDescription: Validate, explain and dry-run kubeplus-isolation's tenant isolation
  description: |
    The kubeplus-isolation command-line tool as a kubectl plugin. validate judges the
    kubeplus.io/node-isolation and kubeplus.io/sandbox-isolation annotations of manifests
    exactly as the operator does (no cluster needed, for CI); explain shows a namespace's
    isolation and what does not comply; check shows what admission would do to a Pod or
    Sandbox by a server-side dry run.
  caveats: |
    The plugin is one JavaScript file: it needs Node.js ${(JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { engines: { node: string } }).engines.node} on PATH.
  platforms:
  - selector:
      matchExpressions:
      - key: os
        operator: In
        values: [linux, darwin]
    uri: ${o.uri}
    sha256: ${o.sha256}
    files:
${files.join('\n')}
    bin: ${BUNDLE.split('/').at(-1)}
`;
}

interface Notice {
  name: string;
  version: string;
  license: string;
  text?: string;
}

/** The npm packages whose files the bundle holds (esbuild's metafile inputs), with their licence texts. */
function notices(inputs: string[]): Notice[] {
  const found = new Map<string, Notice>();
  for (const input of inputs) {
    const abs = resolve(REPO_ROOT, input);
    const at = abs.lastIndexOf(`${sep}node_modules${sep}`);
    if (at < 0) continue;
    const rest = abs.slice(at + 14).split(sep);
    const dir = join(abs.slice(0, at + 14), ...(rest[0]?.startsWith('@') ? rest.slice(0, 2) : rest.slice(0, 1)));
    if (found.has(dir)) continue;
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      license?: unknown;
    };
    const licenseFile = readdirSync(dir).find((f) => /^(licen[cs]e|copying)(\.|$)/i.test(f));
    found.set(dir, {
      name: pkg.name,
      version: pkg.version,
      license: typeof pkg.license === 'string' ? pkg.license : 'see its text',
      ...(licenseFile ? { text: readFileSync(join(dir, licenseFile), 'utf8') } : {}),
    });
  }
  return [...found.values()].sort((a, b) => `${a.name}@${a.version}`.localeCompare(`${b.name}@${b.version}`));
}

function noticesMarkdown(list: Notice[]): string {
  const head = `# Third-party notices\n\n${BUNDLE} bundles these packages (esbuild); each is listed with its licence.\n`;
  return `${head}${list.map((n) => `\n## ${n.name} ${n.version} (${n.license})\n\n${n.text ? `\`\`\`\n${n.text.trim()}\n\`\`\`\n` : '(no licence file in the package)\n'}`).join('')}`;
}

export interface Packed {
  tarball: string;
  krew: string;
  version: string;
  sha256: string;
}

export async function pack(out: string, version: string = releaseVersion()): Promise<Packed> {
  const stage = mkdtempSync(join(tmpdir(), 'kpi-cli-pack-'));
  try {
    const outfile = join(stage, BUNDLE);
    const result = await build({
      entryPoints: [join(CLI_DIR, 'src', 'main.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      outfile,
      // The workspace package from its sources (its generated validators: `make generate`).
      alias: { '@kubeplus-isolation/spec': join(REPO_ROOT, 'packages', 'spec', 'src', 'index.ts') },
      // CommonJS dependencies call require() for Node's modules; an ES module has none of its own.
      banner: {
        js: "import { createRequire as kpiCreateRequire } from 'node:module';\nconst require = kpiCreateRequire(import.meta.url);",
      },
      legalComments: 'none',
      // --version without a package.json beside the file (krew installs the file alone): src/version.ts.
      define: { __KUBEPLUS_ISOLATION_VERSION__: JSON.stringify(version) },
      metafile: true,
      logLevel: 'warning',
    });
    chmodSync(outfile, 0o755);
    const hasLicense = existsSync(join(REPO_ROOT, 'LICENSE'));
    if (hasLicense) copyFileSync(join(REPO_ROOT, 'LICENSE'), join(stage, 'LICENSE'));
    copyFileSync(join(CLI_DIR, 'README.md'), join(stage, 'README.md'));
    writeFileSync(join(stage, 'THIRD-PARTY-NOTICES.md'), noticesMarkdown(notices(Object.keys(result.metafile.inputs))));
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(packageJson(version, hasLicense), null, 2)}\n`);
    mkdirSync(out, { recursive: true });
    // npm pack: the package format npm and npx install; no scripts run, no registry is asked.
    execFileSync('npm', ['pack', '--ignore-scripts', '--offline', '--silent', '--pack-destination', out], {
      cwd: stage,
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, npm_config_update_notifier: 'false', npm_config_fund: 'false' },
    });
    const tarball = join(out, tarballName(version));
    if (!existsSync(join(out, npmPackName(version))))
      throw new Error(`npm pack wrote no ${npmPackName(version)} in ${out}`);
    renameSync(join(out, npmPackName(version)), tarball);
    const sha256 = createHash('sha256').update(readFileSync(tarball)).digest('hex');
    const chart = readFileSync(join(REPO_ROOT, 'deploy', 'kubeplus-isolation', 'Chart.yaml'), 'utf8');
    const homepage = /^home:\s*(\S+)/m.exec(chart)?.[1] ?? '';
    const uri = `${process.env.CLI_DOWNLOAD_BASE ?? releaseDownloadBase(version)}${tarballName(version)}`;
    const krew = join(out, `${KREW_NAME}.yaml`);
    writeFileSync(krew, krewManifest({ version, uri, sha256, homepage, hasLicense }));
    return { tarball, krew, version, sha256 };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const i = process.argv.indexOf('--out');
  const out = resolve(i > 0 ? (process.argv[i + 1] ?? '') : join(REPO_ROOT, 'dist', 'cli'));
  try {
    const p = await pack(out);
    process.stderr.write(
      `cli: ${relative(process.cwd(), p.tarball)} (sha256 ${p.sha256}), krew manifest ${relative(process.cwd(), p.krew)}\n`,
    );
    process.stdout.write(`${p.tarball}\n`);
  } catch (err) {
    process.stderr.write(`cli pack: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
