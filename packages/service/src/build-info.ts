/**
 * `<prefix>_build_info`: the Prometheus convention (as `kube_state_metrics_build_info`,
 * `prometheus_build_info`) for which version of a program runs — a gauge fixed at 1 whose labels
 * carry the version and the Node.js runtime, so dashboards can join on it and alerts can tell a
 * rollout's two versions apart.
 */
import { Gauge, type Registry } from 'prom-client';

export function registerBuildInfo(registry: Registry, prefix: string, version: string): void {
  new Gauge({
    name: `${prefix}_build_info`,
    help: `A metric with a constant 1 labelled by the version of ${prefix.replace(/_/g, '-')} and of Node.js it runs on.`,
    labelNames: ['version', 'nodejs_version'] as const,
    registers: [registry],
  }).set({ version, nodejs_version: process.versions.node }, 1);
}
