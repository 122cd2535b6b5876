// Keeps the webhook's serving certificate current without a restart: reloads
// mounted files when they change (cert-manager renews them in place), or keeps
// the self-managed Secret renewed and the webhook's caBundle injected.
import { existsSync, readFileSync, unwatchFile, watchFile } from 'node:fs';
import { dirname, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { injectCaBundle } from './ca-bundle.js';
import { SecretCertificateStore } from './secret-certificate.js';

export interface Tls {
  cert: string;
  key: string;
  /** The CA the serving certificate chains to, when known (published for agents). */
  ca?: string;
}

export interface TlsKeeper {
  readonly current: Tls;
  /** Called with a new certificate; the server swaps its secure context, open connections keep theirs. */
  onChange(listener: (tls: Tls) => void): void;
  stop(): void;
}

function keeper(initial: Tls, stop: () => void): TlsKeeper & { set(tls: Tls): void } {
  let current = initial;
  const listeners: Array<(tls: Tls) => void> = [];
  return {
    get current() {
      return current;
    },
    onChange: (l) => listeners.push(l),
    set(tls) {
      if (tls.cert === current.cert && tls.key === current.key) return;
      current = tls;
      for (const l of listeners) l(tls);
    },
    stop,
  };
}

/** --tls-cert-file/--tls-key-file: polled every pollMs (inotify is unreliable on Secret volume symlink swaps). */
export function fileTlsKeeper(certFile: string, keyFile: string, log: Logger, pollMs = 10_000): TlsKeeper {
  // cert-manager writes ca.crt next to tls.crt; published for agents when present.
  const caFile = join(dirname(certFile), 'ca.crt');
  const read = (): Tls => ({ cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8'), ...(existsSync(caFile) && { ca: readFileSync(caFile, 'utf8') }) });
  const k = keeper(read(), () => unwatchFile(certFile));
  watchFile(certFile, { interval: pollMs, persistent: false }, () => {
    try {
      k.set(read());
      log.info({ certFile }, 'serving certificate file changed: reloaded');
    } catch (err) {
      log.warn({ certFile, err: (err as Error).message }, 'serving certificate changed but cannot be read yet; keeping the current one');
    }
  });
  return k;
}

export interface SecretTlsOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  hosts: string[];
  /** MutatingWebhookConfiguration to keep the caBundle of; empty: do not inject. */
  webhookConfiguration: string;
  /** Also given each CA as it is made or renewed (the metrics APIService's caBundle); it logs and retries its own failures, stopped with the keeper. */
  alsoInject?: { inject(ca: string): Promise<void>; stop(): void } | undefined;
  log: Logger;
  checkEveryMs?: number;
}

/** --tls-secret: bootstrap (create-if-absent), renew before expiry, inject caBundle, reload. */
export async function secretTlsKeeper(o: SecretTlsOptions): Promise<TlsKeeper> {
  const store = new SecretCertificateStore(o.kubeConfig, o.namespace, o.name, o.hosts, o.log);
  const inject = async (ca: string) => {
    if (!o.webhookConfiguration) return;
    try {
      const n = await injectCaBundle(o.kubeConfig, o.webhookConfiguration, ca);
      if (n > 0) o.log.info({ webhookConfiguration: o.webhookConfiguration, webhooks: n }, 'injected our CA into the webhook caBundle');
    } catch (err) {
      o.log.warn({ webhookConfiguration: o.webhookConfiguration, err: (err as Error).message }, 'cannot inject the caBundle yet; retrying (is the MutatingWebhookConfiguration installed?)');
    }
    await o.alsoInject?.inject(ca);
  };
  const first = await store.ensure();
  await inject(first.ca);
  let timer: NodeJS.Timeout | undefined;
  const k = keeper({ cert: first.cert, key: first.key, ca: first.ca }, () => {
    clearInterval(timer);
    o.alsoInject?.stop();
  });
  timer = setInterval(() => {
    store.ensure().then(
      async (c) => {
        k.set({ cert: c.cert, key: c.key, ca: c.ca });
        await inject(c.ca);
      },
      (err: unknown) => o.log.warn({ err: (err as Error).message }, 'certificate check failed; serving the current one'),
    );
  }, o.checkEveryMs ?? 60_000);
  timer.unref();
  return k;
}
