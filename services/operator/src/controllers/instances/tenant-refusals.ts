/**
 * Which instances the tenant-namespace guard refuses now, and why (`decideTenantNamespace`): the
 * last reconcile of each instance sets or clears its entry, its deletion clears it. Read at scrape
 * time as kubeplus_operator_tenant_namespace_refused_instances{reason}. Bounded by the instances
 * the operator reconciles; a new leader rebuilds it with its first reconcile of every instance.
 */
import { TENANT_NAMESPACE_REFUSALS, type TenantNamespaceRefusal } from '../../desired/instance.js';

export class TenantRefusals {
  private readonly refused = new Map<string, TenantNamespaceRefusal>();

  set(instance: string, reason: TenantNamespaceRefusal): void {
    this.refused.set(instance, reason);
  }

  clear(instance: string): void {
    this.refused.delete(instance);
  }

  /** Refused instances by reason, every reason present (0 when none). */
  counts(): Record<TenantNamespaceRefusal, number> {
    const out = Object.fromEntries(TENANT_NAMESPACE_REFUSALS.map((r) => [r, 0])) as Record<
      TenantNamespaceRefusal,
      number
    >;
    for (const reason of this.refused.values()) out[reason]++;
    return out;
  }
}
