import { request as httpsRequest, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** One sample of the Prometheus text exposition format. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function parseValue(raw: string): number {
  if (raw === '+Inf') return Number.POSITIVE_INFINITY;
  if (raw === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(raw);
}

/** Parses Prometheus text format (comments skipped; label values unescaped). */
export function parsePrometheusText(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line.trim());
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL)) {
      labels[l[1] as string] = (l[2] as string).replace(/\\(["\\n])/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: m[1] as string, labels, value: parseValue(m[3] as string) });
  }
  return samples;
}

/** Sum of the samples named `name` whose labels include every pair of `labels`. */
export function sumMetric(samples: readonly MetricSample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}

/** GETs a plain-HTTP Prometheus endpoint (e.g. the webhook's metrics port) and parses it. */
export async function scrapeMetrics(url: string): Promise<MetricSample[]> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const body = await res.text();
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}: ${body.slice(0, 300)}`);
  return parsePrometheusText(body);
}

/** The API server's own /metrics, read with the kubeconfig's credentials (needs get on nonResourceURL /metrics). */
export async function scrapeApiServerMetrics(kc: KubeConfig): Promise<MetricSample[]> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error('kubeconfig has no current cluster');
  const url = new URL('/metrics', server);
  const options: RequestOptions = { method: 'GET', agent: false, timeout: 10_000 };
  await kc.applyToHTTPSOptions(options);
  const body = await new Promise<string>((resolve, reject) => {
    const req = httpsRequest(url, options, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode === 200) resolve(text);
        else reject(new Error(`GET ${url}: HTTP ${res.statusCode}: ${text.slice(0, 300)}`));
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url}: no response within 10s`)));
    req.on('error', reject);
    req.end();
  });
  return parsePrometheusText(body);
}
