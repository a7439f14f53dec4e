/**
 * The report of bench section `engine-trims` (a subsection of §3): each candidate trim of the
 * policy engine against the least policy (f) and the shipped engine (e), same-round ratios. Pure.
 */

import type { EngineTrimsResult } from './engine-trims.js';
import { VARIANT_DESCRIPTIONS, VARIANTS } from './engine-variants.js';
import type { Summary } from './stats.js';

function fmt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return 'n/a';
  return Math.abs(n) >= 1000 ? Math.round(n).toLocaleString('en-US') : String(Number(n.toPrecision(3)));
}

function ratio(s: Summary): string {
  return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
}

/** A variant counts as faster when its p50 is at most this fraction of e's (median of same-round ratios). */
export const FASTER = 0.95;

/** The candidate variants (not e, not the informative ones) faster than e at p50 at every client count. */
export function fasterThanE(t: EngineTrimsResult): string[] {
  const candidates = VARIANTS.filter((v) => v !== 'e' && v !== 'inline' && v !== 'limits');
  return candidates.filter((v) => {
    const rows = t.ratios.filter((r) => r.setup === v);
    return rows.length > 0 && rows.every((r) => r.toE.p50.median <= FASTER);
  });
}

export function engineTrimsSection(t: EngineTrimsResult, rounds: number): string[] {
  const out: string[] = [];
  const p = (line = ''): void => {
    out.push(line);
  };
  p('### Trimming the policy engine: each candidate change measured against f and e');
  p();
  p(
    'Bench section `engine-trims` (bench/src/engine-trims.ts, engine-variants.ts): each variant below is the shipped ' +
      'MutatingAdmissionPolicy with one change, installed under its own name, its binding selecting its own namespace, ' +
      'which holds its own NodeIsolation parameter; measured in the same interleaved, rotating rounds as section 3 ' +
      `(a discarded warm-up round, then ${rounds} rounds) together with a plain namespace (a) and the least policy (f). ` +
      `Before measuring, ${t.probes} probe Pods (no fields; a foreign and a conflicting selector key; the mandated ` +
      'toleration already present with its operator left empty; near misses) were created dry-run in every ' +
      'variant’s namespace and came back exactly as in e’s.',
  );
  p();
  for (const v of VARIANTS) p(`- **${v}**: ${VARIANT_DESCRIPTIONS[v]}.`);
  p();
  p('| clients | setup | p50 ms (per-round median, min–max) | p99 ms | creates/s |');
  p('| ---: | --- | ---: | ---: | ---: |');
  for (const b of t.blocks) {
    p(
      `| ${b.concurrency} | ${b.setup} | ${fmt(b.p50.median)} (${fmt(b.p50.min)}–${fmt(b.p50.max)}) | ` +
        `${fmt(b.p99.median)} (${fmt(b.p99.min)}–${fmt(b.p99.max)}) | ${fmt(b.throughput.median)} |`,
    );
  }
  p();
  p('Same-round ratios (median over rounds, min–max):');
  p();
  p('| clients | variant | /f p50 | /f p99 | /e p50 | /e p99 |');
  p('| ---: | --- | ---: | ---: | ---: | ---: |');
  for (const r of t.ratios) {
    p(
      `| ${r.concurrency} | ${r.setup} | ${ratio(r.toF.p50)} | ${ratio(r.toF.p99)} | ${r.setup === 'e' ? '1' : ratio(r.toE.p50)} | ${r.setup === 'e' ? '1' : ratio(r.toE.p99)} |`,
    );
  }
  p();
  const faster = fasterThanE(t);
  p(
    faster.length === 0
      ? `No variant was faster than e by ${Math.round((1 - FASTER) * 100)}% or more at p50 (median of same-round ratios) at every client count in this run, so the engine stays as shipped.`
      : `Faster than e by ${Math.round((1 - FASTER) * 100)}% or more at p50 (median of same-round ratios) at every client count: ${faster.join(', ')}.`,
  );
  p();
  p(
    'ApplyConfiguration instead of JSONPatch: the Pod’s `nodeSelector` is an atomic map and its `tolerations` an ' +
      'atomic list (`+mapType=atomic`, `+listType=atomic` in k8s.io/api core/v1), so an apply configuration would have ' +
      'to carry each merged whole (the Pod’s entries plus the mandated ones). Each form below was bound to a namespace ' +
      'of its own, with the parameter, and a dry-run Pod carrying a selector and a toleration created there:',
  );
  p();
  p('| form | expression | the API server’s answer |');
  p('| --- | --- | --- |');
  for (const a of t.applyConfiguration) {
    const answer =
      a.status === 201
        ? `admitted, stored ${JSON.stringify(a.stored)}`
        : `HTTP ${a.status}: ${a.message.replaceAll('|', '\\|')}`;
    p(`| ${a.name} | \`${a.expression}\` | ${answer} |`);
  }
  p();
  if (t.applyConfiguration.length > 0 && t.applyConfiguration.every((a) => a.status !== 201)) {
    p(
      'So ApplyConfiguration cannot express the merge: the API server refuses an apply configuration that sets an ' +
        'atomic field at all (not only a merged one), and CEL has no union of maps to build the merged selector; ' +
        'the engine keeps JSONPatch, whose `add` of a single key or a list element (`/spec/tolerations/-`) leaves ' +
        'the rest of the Pod’s selector and tolerations as they are.',
    );
    p();
  }
  if (t.errors.length > 0) {
    p();
    p(`Failed creates: ${t.errors.length} (first: ${t.errors[0]}).`);
  }
  p();
  return out;
}
