import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Assets, resolveAssets } from '../harness/assets.js';
import { type ControlPlane, startControlPlane } from '../harness/control-plane.js';
import { type FakeNodes, startFakeNodes } from '../harness/fake-nodes.js';
import { freePorts } from '../harness/ports.js';
import { type RunningService, type RunningWebhook, startOperator, startWebhook } from '../harness/services.js';
import { registerWebhook } from '../harness/webhook-config.js';
import { type KubectlResult, kubectl } from './kubectl.js';

export const NODES = ['node-a', 'node-b', 'node-c'] as const;

/** Everything the demo runs; built up step by step, torn down by stop() (on Ctrl-C by the harness: main.ts). */
export class DemoEnvironment {
  assets: Assets | undefined;
  cp: ControlPlane | undefined;
  nodes: FakeNodes | undefined;
  webhook: RunningWebhook | undefined;
  operator: RunningService | undefined;
  operatorUrl = '';
  manifestsDir = '';
  #stopping: Promise<void> | undefined;

  get controlPlane(): ControlPlane {
    if (!this.cp) throw new Error('the control plane is not running');
    return this.cp;
  }

  async startControlPlane(log: (message: string) => void): Promise<ControlPlane> {
    this.assets = await resolveAssets();
    this.cp = await startControlPlane({ assets: this.assets, log });
    this.manifestsDir = join(this.cp.dir, 'manifests');
    mkdirSync(this.manifestsDir, { recursive: true });
    return this.cp;
  }

  async startNodes(): Promise<FakeNodes> {
    this.nodes = await startFakeNodes(this.controlPlane.kc, NODES, {
      onError: (message) => process.stderr.write(`fake nodes: ${message}\n`),
    });
    return this.nodes;
  }

  /** The webhook process (every admission logged: --log-level=debug) and its registration from the chart's entry. */
  async startWebhook(): Promise<RunningWebhook> {
    const cp = this.controlPlane;
    this.webhook = await startWebhook(cp, { extraArgs: ['--log-level=debug'] });
    await registerWebhook(cp.kc, { url: this.webhook.url, caPem: this.webhook.caPem });
    return this.webhook;
  }

  /** The operator process, one replica without leader election, platform namespace `kubeplus` (its default). */
  async startOperator(): Promise<RunningService> {
    const cp = this.controlPlane;
    const [port] = (await freePorts(1)) as [number];
    this.operatorUrl = `http://127.0.0.1:${port}`;
    this.operator = await startOperator(cp, {
      args: [
        `--kubeconfig=${cp.kubeconfigPath}`,
        '--leader-elect=false',
        `--metrics-port=${port}`,
        '--bind-address=127.0.0.1',
      ],
      readiness: { url: `${this.operatorUrl}/readyz`, timeoutMs: 60_000 },
    });
    return this.operator;
  }

  kubectl(args: readonly string[], stdin?: string): Promise<KubectlResult> {
    if (!this.assets) throw new Error('no kubectl yet');
    return kubectl(
      { binary: this.assets.kubectl, kubeconfig: this.controlPlane.kubeconfigPath, cwd: this.manifestsDir },
      args,
      stdin,
    );
  }

  writeManifest(name: string, yaml: string): string {
    const path = join(this.manifestsDir, name);
    writeFileSync(path, yaml);
    return path;
  }

  /** Graceful: services first (they would only log errors once the API server is gone), then nodes, then the control plane. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      await Promise.allSettled([this.operator?.stop(), this.webhook?.stop()]);
      await this.nodes?.stop({ deleteNodes: false }).catch(() => {});
      await this.cp?.stop();
    })();
    return this.#stopping;
  }
}
