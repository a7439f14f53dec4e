/**
 * The demo's console output: numbered steps, each with the kubectl commands a user would type,
 * their real output, and checks (expected / seen / ✔ or ✘); a summary at the end.
 */

const useColor = process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
const paint =
  (code: string) =>
  (text: string): string =>
    useColor ? `\u001b[${code}m${text}\u001b[0m` : text;
export const bold = paint('1');
export const dim = paint('2');
export const green = paint('32');
export const red = paint('31');
export const yellow = paint('33');
export const cyan = paint('36');

export const PASS = '✔';
export const FAIL = '✘';

export interface CheckResult {
  what: string;
  ok: boolean;
}

export interface StepResult {
  id: string;
  title: string;
  source: string;
  checks: CheckResult[];
  /** Set when the step threw (an unexpected error, not a failed check). */
  error?: string;
  ms: number;
}

function indent(text: string, prefix: string): string {
  return text
    .replace(/\n+$/, '')
    .split('\n')
    .map((line) => `${prefix}${line}`)
    .join('\n');
}

/** Shortens long output for the console (the full text is what the checks read). */
function clip(text: string, maxLines: number): string {
  const lines = text.replace(/\n+$/, '').split('\n');
  if (lines.length <= maxLines) return lines.join('\n');
  return [...lines.slice(0, maxLines), dim(`… (${lines.length - maxLines} more lines)`)].join('\n');
}

export class Report {
  readonly steps: StepResult[] = [];
  #current: StepResult | undefined;
  readonly #out: (text: string) => void;

  constructor(out: (text: string) => void = (text) => process.stdout.write(text)) {
    this.#out = out;
  }

  #print(text = ''): void {
    this.#out(`${text}\n`);
  }

  /** Runs one step: a heading, then `body` (which prints commands and records checks). */
  async step(id: string, title: string, source: string, body: () => Promise<void>): Promise<StepResult> {
    const started = performance.now();
    const result: StepResult = { id, title, source, checks: [], ms: 0 };
    this.#current = result;
    this.steps.push(result);
    this.#print();
    this.#print(bold(cyan(`━━ ${id}. ${title}`)) + dim(`   [${source}]`));
    try {
      await body();
    } catch (error) {
      result.error = error instanceof Error ? error.message : String(error);
      this.#print(red(`   ${FAIL} step failed: ${indent(result.error, '     ').trimStart()}`));
    } finally {
      result.ms = Math.round(performance.now() - started);
      this.#current = undefined;
    }
    const ok = result.error === undefined && result.checks.every((c) => c.ok);
    this.#print(dim(`   (${(result.ms / 1000).toFixed(1)} s)`) + (ok ? '' : red(`  ${FAIL} ${id} has failures`)));
    return result;
  }

  /** A command and its output, as a terminal would show them. */
  command(display: string, output: string, maxLines = 30): void {
    this.#print(`   ${bold('$')} ${display}`);
    if (output.trim() !== '') this.#print(dim(indent(clip(output, maxLines), '     ')));
  }

  /** A manifest the next command applies (file name and YAML). */
  file(name: string, yaml: string): void {
    this.#print(`   ${dim(`# ${name}`)}`);
    this.#print(dim(indent(yaml, '     ')));
  }

  note(text: string): void {
    this.#print(yellow(indent(text, '   ℹ ')));
  }

  /** Records and prints one check. */
  check(what: string, expected: string, seen: string, ok: boolean): boolean {
    this.#current?.checks.push({ what, ok });
    const mark = ok ? green(PASS) : red(FAIL);
    this.#print(`   ${mark} ${what}`);
    this.#print(`       ${dim('expected:')} ${indent(expected, '                 ').trimStart()}`);
    this.#print(`       ${dim('seen:    ')} ${indent(seen, '                 ').trimStart()}`);
    return ok;
  }

  failed(): StepResult[] {
    return this.steps.filter((s) => s.error !== undefined || s.checks.some((c) => !c.ok));
  }

  /** The summary table; returns true when every step passed. */
  summary(totalMs: number): boolean {
    this.#print();
    this.#print(bold('━━ Summary') + dim('   (step, checks passed, time, what)'));
    for (const s of this.steps) {
      const ok = s.error === undefined && s.checks.every((c) => c.ok);
      const passed = s.checks.filter((c) => c.ok).length;
      const counts = `${passed}/${s.checks.length}${s.error ? ' +error' : ''}`;
      const seconds = `${(s.ms / 1000).toFixed(1)} s`;
      this.#print(
        `   ${ok ? green(PASS) : red(FAIL)} ${s.id.padEnd(3)} ${dim(counts.padStart(5))} ${dim(seconds.padStart(7))}  ${s.title}`,
      );
    }
    const failed = this.failed();
    const checks = this.steps.flatMap((s) => s.checks);
    this.#print();
    const line = `${this.steps.length - failed.length}/${this.steps.length} steps passed, ${checks.filter((c) => c.ok).length}/${checks.length} checks, in ${(totalMs / 1000).toFixed(1)} s`;
    this.#print(failed.length === 0 ? bold(green(`${PASS} ${line}`)) : bold(red(`${FAIL} ${line}`)));
    return failed.length === 0;
  }
}
