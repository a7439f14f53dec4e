import { createServer, type Server } from 'node:https';
import type { CertAndKey } from '@kubeplus-isolation/e2e';
import { ADMISSION_REVIEW_API_VERSION, ADMISSION_REVIEW_KIND } from '@kubeplus-isolation/spec';
import type { V1Pod } from '@kubernetes/client-node';

/** What an in-test mutating webhook saw of one AdmissionReview. */
export interface SeenReview {
  uid: string;
  namespace: string;
  operation: string;
  object: V1Pod;
}

export interface TestWebhook {
  /** https://127.0.0.1:<port>/mutate */
  readonly url: string;
  readonly reviews: SeenReview[];
  close(): Promise<void>;
}

/**
 * A minimal HTTPS mutating webhook in the test process (a stand-in for "some other webhook in the
 * cluster"): answers every review allowed, with the JSON Patch `mutate` returns for the object.
 */
export async function startTestWebhook(
  serving: CertAndKey,
  mutate: (pod: V1Pod) => unknown[] = () => [],
): Promise<TestWebhook> {
  const reviews: SeenReview[] = [];
  const server: Server = createServer({ cert: serving.certPem, key: serving.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        request: { uid: string; namespace: string; operation: string; object: V1Pod };
      };
      const { uid, namespace, operation, object } = review.request;
      reviews.push({ uid, namespace, operation, object });
      const patch = mutate(object);
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          apiVersion: ADMISSION_REVIEW_API_VERSION,
          kind: ADMISSION_REVIEW_KIND,
          response: {
            uid,
            allowed: true,
            ...(patch.length > 0 && {
              patchType: 'JSONPatch',
              patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
            }),
          },
        }),
      );
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('test webhook has no port');
  return {
    url: `https://127.0.0.1:${address.port}/mutate`,
    reviews,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections(); // the API server keeps its connections alive
      await closed;
    },
  };
}
