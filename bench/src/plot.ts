/**
 * Plots: Vega-Lite specs compiled to Vega, rendered headless to SVG by Vega itself (no browser,
 * no canvas), then rasterized to PNG by resvg (a Rust renderer shipped as a prebuilt npm package)
 * with the system's DejaVu fonts. Both files are written; the report embeds the PNG.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Resvg } from '@resvg/resvg-js';
import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { BenchResults } from './results.js';

export interface Plot {
  file: string;
  svg: string;
  title: string;
}

const FONT = 'DejaVu Sans';
const SETUP_LABEL: Record<string, string> = {
  a: 'a: no webhook',
  b: 'b: PodNodeSelector + PodTolerationRestriction (in-process)',
  c: 'c: this webhook',
  d: 'd: reference webhook (bare node:https)',
  e: 'e: MutatingAdmissionPolicy engine (in-process CEL)',
};

async function render(spec: TopLevelSpec, outDir: string, base: string, title: string): Promise<Plot> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  const svg = await view.toSVG();
  view.finalize();
  writeFileSync(join(outDir, `${base}.svg`), svg);
  const png = new Resvg(svg, {
    background: 'white',
    fitTo: { mode: 'zoom', value: 2 },
    font: { loadSystemFonts: true, defaultFontFamily: FONT, sansSerifFamily: FONT },
  })
    .render()
    .asPng();
  writeFileSync(join(outDir, `${base}.png`), png);
  return { file: `${base}.png`, svg: `${base}.svg`, title };
}

const config = {
  font: FONT,
  background: 'white',
  axis: { labelFontSize: 11, titleFontSize: 12 },
  legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 400 },
  header: { labelFontSize: 12, titleFontSize: 12 },
  title: { fontSize: 14 },
};

export async function renderPlots(results: BenchResults, outDir: string): Promise<Plot[]> {
  const plots: Plot[] = [];
  const pc = results.podCreate;
  if (pc) {
    const values = pc.blocks.flatMap((b) =>
      b.cdf.map((p) => ({
        setup: SETUP_LABEL[b.setup],
        clients: `${b.concurrency} client${b.concurrency === 1 ? '' : 's'}`,
        latency: p.value,
        percentile: p.q * 100,
      })),
    );
    plots.push(
      await render(
        {
          $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
          title: `Pod CREATE latency through kube-apiserver ${results.versions.kubernetes ?? ''} (all rounds pooled)`,
          data: { values },
          config,
          facet: { column: { field: 'clients', type: 'nominal', title: null, sort: ['1 client'] } },
          resolve: { scale: { x: 'independent' } },
          spec: {
            width: 380,
            height: 280,
            mark: { type: 'line', strokeWidth: 2 },
            encoding: {
              x: { field: 'latency', type: 'quantitative', title: 'latency (ms, log scale)', scale: { type: 'log' } },
              y: { field: 'percentile', type: 'quantitative', title: 'percentile', scale: { domain: [0, 100] } },
              color: {
                field: 'setup',
                type: 'nominal',
                title: null,
                legend: { orient: 'bottom', direction: 'vertical', labelLimit: 1000 },
              },
              strokeDash: { field: 'setup', type: 'nominal' },
            },
          },
        },
        outDir,
        'benchmarks-pod-create',
        'Pod CREATE latency distributions, setups a–e at 1 and 32 concurrent clients',
      ),
    );
  }
  const wh = results.webhook;
  const patch = results.patch;
  if (wh || patch) {
    const values = [
      ...(wh?.cases ?? [])
        .filter((c) => c.target === 'webhook')
        .map((c) => ({
          what: 'webhook HTTPS server, one core (admissions/s)',
          containers: c.containers,
          median: c.rps.median,
          min: c.rps.min,
          max: c.rps.max,
        })),
      ...(patch ?? [])
        .filter((c) => c.tolerations === 0)
        .map((c) => ({
          what: 'patch builder + check, in process (ops/s)',
          containers: c.containers,
          median: c.patchAndCheck.median,
          min: c.patchAndCheck.min,
          max: c.patchAndCheck.max,
        })),
    ];
    plots.push(
      await render(
        {
          $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
          title: 'Throughput vs Pod size (median of runs; bars: min–max)',
          data: { values },
          config,
          facet: { column: { field: 'what', type: 'nominal', title: null } },
          resolve: { scale: { y: 'independent' } },
          spec: {
            width: 300,
            height: 260,
            layer: [
              {
                mark: { type: 'bar', color: '#4c78a8' },
                encoding: {
                  x: { field: 'containers', type: 'ordinal', title: 'containers per Pod', axis: { labelAngle: 0 } },
                  y: { field: 'median', type: 'quantitative', title: 'per second' },
                },
              },
              {
                mark: { type: 'rule', color: 'black' },
                encoding: {
                  x: { field: 'containers', type: 'ordinal' },
                  y: { field: 'min', type: 'quantitative' },
                  y2: { field: 'max' },
                },
              },
            ],
          },
        },
        outDir,
        'benchmarks-throughput',
        'Webhook admissions/s (one pinned core) and patch builder ops/s vs Pod size',
      ),
    );
  }
  return plots;
}
