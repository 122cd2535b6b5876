// Self-managed certificates: puts our CA into the caBundle of the APIService
// v1beta1.metrics.k8s.io, so the API server's aggregator trusts the gateway's
// metrics API as the webhook does (gateway/tls/ca-bundle.ts), without anyone
// copying certificates. A replace with the read resourceVersion: a change made
// meanwhile fails it, and the next round retries. The policy
// oversell-gateway-apiservice-cabundle-only refuses any other change.
import { ApiregistrationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { Backoff, type BackoffOptions } from '../../lib/backoff.js';
import type { Logger } from '../../lib/log.js';
import { METRICS_APISERVICE } from './apiservice-handover.js';

/** Gives each CA as it is made or renewed to the APIService, retrying a failure until stop(). */
export interface CaBundleKeeper {
  inject(ca: string): Promise<void>;
  stop(): void;
}

/**
 * A failure is retried sooner than the TLS keeper's minute, backing off to it:
 * Helm's take-over Job puts our APIService in place of metrics-server's a few
 * seconds after the gateway started and found it foreign, and until the CA is
 * in, nobody's metrics API is available (seen: 58 s without this,
 * metrics-api.e2e). No jitter: one gateway per APIService, nothing to spread.
 */
export function apiServiceCaBundleKeeper(kubeConfig: KubeConfig, log: Logger, retry: BackoffOptions = { initialMs: 2_000, maxMs: 60_000 }): CaBundleKeeper {
  const backoff = new Backoff(retry, () => 1);
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const inject = async (ca: string): Promise<void> => {
    clearTimeout(timer);
    if (stopped) return;
    try {
      if (await injectApiServiceCaBundle(kubeConfig, ca)) log.info({ apiService: METRICS_APISERVICE }, 'injected our CA into the metrics APIService caBundle');
      backoff.reset();
    } catch (err) {
      if (stopped) return;
      const retryInMs = backoff.next();
      log.warn({ apiService: METRICS_APISERVICE, err: (err as Error).message, retryInMs }, 'cannot inject the metrics APIService caBundle yet; retrying, then each minute (is the metrics-api component installed?)');
      timer = setTimeout(() => void inject(ca), retryInMs);
    }
  };
  return {
    inject,
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** True when the caBundle was changed, false when it was right already. Refuses an APIService that is not ours. */
export async function injectApiServiceCaBundle(kubeConfig: KubeConfig, caPem: string, name = METRICS_APISERVICE): Promise<boolean> {
  const api = kubeConfig.makeApiClient(ApiregistrationV1Api);
  const current = await api.readAPIService({ name });
  const bundle = Buffer.from(caPem).toString('base64');
  if (current.spec?.caBundle === bundle) return false;
  if (current.metadata?.labels?.['app.kubernetes.io/part-of'] !== 'oversell') {
    // metrics-server's (not taken over): our CA there would break it.
    throw new Error(`the APIService ${name} is not oversell's (no label app.kubernetes.io/part-of=oversell): not injecting our CA; see docs/install.md, "The metrics API"`);
  }
  await api.replaceAPIService({ name, body: { ...current, spec: { ...current.spec, caBundle: bundle } as typeof current.spec } });
  return true;
}
