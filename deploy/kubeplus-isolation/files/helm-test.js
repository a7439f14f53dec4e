// `helm test`: proves an install works end to end. Run by the test Pod (templates/tests/) with its
// own ServiceAccount, whose only right is to create Pods in the throw-away namespace the test
// hook labeled for isolation. It asks the API server for a server-side dry-run Pod there, as
// a tenant's controller would create one, and checks that admission merged the namespace's
// mandate (nodeSelector and tolerations). Nothing is stored. Retries for up to 60 s: the
// namespace is brand new, and the admission engine sees it within a moment.
const https = require('node:https');
const fs = require('node:fs');

const SA = '/var/run/secrets/kubernetes.io/serviceaccount';
const namespace = process.env.TEST_NAMESPACE;
const mandate = JSON.parse(process.env.TEST_MANDATE);
const deadline = Date.now() + 60_000;

function dryRunPod() {
  const body = JSON.stringify({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'kubeplus-isolation-helm-test' },
    // Compliant with the restricted Pod Security Standard, so a namespace default never refuses it.
    spec: {
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'main',
          image: 'kubeplus-isolation.invalid/never-pulled:0',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  });
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: process.env.KUBERNETES_SERVICE_HOST,
        port: process.env.KUBERNETES_SERVICE_PORT,
        method: 'POST',
        path: `/api/v1/namespaces/${namespace}/pods?dryRun=All`,
        ca: fs.readFileSync(`${SA}/ca.crt`),
        headers: {
          Authorization: `Bearer ${fs.readFileSync(`${SA}/token`, 'utf8').trim()}`,
          'Content-Type': 'application/json',
        },
        timeout: 10_000,
      },
      (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode, text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

function missing(pod) {
  const out = [];
  const selector = pod.spec?.nodeSelector ?? {};
  for (const [k, v] of Object.entries(mandate.nodeSelector ?? {})) {
    if (selector[k] !== v) out.push(`nodeSelector ${k}=${v}`);
  }
  for (const t of mandate.tolerations ?? []) {
    const same = (pod.spec?.tolerations ?? []).filter(
      (p) => p.key === t.key && p.operator === t.operator && p.value === t.value && p.effect === t.effect,
    );
    if (same.length !== 1) out.push(`toleration ${JSON.stringify(t)} (${same.length} times)`);
  }
  return out;
}

async function main() {
  let last = '';
  while (Date.now() < deadline) {
    try {
      const { status, text } = await dryRunPod();
      if (status === 201) {
        const lacks = missing(JSON.parse(text));
        if (lacks.length === 0) {
          console.log(
            `ok: a Pod created in namespace ${namespace} is admitted with its mandate ${JSON.stringify(mandate)}`,
          );
          return 0;
        }
        last = `the Pod was admitted without: ${lacks.join(', ')}`;
      } else {
        last = `HTTP ${status}: ${text.slice(0, 500)}`;
      }
    } catch (error) {
      last = error.message;
    }
    await new Promise((r) => setTimeout(r, 2000));
  }
  console.error(
    `FAILED: for 60 s no dry-run Pod in namespace ${namespace} came back with the mandate; last: ${last}. ` +
      'Check that the webhook (or the admission policy) is running: kubectl get pods,mutatingwebhookconfigurations -A',
  );
  return 1;
}

main().then((code) => process.exit(code));
