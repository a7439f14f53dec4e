/**
 * Issue 34: no tenant can take node isolation down by exhausting the webhook, on the real node
 * with the chart's defaults (2 webhook replicas, 256Mi memory limit each).
 *
 * Before the fix, 24 stalled gzip requests of 18 MB decoded each, sent from a tenant Pod to one
 * replica's port, pushed it past its limit: OOM-killed, CrashLoopBackOff, and every isolated
 * namespace admitted Pods unplaced. Here, for 30 s at once:
 *
 * - **from a tenant Pod** (namespace rights only; the chart's NetworkPolicy is off by default, and
 *   this node's CNI enforces none anyway) straight to one webhook Pod's admission port: 24
 *   connections sending gzip bombs (18 MiB of `<` in ~18 KB), 24 declaring 18 MiB and stalling
 *   after 64 KiB (these two from the first third on), and 2 sending whole 18 MiB bodies of `{}`
 *   (21× their size once parsed) and 1 an 18 MiB string, each connection again as soon as it is
 *   answered (after 100 ms);
 * - **through the API server, without any network access**: 10 concurrent server-side dry-run
 *   CREATEs of a Pod of 2.9 MB of `<` (a 17 MiB review each: nothing is stored, nothing costs the
 *   tenant);
 * - **meanwhile**, a tenant's ordinary Pods (server-side dry-runs, one after another) must keep
 *   being patched with the mandate.
 *
 * Then: no webhook container restarted, the attacked Pod's memory (its cgroup's peak usage, the
 * figure its limit is enforced on) stayed under its limit (reported), and the defences that held
 * are the ones counted (415, 408, 413 too_complex, 503).
 */

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import {
  getSecureMetrics,
  type RealNodeCluster,
  scrapeSecureMetrics,
  sumMetric,
  waitFor,
} from '@kubeplus-isolation/e2e';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import {
  carriesPoolMandate,
  installChart,
  isolateTenant,
  poolMandate,
  prepareChartNode,
  probePod,
  RELEASE_NS,
  releaseMetricsToken,
  startProjectNode,
  tenantPod,
} from './support/real-node.js';

const POOL = 'team-a-pool';
const TENANT = 'team-a';
const ATTACK_MS = 30_000;
const MiB = 1024 * 1024;
/** The chart's default memory limit of a webhook container (charts/webhook/values.yaml). */
const LIMIT_BYTES = 256 * MiB;

/**
 * The attacker: a Node.js script a tenant Pod runs against `TARGET:PORT` (a webhook Pod's
 * admission port) for `DURATION_MS`; prints how each attempt ended, by kind, as one JSON line.
 * Every loop waits 100 ms between attempts, and every attempt ends within 40 s.
 */
const ATTACK_SCRIPT = `
const tls = require('node:tls');
const zlib = require('node:zlib');
const host = process.env.TARGET, port = Number(process.env.PORT);
const until = Date.now() + Number(process.env.DURATION_MS);
const M18 = 18 * 1024 * 1024;
const bomb = zlib.gzipSync(Buffer.alloc(M18, 0x3c));
const dense = Buffer.from('[' + '{},'.repeat(M18 / 3 - 1) + '{}]');
const text = Buffer.from('{"pad":"' + 'x'.repeat(M18 - 10) + '"}');
const counts = {};
const head = (length, extra) =>
  'POST /mutate/pods?timeout=5s HTTP/1.1\\r\\nHost: webhook\\r\\nContent-Type: application/json\\r\\n' +
  'Content-Length: ' + length + '\\r\\n' + (extra || '') + '\\r\\n';
function attempt(kind, headers, body) {
  return new Promise((resolve) => {
    let status = '', ended = false;
    const s = tls.connect({ host, port, rejectUnauthorized: false }, () => {
      s.write(headers);
      if (body) s.write(body);
    });
    const end = (how) => {
      if (ended) return;
      ended = true;
      const key = kind + ':' + (status || how);
      counts[key] = (counts[key] || 0) + 1;
      s.destroy();
      resolve();
    };
    s.on('data', (d) => { if (!status) status = d.toString('latin1', 9, 12); });
    s.on('error', (e) => end('error-' + (e.code || 'unknown')));
    s.on('close', () => end('closed'));
    s.setTimeout(40000, () => end('timeout'));
  });
}
async function loop(kind, headers, body, delayMs) {
  await new Promise((r) => setTimeout(r, delayMs || 0));
  while (Date.now() < until) {
    await attempt(kind, headers, body);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const loops = [];
// The stalls take the large reviews' turns once they start: the bodies that must be parsed go first.
const later = Number(process.env.STALL_AFTER_MS);
for (let i = 0; i < 24; i++) loops.push(loop('gzip', head(bomb.length, 'Content-Encoding: gzip\\r\\n'), bomb, later));
for (let i = 0; i < 24; i++) loops.push(loop('stall', head(M18), Buffer.alloc(65536, 0x20), later));
for (let i = 0; i < 2; i++) loops.push(loop('dense', head(dense.length), dense));
loops.push(loop('string', head(text.length), text));
Promise.all(loops).then(() => { console.log(JSON.stringify(counts)); process.exit(0); });
`;

/** The Pod cgroup of `uid` in the node's memory hierarchy (cgroup v1 `memory`, or the v2 tree). */
function podMemoryCgroup(cluster: RealNodeCluster, uid: string): string {
  const roots = ['/sys/fs/cgroup/memory', '/sys/fs/cgroup'].map((h) => join(h, cluster.layout.cgroupRoot));
  const wanted = [`pod${uid}`, `pod${uid.replaceAll('-', '_')}`];
  const search = (dir: string, depth: number): string | undefined => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return undefined;
    }
    for (const e of entries) {
      const child = join(dir, e);
      if (wanted.includes(e)) return child;
      if (depth > 0 && statSync(child, { throwIfNoEntry: false })?.isDirectory()) {
        const found = search(child, depth - 1);
        if (found !== undefined) return found;
      }
    }
    return undefined;
  };
  for (const root of roots) {
    const found = search(root, 3);
    if (found !== undefined) return found;
  }
  throw new Error(`no memory cgroup of Pod ${uid} under ${roots.join(' or ')}`);
}

/** The cgroup's peak memory usage: v1 memory.max_usage_in_bytes, or v2 memory.peak. */
function peakMemory(cgroup: string): number {
  for (const file of ['memory.max_usage_in_bytes', 'memory.peak']) {
    try {
      return Number(readFileSync(join(cgroup, file), 'utf8').trim());
    } catch {
      // the other hierarchy's name
    }
  }
  throw new Error(`no peak memory file in ${cgroup}`);
}

describe('a tenant cannot exhaust the node-isolation webhook (issue 34, chart defaults, real node)', () => {
  let cluster: RealNodeCluster;
  let core: CoreV1Api;
  let target: V1Pod;

  beforeAll(async () => {
    cluster = await startProjectNode();
    await prepareChartNode(cluster, { pool: POOL });
    await installChart(cluster, 'kpi');
    core = cluster.cp.kc.makeApiClient(CoreV1Api);
    await isolateTenant(cluster, TENANT, poolMandate(POOL));
    await waitFor(
      "the webhook to hold team-a's mandate",
      async () =>
        carriesPoolMandate(
          POOL,
          await core.createNamespacedPod({ namespace: TENANT, body: tenantPod('probe'), dryRun: 'All' }),
        ) || undefined,
      { timeoutMs: 30_000 },
    );
    const webhooks = (
      await core.listNamespacedPod({ namespace: RELEASE_NS, labelSelector: 'app.kubernetes.io/name=webhook' })
    ).items;
    expect(webhooks).toHaveLength(2);
    target = webhooks[0] as V1Pod;
  });

  afterAll(async () => {
    await cluster?.stop();
  });

  test('gzip bombs, stalled and dense bodies from a tenant Pod, and a dry-run flood: the webhook keeps patching, never restarts, stays under its limit', async () => {
    const cgroup = podMemoryCgroup(cluster, target.metadata?.uid ?? '');
    const before = peakMemory(cgroup);

    // The attacker runs in the tenant's own namespace, placed on the tenant's pool like any of its Pods.
    const attacker = probePod('attacker', ATTACK_SCRIPT);
    const container = attacker.spec?.containers[0];
    if (container === undefined) throw new Error('probePod has no container');
    container.env = [
      { name: 'TARGET', value: target.status?.podIP ?? '' },
      { name: 'PORT', value: '8443' },
      { name: 'DURATION_MS', value: String(ATTACK_MS) },
      { name: 'STALL_AFTER_MS', value: String(ATTACK_MS / 3) },
    ];
    await core.createNamespacedPod({ namespace: TENANT, body: attacker });
    await waitFor(
      'the attacker Pod running',
      async () =>
        (await core.readNamespacedPod({ namespace: TENANT, name: 'attacker' })).status?.phase === 'Running' ||
        undefined,
      { timeoutMs: 60_000 },
    );
    const startedAt = Date.now();
    const attacking = () => Date.now() - startedAt < ATTACK_MS;

    // Without network access: concurrent server-side dry-runs of a Pod of 2.9 MB of `<`.
    const huge = (i: number): V1Pod => {
      const pod = tenantPod(`huge-${i}`);
      return { ...pod, metadata: { ...pod.metadata, annotations: { pad: '<'.repeat(2_900_000) } } };
    };
    const flood = Array.from({ length: 10 }, async (_, i) => {
      let sent = 0;
      while (attacking()) {
        await core.createNamespacedPod({ namespace: TENANT, body: huge(i), dryRun: 'All' }).catch(() => undefined);
        sent++;
      }
      return sent;
    });

    // Meanwhile, the tenant's ordinary Pods, one after another: each must carry the mandate.
    const ordinary = (async () => {
      const unplaced: string[] = [];
      let admitted = 0;
      for (let i = 0; attacking(); i++) {
        const pod = await core.createNamespacedPod({
          namespace: TENANT,
          body: tenantPod(`ordinary-${i}`),
          dryRun: 'All',
        });
        admitted++;
        if (!carriesPoolMandate(POOL, pod)) unplaced.push(pod.metadata?.name ?? `ordinary-${i}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      return { admitted, unplaced };
    })();

    const [sent, legit] = await Promise.all([Promise.all(flood), ordinary]);
    const finished = await waitFor(
      'the attacker Pod to finish',
      async () => {
        const p = await core.readNamespacedPod({ namespace: TENANT, name: 'attacker' });
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
      },
      { timeoutMs: 90_000 },
    );
    const attackLog = String(await core.readNamespacedPodLog({ namespace: TENANT, name: 'attacker' }));
    const outcomes = JSON.parse(attackLog.trim().split('\n').at(-1) ?? '{}') as Record<string, number>;
    const peak = peakMemory(cgroup);
    process.stderr.write(
      `[exhaustion] attacker ${finished.status?.phase}: ${JSON.stringify(outcomes)}; dry-run flood: ${sent.reduce((a, b) => a + b, 0)} sent; ` +
        `ordinary Pods: ${legit.admitted} admitted, ${legit.unplaced.length} unplaced; attacked Pod's cgroup peak ` +
        `${(peak / MiB).toFixed(1)} MiB (before the attack ${(before / MiB).toFixed(1)} MiB, limit ${LIMIT_BYTES / MiB} MiB)\n`,
    );

    // The tenant's own Pods kept their placement throughout.
    expect(legit.admitted).toBeGreaterThan(20);
    expect(legit.unplaced).toEqual([]);

    // The webhook never restarted, and is Ready.
    const webhooks = (
      await core.listNamespacedPod({ namespace: RELEASE_NS, labelSelector: 'app.kubernetes.io/name=webhook' })
    ).items;
    for (const pod of webhooks) {
      const status = pod.status?.containerStatuses?.[0];
      expect({ pod: pod.metadata?.name, restarts: status?.restartCount, ready: status?.ready }).toEqual({
        pod: pod.metadata?.name,
        restarts: 0,
        ready: true,
      });
    }
    expect(webhooks.map((p) => p.metadata?.uid)).toContain(target.metadata?.uid);

    // Its memory stayed under the limit.
    expect(peak).toBeLessThan(LIMIT_BYTES);

    // The defences that held are the ones counted on the attacked replica (its secure metrics,
    // read as Prometheus reads them).
    const metrics = await scrapeSecureMetrics(
      target.status?.podIP ?? '',
      8080,
      await releaseMetricsToken(cluster, 'kpi'),
    );
    const badRequests = (reason: string) => sumMetric(metrics, 'kubeplus_webhook_bad_requests_total', { reason });
    expect(badRequests('unsupported_encoding')).toBeGreaterThan(0);
    expect(badRequests('body_timeout')).toBeGreaterThan(0);
    expect(badRequests('too_complex')).toBeGreaterThan(0);
    expect(sumMetric(metrics, 'kubeplus_webhook_overloaded_total', { lane: 'large' })).toBeGreaterThan(0);
    // And the attacker saw those answers, not a dead server.
    expect(outcomes['gzip:415']).toBeGreaterThan(0);
    expect(outcomes['dense:413']).toBeGreaterThan(0);
  });

  // Issue 34, point 5: the operator's metrics named the tenants with unplaced Pods, and both
  // services' metrics answered any Pod. With the chart's defaults they answer only a token allowed
  // to get /metrics, checked by a TokenReview and a SubjectAccessReview.
  test("a tenant's ServiceAccount cannot read either service's metrics; the metrics reader's token can", async () => {
    const tenantToken = await core.createNamespacedServiceAccountToken({
      name: 'default',
      namespace: TENANT,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    const reader = await releaseMetricsToken(cluster, 'kpi');
    const pods = (await core.listNamespacedPod({ namespace: RELEASE_NS })).items;
    for (const component of ['webhook', 'operator']) {
      const pod = pods.find((p) => p.metadata?.labels?.['app.kubernetes.io/component'] === component);
      const ip = pod?.status?.podIP ?? '';
      expect({ component, ip }).toEqual({ component, ip: expect.stringMatching(/^\d+\.\d+\.\d+\.\d+$/) });
      expect({ component, ...(await getSecureMetrics(ip, 8080, undefined)) }).toMatchObject({ component, status: 401 });
      const tenant = await getSecureMetrics(ip, 8080, tenantToken.status?.token ?? '');
      expect({ component, status: tenant.status, leaks: /kubeplus_/.test(tenant.text) }).toEqual({
        component,
        status: 403,
        leaks: false,
      });
      const allowed = await getSecureMetrics(ip, 8080, reader);
      expect({ component, status: allowed.status }).toEqual({ component, status: 200 });
      expect(allowed.text).toContain(`kubeplus_${component}_build_info`);
    }
  });
});
