/**
 * Settling the tenant namespace after a successful reconcile (issue 35): the I/O around
 * desired/settle.ts. Called by the instances controller (controller.ts) for every instance it
 * reconciles, annotated or not, so the webhook's hold releases the Pods and Sandboxes of a
 * namespace KubePlus just created once what the instance asks for is in effect there.
 *
 * Reads are cached (an already settled namespace costs nothing at a resync); a namespace the cache
 * shows unfinished is read fresh once before waiting. The sandbox policy is proven in effect by a
 * server-side dry run (never stored, and exempt from the hold: the webhook answers a dry run at
 * once); until it is, the instance is requeued after `probeRetryMs`.
 */

import type { ClusterPort } from '../../cluster/port.js';
import { type Instance, type InstanceKey, parseInstance, tenantNamespace } from '../../desired/instance.js';
import { planSettle, probeInEffect, type SettlePlan, settleProbe } from '../../desired/settle.js';
import { FRESH, type ReconcileLogger } from './sync-context.js';

export const SANDBOX_GROUP = 'agents.x-k8s.io';
export const DEFAULT_PROBE_RETRY_MS = 250;

export type SettlePort = Pick<
  ClusterPort,
  'getInstance' | 'getNamespace' | 'patchNamespace' | 'resolveKind' | 'servedMutatingPolicyVersion' | 'dryRunCreate'
>;

export interface SettlerOptions {
  platformNamespace: string;
  /** Never settled besides the system ones (e.g. the release namespace). */
  protectedNamespaces?: readonly string[];
  /** Requeue delay while the sandbox policy is not yet in effect, or node isolation not yet written. */
  probeRetryMs?: number;
  logger: ReconcileLogger;
  /** Each namespace settled, with how many probes it took (metrics). Must not throw. */
  onSettled?: (probes: number) => void;
}

export interface SettleResult {
  requeueAfterMs?: number;
}

export class Settler {
  readonly #opts: SettlerOptions;
  readonly #retryMs: number;
  /** Probes so far per namespace not yet settled (log and metric only; bounded by the namespaces waiting). */
  readonly #probes = new Map<string, number>();

  constructor(opts: SettlerOptions) {
    this.#opts = opts;
    this.#retryMs = opts.probeRetryMs ?? DEFAULT_PROBE_RETRY_MS;
  }

  async settle(port: SettlePort, key: InstanceKey): Promise<SettleResult> {
    const raw = await port.getInstance(key);
    if (raw === undefined) return {};
    const parsed = parseInstance(raw, key.plural);
    if (!parsed.ok || parsed.value.deletionTimestamp !== undefined) return {};
    const instance = parsed.value;
    const tenant = tenantNamespace(instance, this.#opts.platformNamespace);
    if (!tenant.ok) return {};
    const name = tenant.value.name;
    let plan = this.#plan(instance, name, await port.getNamespace(name));
    // The cache may not show this reconcile's own write yet: read once more, fresh.
    if (plan.action === 'wait') plan = this.#plan(instance, name, await port.getNamespace(name, FRESH));
    switch (plan.action) {
      case 'skip':
        this.#probes.delete(name);
        return {};
      case 'wait':
        this.#opts.logger.debug('tenant namespace not settled yet: node isolation not written', { namespace: name });
        return { requeueAfterMs: this.#retryMs };
      case 'probe': {
        const probes = (this.#probes.get(name) ?? 0) + 1;
        this.#probes.set(name, probes);
        if (!(await this.#inEffect(port, name, plan.enforce))) {
          this.#opts.logger.debug('tenant namespace not settled yet: sandbox policy not yet in effect', {
            namespace: name,
            probes,
          });
          return { requeueAfterMs: this.#retryMs };
        }
        break;
      }
      case 'settle':
        break;
    }
    await port.patchNamespace(name, plan.patch);
    const probes = this.#probes.get(name) ?? 0;
    this.#probes.delete(name);
    this.#opts.onSettled?.(probes);
    this.#opts.logger.info('tenant namespace settled', {
      namespace: name,
      instance: `${key.namespace}/${key.name}`,
      probes,
    });
    return {};
  }

  #plan(instance: Instance, tenant: string, namespace: Awaited<ReturnType<SettlePort['getNamespace']>>): SettlePlan {
    return planSettle({
      instance,
      tenant,
      namespace,
      protectedNamespaces: [this.#opts.platformNamespace, ...(this.#opts.protectedNamespaces ?? [])],
    });
  }

  async #inEffect(port: SettlePort, namespace: string, enforce: boolean): Promise<boolean> {
    const kind = await port.resolveKind(SANDBOX_GROUP, 'Sandbox');
    if (kind === undefined) return true; // no Sandbox can be created: nothing to wait for
    const [answer, mutating] = await Promise.all([
      port.dryRunCreate(settleProbe(`${kind.group}/${kind.version}`, namespace)),
      enforce ? Promise.resolve(undefined) : port.servedMutatingPolicyVersion(),
    ]);
    return probeInEffect(answer, enforce, mutating !== undefined);
  }
}
