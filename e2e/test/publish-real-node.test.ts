/**
 * A release published to an OCI registry and installed from it, as a platform team installs one:
 * `deploy/publish.sh` (`make publish REGISTRY=…`) pushes the images `make images` built and the
 * chart to a registry, signs them with cosign and attaches each image's SBOM as a signed
 * attestation; then `helm install oci://…/kubeplus-isolation --version <chart version>` on the
 * harness's real node, whose containerd pulls the images from that registry (nothing is imported
 * into the node beforehand); and cosign verifies what was installed.
 *
 * The registry is `crane registry serve` on the host side of the node's veth (the harness's test
 * address, e2e/src/harness/registry.ts): nothing leaves the machine. The signing key pair is
 * generated here; signatures carry no transparency-log entry (README "Install from an OCI
 * registry" shows keyless signing for real releases).
 *
 * - the chart is installed from the registry by version, and the webhook and operator Pods run
 *   images containerd pulled from it, by the digests published;
 * - `cosign verify` with the public key passes for each image index, each platform image and the
 *   chart, and `cosign verify-attestation --type spdxjson` gives each platform image's SBOM, as
 *   built;
 * - it fails with another key, and for an image pushed over the release's tag afterwards.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  imageArchives,
  type RealNodeCluster,
  repoRoot,
  serveRegistry,
  startRealNodeCluster,
  type TestRegistry,
} from '@kubeplus-isolation/e2e';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { helm, INSTANCE_GROUP_VALUES, prepareChartNode, RELEASE_NS } from './support/real-node.js';

const run = promisify(execFile);
const RELEASE = 'kpi';
const CHART_YAML = readFileSync(join(repoRoot(), 'deploy', 'kubeplus-isolation', 'Chart.yaml'), 'utf8');
const VERSION = /^version:\s*"?([^"\s]+)"?$/m.exec(CHART_YAML)?.[1] ?? '';
const TAG = /^appVersion:\s*"?([^"\s]+)"?$/m.exec(CHART_YAML)?.[1] ?? '';
const PASSWORD = 'e2e-only';

/** One line of the publish record (dist/publish/published.txt). */
interface Published {
  kind: 'image' | 'chart';
  ref: string;
  digest: string;
  arch?: string;
  sbom?: string;
}

function parseRecord(text: string): Published[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((line) => {
      const image = /^image (\S+):(\S+) (sha256:[0-9a-f]{64})$/.exec(line);
      if (image) return { kind: 'image', ref: `${image[1]}:${image[2]}`, digest: image[3] as string };
      const platform = /^image (\S+) linux\/(\S+) (sha256:[0-9a-f]{64}) sbom (\S+)$/.exec(line);
      if (platform)
        return {
          kind: 'image',
          ref: platform[1] as string,
          arch: platform[2],
          digest: platform[3] as string,
          sbom: platform[4],
        };
      const chart = /^chart (\S+) (sha256:[0-9a-f]{64})$/.exec(line);
      if (chart) return { kind: 'chart', ref: chart[1] as string, digest: chart[2] as string };
      throw new Error(`unexpected publish record line: ${line}`);
    });
}

/** The repository part of `host:port/path/name:tag` or `…/name`. */
const repositoryOf = (ref: string): string => ref.replace(/:[^:/]+$/, '');

describe('a release published to an OCI registry, installed from it on a real node and verified with cosign', () => {
  let cluster: RealNodeCluster;
  let registry: TestRegistry;
  let published: Published[];
  let keys: string;
  let imagesDir: string;
  /** crane, cosign, ctr: the node's binaries directory (NODE_BINARIES); helm: the control plane's. */
  const bin = (name: string): string =>
    join(name === 'helm' ? cluster.cp.state.assetsDir : cluster.layout.binDir, name);

  /** cosign with the test registry's flags; resolves with its exit status and output, never rejects. */
  async function cosign(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    try {
      const { stdout, stderr } = await run(
        bin('cosign'),
        [...args, '--allow-http-registry', '--allow-insecure-registry'],
        {
          env: { ...process.env, COSIGN_PASSWORD: PASSWORD, HOME: keys },
          maxBuffer: 32 << 20,
        },
      );
      return { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code?: number; stdout?: string; stderr?: string };
      return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
    }
  }

  beforeAll(async () => {
    // No project image is imported: the node must pull them from the registry.
    cluster = await startRealNodeCluster({ log: (m) => process.stderr.write(`[publish] ${m}\n`) });
    registry = await serveRegistry(cluster);
    keys = join(cluster.cp.dir, 'cosign');
    for (const pair of ['release', 'other']) {
      mkdirSync(join(keys, pair), { recursive: true });
      await run(bin('cosign'), ['generate-key-pair'], {
        cwd: join(keys, pair),
        env: { ...process.env, COSIGN_PASSWORD: PASSWORD, HOME: keys },
      });
    }
    imagesDir = dirname(imageArchives()[0] as string);
    const out = join(cluster.cp.dir, 'publish');
    const { stdout } = await run(join(repoRoot(), 'deploy', 'publish.sh'), {
      env: {
        ...process.env,
        REGISTRY: `${registry.host}/kpi`,
        REGISTRY_PLAIN_HTTP: '1',
        COSIGN_KEY: join(keys, 'release', 'cosign.key'),
        COSIGN_PASSWORD: PASSWORD,
        HOME: keys,
        CRANE: bin('crane'),
        HELM: bin('helm'),
        COSIGN: bin('cosign'),
        IMAGES_DIR: imagesDir,
        PUBLISH_OUT_DIR: out,
      },
      maxBuffer: 32 << 20,
    });
    published = parseRecord(readFileSync(stdout.trim().split('\n').at(-1) ?? '', 'utf8'));
    await prepareChartNode(cluster);
  });

  afterAll(async () => {
    await registry?.stop();
    await cluster?.stop();
  });

  test('publishes both image indexes, their four platform images with SBOMs, and the chart at its version', () => {
    const host = `${registry.host}/kpi`;
    expect(published.filter((p) => p.kind === 'image' && p.arch === undefined).map((p) => p.ref)).toEqual([
      `${host}/kubeplus-isolation-webhook:${TAG}`,
      `${host}/kubeplus-isolation-operator:${TAG}`,
    ]);
    expect(published.filter((p) => p.arch !== undefined).map((p) => `${p.ref} ${p.arch} ${p.sbom}`)).toEqual(
      ['webhook', 'operator'].flatMap((s) =>
        ['amd64', 'arm64'].map((a) => `${host}/kubeplus-isolation-${s} ${a} ${s}.linux-${a}.spdx.json`),
      ),
    );
    expect(published.filter((p) => p.kind === 'chart').map((p) => p.ref)).toEqual([
      `${host}/kubeplus-isolation:${VERSION}`,
    ]);
  });

  test(`helm install oci://…/kubeplus-isolation --version ${VERSION}: the node's containerd pulls the published images and the Pods run`, async () => {
    const ctr = (): string =>
      cluster.nodeExec(bin('ctr'), [
        '--address',
        cluster.layout.containerdSocket,
        '-n',
        'k8s.io',
        'images',
        'ls',
        '-q',
      ]);
    expect(ctr()).not.toContain('kubeplus-isolation-webhook');
    await helm(
      cluster,
      'install',
      RELEASE,
      `oci://${registry.host}/kpi/kubeplus-isolation`,
      '--version',
      VERSION,
      '--plain-http',
      '--namespace',
      RELEASE_NS,
      ...INSTANCE_GROUP_VALUES,
      '--wait',
      '--timeout',
      '180s',
    );
    const apps = cluster.cp.kc.makeApiClient(AppsV1Api);
    for (const name of [`${RELEASE}-webhook`, `${RELEASE}-operator`]) {
      const d = await apps.readNamespacedDeployment({ name, namespace: RELEASE_NS });
      expect({ name, ready: d.status?.readyReplicas }).toEqual({ name, ready: d.spec?.replicas });
    }
    const pods = (await cluster.cp.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: RELEASE_NS })).items;
    expect(pods.length).toBeGreaterThanOrEqual(2);
    for (const pod of pods) {
      const status = pod.status?.containerStatuses?.[0];
      const service = /kubeplus-isolation-(webhook|operator):/.exec(status?.image ?? '')?.[1];
      const index = published.find((p) => p.ref === `${registry.host}/kpi/kubeplus-isolation-${service}:${TAG}`);
      expect({ pod: pod.metadata?.name, ready: status?.ready, image: status?.image }).toEqual({
        pod: pod.metadata?.name,
        ready: true,
        image: index?.ref,
      });
      // Pulled by tag, recorded by the index digest published (and signed).
      expect(status?.imageID).toBe(`${repositoryOf(index?.ref ?? '')}@${index?.digest}`);
    }
    expect(ctr()).toContain(`${registry.host}/kpi/kubeplus-isolation-webhook:${TAG}`);
  });

  test('cosign verify passes with the public key for every image index, platform image and the chart', async () => {
    const pub = join(keys, 'release', 'cosign.pub');
    for (const p of published) {
      const ref = `${repositoryOf(p.ref)}@${p.digest}`;
      const result = await cosign('verify', '--key', pub, '--insecure-ignore-tlog=true', ref);
      expect({ ref, code: result.code, stderr: result.code === 0 ? '' : result.stderr }).toEqual({
        ref,
        code: 0,
        stderr: '',
      });
      const [claim] = JSON.parse(result.stdout) as { critical: { image: { 'docker-manifest-digest': string } } }[];
      expect(claim?.critical.image['docker-manifest-digest']).toBe(p.digest);
    }
  });

  test("cosign verify-attestation --type spdxjson gives each platform image's SBOM, as built", async () => {
    const pub = join(keys, 'release', 'cosign.pub');
    for (const p of published.filter((x) => x.sbom !== undefined)) {
      const ref = `${p.ref}@${p.digest}`;
      const result = await cosign(
        'verify-attestation',
        '--key',
        pub,
        '--type',
        'spdxjson',
        '--insecure-ignore-tlog=true',
        ref,
      );
      expect({ ref, code: result.code, stderr: result.code === 0 ? '' : result.stderr }).toEqual({
        ref,
        code: 0,
        stderr: '',
      });
      const [envelope] = result.stdout.split('\n').filter((l) => l.trim() !== '');
      const statement = JSON.parse(
        Buffer.from((JSON.parse(envelope ?? '{}') as { payload: string }).payload, 'base64').toString('utf8'),
      ) as {
        predicateType: string;
        subject: { digest: { sha256: string } }[];
        predicate: unknown;
      };
      expect(statement.predicateType).toBe('https://spdx.dev/Document');
      expect(statement.subject[0]?.digest.sha256).toBe(p.digest.replace('sha256:', ''));
      expect(statement.predicate).toEqual(JSON.parse(readFileSync(join(imagesDir, p.sbom as string), 'utf8')));
    }
  });

  test('cosign verify fails with another key, and for an image pushed over the release tag', async () => {
    const [index] = published;
    if (index === undefined) throw new Error('nothing published');
    const wrongKey = await cosign(
      'verify',
      '--key',
      join(keys, 'other', 'cosign.pub'),
      '--insecure-ignore-tlog=true',
      `${repositoryOf(index.ref)}@${index.digest}`,
    );
    expect(wrongKey.code).not.toBe(0);
    expect(wrongKey.stderr).toMatch(/no matching (signatures|attestations)|failed to verify signature/i);

    // Tampering: a layer appended to the published amd64 image, pushed over the release's tag.
    const amd64 = published.find((p) => p.ref === repositoryOf(index.ref) && p.arch === 'amd64');
    const layer = join(keys, 'tampered.tar');
    mkdirSync(join(keys, 'tampered', 'etc'), { recursive: true });
    writeFileSync(join(keys, 'tampered', 'etc', 'tampered'), 'not what was signed\n');
    await run('tar', ['-cf', layer, '-C', join(keys, 'tampered'), 'etc']);
    await run(bin('crane'), [
      'append',
      '--insecure',
      '-b',
      `${amd64?.ref}@${amd64?.digest}`,
      '-f',
      layer,
      '-t',
      index.ref,
    ]);
    const tampered = await cosign(
      'verify',
      '--key',
      join(keys, 'release', 'cosign.pub'),
      '--insecure-ignore-tlog=true',
      index.ref,
    );
    expect(tampered.code).not.toBe(0);
    expect(tampered.stderr).toMatch(/no signatures found|no matching signatures/i);
    // What was published is still verifiable by its digest.
    const original = await cosign(
      'verify',
      '--key',
      join(keys, 'release', 'cosign.pub'),
      '--insecure-ignore-tlog=true',
      `${repositoryOf(index.ref)}@${index.digest}`,
    );
    expect(original.code).toBe(0);
  });
});
