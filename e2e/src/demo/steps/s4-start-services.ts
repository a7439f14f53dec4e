/** Fake-node mode: the webhook and the operator as processes. */
import type { DemoStep } from '../scenario.js';

export const startServices: DemoStep = {
  id: 'S4',
  title:
    'Start the node-isolation webhook (registered from the chart’s webhook-entry.json and hold-entry.json) and the operator',
  source: 'setup',
  when: (demo) => !demo.realNode,
  async run(demo) {
    const webhook = await demo.env.startWebhook();
    const operator = await demo.env.startOperator();
    demo.report.note(`webhook ${webhook.url} (metrics ${webhook.metricsUrl}, log ${webhook.logPath})`);
    demo.report.note(`operator ${demo.env.operatorUrl} (log ${operator.logPath})`);
    const res = await demo.sh(['get', 'mutatingwebhookconfigurations']);
    demo.check(
      'webhook registered',
      'kubeplus-node-isolation',
      res.stdout.trim(),
      /kubeplus-node-isolation/.test(res.stdout),
    );
  },
};
