// Certificates without manual steps, in a cluster: the gateway keeps its CA and
// serving certificate in a Secret. The first replica to start creates it
// (create-if-absent: a second replica gets 409 and reads the winner's), every
// replica serves from it, and before the serving certificate expires one
// replica re-issues it from the same CA, so the webhook's caBundle never
// changes. No cluster CA key is ever needed.
import { CoreV1Api, type KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { Logger } from '../../lib/log.js';
import { generateCa, issueServingCertificate, stillGood, type CertificateAuthority } from './self-signed.js';

export interface SecretCertificate {
  ca: string;
  cert: string;
  key: string;
  /** Secret resourceVersion, to notice another replica's rotation. */
  version: string;
}

const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined) => (s ? Buffer.from(s, 'base64').toString() : '');
const code = (err: unknown) => (err as { code?: number }).code;

function fromSecret(secret: V1Secret): (SecretCertificate & { caKey: string }) | undefined {
  const d = secret.data ?? {};
  const out = { ca: unb64(d['ca.crt']), caKey: unb64(d['ca.key']), cert: unb64(d['tls.crt']), key: unb64(d['tls.key']), version: secret.metadata?.resourceVersion ?? '' };
  return out.ca && out.caKey && out.cert && out.key ? out : undefined;
}

function toData(ca: CertificateAuthority, serving: { cert: string; key: string }): Record<string, string> {
  return { 'ca.crt': b64(ca.cert), 'ca.key': b64(ca.key), 'tls.crt': b64(serving.cert), 'tls.key': b64(serving.key) };
}

export class SecretCertificateStore {
  readonly #api: CoreV1Api;
  constructor(
    kubeConfig: KubeConfig,
    private readonly namespace: string,
    private readonly name: string,
    private readonly hosts: string[],
    private readonly log: Logger,
  ) {
    this.#api = kubeConfig.makeApiClient(CoreV1Api);
  }

  /** Reads, creates or renews the Secret; resolves to what to serve now. */
  async ensure(now = Date.now()): Promise<SecretCertificate> {
    const { namespace, name, hosts } = this;
    let secret: V1Secret;
    try {
      secret = await this.#api.readNamespacedSecret({ name, namespace });
    } catch (err) {
      if (code(err) !== 404) throw new Error(`cannot read Secret ${namespace}/${name}: ${(err as Error).message}`);
      const ca = await generateCa(new Date(now));
      const serving = await issueServingCertificate(ca, hosts, new Date(now));
      try {
        const created = await this.#api.createNamespacedSecret({
          namespace,
          body: { metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'oversell' } }, type: 'Opaque', data: toData(ca, serving) },
        });
        this.log.info({ secret: `${namespace}/${name}` }, 'created the CA and serving certificate');
        return { ca: ca.cert, ...serving, version: created.metadata?.resourceVersion ?? '' };
      } catch (e) {
        if (code(e) !== 409) throw new Error(`cannot create Secret ${namespace}/${name}: ${(e as Error).message}`);
        return this.ensure(now); // another replica won the race: use its certificate
      }
    }
    const current = fromSecret(secret);
    if (!current) throw new Error(`Secret ${namespace}/${name} lacks ca.crt, ca.key, tls.crt or tls.key; delete it to let the gateway recreate it`);
    if (stillGood(current.cert, hosts, now)) return current;
    // Renew the serving certificate from the same CA; resourceVersion makes it a compare-and-swap.
    const serving = await issueServingCertificate({ cert: current.ca, key: current.caKey }, hosts, new Date(now));
    try {
      const updated = await this.#api.replaceNamespacedSecret({
        name,
        namespace,
        body: { ...secret, data: { ...secret.data, 'tls.crt': b64(serving.cert), 'tls.key': b64(serving.key) } },
      });
      this.log.info({ secret: `${namespace}/${name}` }, 'renewed the serving certificate (same CA)');
      return { ca: current.ca, ...serving, version: updated.metadata?.resourceVersion ?? '' };
    } catch (e) {
      if (code(e) !== 409) throw e;
      return this.ensure(now); // another replica renewed first
    }
  }
}
