/**
 * The compliance Reports set themselves up, when on (`--reports` with the audit: `ReportsFeature`
 * present): a Report writer fed by the audit's findings, and what brings a namespace's audit
 * forward or adds it to every period (its sandbox policy or generated RuntimeClass changed, an
 * instance bound to it has an invalid isolation annotation or no longer has, it is sandbox-isolated,
 * it holds a Report). They run inside the audit controller (audit/setup.ts).
 */
import {
  type HandlerLevels,
  namespaceSandboxPolicy,
  type RuntimeLevel,
  sandboxTenantNamespaces,
} from '@kubeplus-isolation/spec';
import type { InvolvedObject } from '../../runtime/event-recorder.js';
import type { AuditReports } from '../audit/setup.js';
import { lastGoodMinimumsFrom } from '../instances/runtime-class-index.js';
import type { Instances } from '../instances/setup.js';
import { runtimeClassInformer } from '../owned-objects/caches.js';
import type { SetupContext } from '../setup.js';
import { InvalidAnnotationIndex, invalidAnnotationChanges } from './invalid-annotations.js';
import { registerReportMetrics } from './report-metrics.js';
import { generatedRuntimeClassChanges, sandboxPolicyChanges } from './report-sources.js';
import { NamespaceReporter, type ReportStore, type SandboxLister } from './reporter.js';

export interface ReportsFeature {
  store: ReportStore;
  sandboxes: SandboxLister;
  /** Results per Report at most (`--report-max-results`). */
  maxResults: number;
  /** The operator's own Pod (the Reports API's availability is an Event on it); none: logged only. */
  self?: InvolvedObject | undefined;
}

export interface ComplianceOptions {
  platformNamespace: string;
  handlerLevels: HandlerLevels;
  levelHandlers: Readonly<Record<RuntimeLevel, string>>;
}

export function setupCompliance(
  ctx: SetupContext,
  feature: ReportsFeature,
  options: ComplianceOptions,
  instances: Pick<Instances, 'caches' | 'runtimeClassIndex' | 'sandboxIndex'>,
): AuditReports {
  const { platformNamespace } = options;
  const { caches, runtimeClassIndex, sandboxIndex } = instances;
  const sandboxInstances = () => [...sandboxIndex.all()].map((i) => i.meta);
  // An instance whose sandbox annotation is invalid still enforces its last good minimum, read
  // from its own generated RuntimeClass (the index's lookup).
  const lastGood = lastGoodMinimumsFrom(runtimeClassIndex, options.levelHandlers, options.handlerLevels);
  // Instances whose isolation annotation is invalid, by tenant namespace: kept by a key source
  // from the instance informers (which also brings those namespaces' Reports forward).
  const invalid = new InvalidAnnotationIndex(platformNamespace);
  const reports = new NamespaceReporter({
    store: feature.store,
    sandboxes: feature.sandboxes,
    sandboxPolicy: (ns) =>
      namespaceSandboxPolicy(
        sandboxIndex.inTenant(ns).map((i) => i.meta),
        ns,
        platformNamespace,
        lastGood,
      ),
    invalidAnnotations: (ns) => invalid.inTenant(ns),
    runtimeClasses: () => runtimeClassIndex.byName(),
    handlerLevels: options.handlerLevels,
    maxResults: feature.maxResults,
    self: feature.self,
    recordEvent: (target, type, reason, message) => ctx.recorder.event(target, type, reason, message),
    hooks: registerReportMetrics(ctx.metrics.registry),
    logger: ctx.logger,
  });
  return {
    reports,
    reportPods: feature.maxResults,
    // Every period also the sandbox-isolated namespaces, and those holding a Report (so a
    // namespace no longer isolated loses it); a new term first learns which hold one.
    extraKeys: () => [
      ...sandboxTenantNamespaces(sandboxInstances(), platformNamespace, lastGood),
      ...reports.knownNamespaces(),
      ...invalid.tenants(),
    ],
    onTermStart: () => void reports.discover(),
    // And at once when a namespace's sandbox policy or its generated RuntimeClass changes.
    extraSources: [
      sandboxPolicyChanges(caches.instances, (g) => caches.kinds.kindOf(g), platformNamespace),
      generatedRuntimeClassChanges(runtimeClassInformer(ctx), platformNamespace),
      invalidAnnotationChanges(caches.instances, (g) => caches.kinds.kindOf(g), invalid),
    ],
  };
}
