/**
 * The demo's steps in the order they run, one file each. A file's prefix is the step's number in
 * the output (s1–s4: the setup; 01–13 and 09g: the design documents' steps; 14–16: the KubePlus flow of issue 35,
 * with the KubePlus stand-in; e2e/DEMO.md).
 */
import type { DemoStep } from '../scenario.js';
import { taintPool } from './01-taint-pool.js';
import { createTeamA } from './02-create-team-a.js';
import { namespaceIsolated } from './03-namespace-isolated.js';
import { oneRuntimeClass } from './04-one-runtime-class.js';
import { deploymentPlaced } from './05-deployment-placed.js';
import { unlabelledNamespace } from './06-unlabelled-namespace.js';
import { sandboxUnconstrained } from './07-sandbox-unconstrained.js';
import { sandboxDenied } from './08-sandbox-denied.js';
import { sandboxAccepted } from './09-sandbox-accepted.js';
import { gvisorTenant } from './09g-gvisor-tenant.js';
import { advisoryTeamB } from './10-advisory-team-b.js';
import { tightenTeamB } from './11-tighten-team-b.js';
import { deleteTeamB } from './12-delete-team-b.js';
import { deleteTeamA } from './13-delete-team-a.js';
import { kubeplusInstance } from './14-kubeplus-instance.js';
import { kubeplusGoverned } from './15-kubeplus-governed.js';
import { kubeplusDelete } from './16-kubeplus-delete.js';
import { controlPlane } from './s1-control-plane.js';
import { fakeNodes } from './s2-fake-nodes.js';
import { agentSandbox } from './s3-agent-sandbox.js';
import { installChart } from './s4-install-chart.js';
import { startServices } from './s4-start-services.js';

/** Start the cluster and the services; a failure here stops the demo. S4 is one of two, by mode. */
export const SETUP_STEPS: readonly DemoStep[] = [controlPlane, fakeNodes, agentSandbox, installChart, startServices];

/**
 * The design documents' steps; 9g (real node only) sits beside 9, the kata tenant's outcome. Then the
 * KubePlus flow (14–16), after every earlier tenant is gone: it moves the operator's platform
 * namespace from `kubeplus` (team-a's) to KubePlus's `default`.
 */
export const DEMO_STEPS: readonly DemoStep[] = [
  taintPool,
  createTeamA,
  namespaceIsolated,
  oneRuntimeClass,
  deploymentPlaced,
  unlabelledNamespace,
  sandboxUnconstrained,
  sandboxDenied,
  sandboxAccepted,
  gvisorTenant,
  advisoryTeamB,
  tightenTeamB,
  deleteTeamB,
  deleteTeamA,
  kubeplusInstance,
  kubeplusGoverned,
  kubeplusDelete,
];
