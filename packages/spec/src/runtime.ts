/**
 * Sandbox runtime strength: runc < runsc (gVisor) < kata (Kata Containers).
 * A RuntimeClass is judged by its `handler`, which names a CRI runtime configured on the nodes.
 */
import { type ParseResult, RUNTIME_LEVELS, type RuntimeLevel } from './types.js';

export interface HandlerLevels {
  /** Exact handler names. */
  exact: Readonly<Record<string, RuntimeLevel>>;
  /** Handler name prefixes, longest match wins (e.g. `kata-` covers kata-deploy's kata-qemu-snp). */
  prefixes: Readonly<Record<string, RuntimeLevel>>;
}

/**
 * Defaults from the runtimes' own installers: gVisor registers `runsc` (GKE Sandbox calls it
 * `gvisor`); kata-deploy registers `kata` plus `kata-qemu`, `kata-fc`, `kata-clh`,
 * `kata-cloud-hypervisor`, `kata-dragonball`, `kata-qemu-tdx`, `kata-qemu-snp`, … all kata level.
 */
export const DEFAULT_HANDLER_LEVELS: HandlerLevels = {
  exact: { runc: 'runc', crun: 'runc', runsc: 'runsc', gvisor: 'runsc', kata: 'kata' },
  prefixes: { 'kata-': 'kata', 'runsc-': 'runsc' },
};

/** Handler the generated `kubeplus-sandbox-<instance>` RuntimeClass gets for each minimum. */
export const DEFAULT_LEVEL_HANDLERS: Readonly<Record<RuntimeLevel, string>> = {
  runc: 'runc',
  runsc: 'runsc',
  kata: 'kata',
};

export function levelRank(level: RuntimeLevel): number {
  return RUNTIME_LEVELS.indexOf(level);
}

/** Negative when a is weaker than b, 0 when equal, positive when stronger. */
export function compareLevels(a: RuntimeLevel, b: RuntimeLevel): number {
  return levelRank(a) - levelRank(b);
}

/** Strength of a handler, or undefined when the handler is unknown. */
export function levelOfHandler(
  handler: string,
  levels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): RuntimeLevel | undefined {
  const exact = levels.exact[handler];
  if (exact !== undefined) return exact;
  let best: { len: number; level: RuntimeLevel } | undefined;
  for (const [prefix, level] of Object.entries(levels.prefixes)) {
    if (handler.startsWith(prefix) && (best === undefined || prefix.length > best.len))
      best = { len: prefix.length, level };
  }
  return best?.level;
}

/**
 * Whether a handler is at least as strong as `min`. Every handler, known or not, meets `runc`
 * (nothing is weaker); an unknown handler meets nothing stronger, since its strength is unknown.
 */
export function handlerMeetsMinimum(
  handler: string,
  min: RuntimeLevel,
  levels: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): boolean {
  if (min === 'runc') return true;
  const level = levelOfHandler(handler, levels);
  return level !== undefined && compareLevels(level, min) >= 0;
}

function isLevel(s: string): s is RuntimeLevel {
  return (RUNTIME_LEVELS as readonly string[]).includes(s);
}

/**
 * Parses the operator's `--runtime-handler-levels` setting: comma-separated `handler=level`
 * pairs, a trailing `*` marking a prefix, e.g. `runsc=runsc,gvisor=runsc,kata-*=kata`.
 * The result extends (and may override) DEFAULT_HANDLER_LEVELS.
 */
export function parseHandlerLevels(
  text: string,
  base: HandlerLevels = DEFAULT_HANDLER_LEVELS,
): ParseResult<HandlerLevels> {
  const exact: Record<string, RuntimeLevel> = { ...base.exact };
  const prefixes: Record<string, RuntimeLevel> = { ...base.prefixes };
  const errors: string[] = [];
  for (const item of text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const eq = item.indexOf('=');
    const handler = eq < 0 ? '' : item.slice(0, eq).trim();
    const level = eq < 0 ? '' : item.slice(eq + 1).trim();
    if (handler === '' || handler === '*') {
      errors.push(`"${item}": expected handler=level (e.g. kata-qemu=kata)`);
    } else if (!isLevel(level)) {
      errors.push(`"${item}": level must be one of ${RUNTIME_LEVELS.join(', ')}`);
    } else if (handler.endsWith('*')) {
      prefixes[handler.slice(0, -1)] = level;
    } else {
      exact[handler] = level;
    }
  }
  return errors.length > 0 ? { ok: false, errors } : { ok: true, value: { exact, prefixes } };
}
