import { execFile } from 'node:child_process';

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
  /** What the user would type (without --kubeconfig: the demo sets KUBECONFIG). */
  display: string;
}

/** Quotes an argument for a POSIX shell only when needed, so displayed commands can be pasted. */
export function shellQuote(arg: string): string {
  return /^[A-Za-z0-9_./:=,@%+-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}

export interface KubectlOptions {
  /** The kubectl binary (the one built with the control plane). */
  binary: string;
  kubeconfig: string;
  /** Working directory (where the demo's manifest files are). */
  cwd: string;
}

/** Runs kubectl; never rejects on a non-zero exit (a denial is an expected outcome here). */
export function kubectl(opts: KubectlOptions, args: readonly string[], stdin?: string): Promise<KubectlResult> {
  const display = ['kubectl', ...args].map(shellQuote).join(' ');
  return new Promise((resolve, reject) => {
    const child = execFile(
      opts.binary,
      args,
      {
        cwd: opts.cwd,
        env: { ...process.env, KUBECONFIG: opts.kubeconfig },
        timeout: 120_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        if (error && typeof (error as NodeJS.ErrnoException).code === 'string') {
          reject(new Error(`cannot run ${opts.binary}: ${error.message}`));
          return;
        }
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr, display });
      },
    );
    if (stdin !== undefined) child.stdin?.end(stdin);
  });
}
