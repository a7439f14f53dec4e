/**
 * Processes this benchmark started (webhook, reference webhook, operator) are killed when the
 * benchmark is interrupted. The e2e harness's own SIGINT/SIGTERM handler kills the control plane
 * and re-raises the signal, so "exit" handlers (where startService kills its services) never run.
 */
const services = new Set<number>();

export function trackService(pid: number): void {
  services.add(pid);
}

export function untrackService(pid: number): void {
  services.delete(pid);
}

/** Call after startControlPlane, so the harness's handler (registered first) runs first. */
export function killServicesOnSignal(): void {
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    process.once(signal, () => {
      for (const pid of services) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      process.exit(code);
    });
  }
}
