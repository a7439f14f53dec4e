/** A Kubernetes core/v1 Toleration, as far as node isolation uses it. */
export interface Toleration {
  key?: string;
  operator?: 'Exists' | 'Equal';
  value?: string;
  effect?: '' | 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
  tolerationSeconds?: number;
}

/**
 * Value of `kubeplus.io/node-isolation` (instance) and `kubeplus.io/node-isolation-resolved`
 * (namespace): the placement every Pod of the tenant must get.
 */
export interface NodeIsolationSpec {
  nodeSelector: Record<string, string>;
  tolerations: Toleration[];
}

/** Sandbox runtime strength levels, weakest first: runc < runsc (gVisor) < kata. */
export const RUNTIME_LEVELS = ['runc', 'runsc', 'kata'] as const;
export type RuntimeLevel = (typeof RUNTIME_LEVELS)[number];

/** Value of `kubeplus.io/sandbox-isolation`. `enforce` defaults to true. */
export interface SandboxIsolationSpec {
  minRuntimeClass: RuntimeLevel;
  enforce: boolean;
  /**
   * An existing RuntimeClass of the platform (e.g. GKE Sandbox's `gvisor`) that Sandboxes are told
   * to use and advisory mode defaults to, instead of the `kubeplus-sandbox-<instance>` class the
   * operator otherwise generates. Still held to `minRuntimeClass` by its handler. Absent: the
   * operator generates its own class.
   */
  runtimeClassName?: string;
}

/** Result of parsing user input: never thrown, always returned. */
export type ParseResult<T> = { ok: true; value: T } | { ok: false; errors: string[] };
