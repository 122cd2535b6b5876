// A CA and a serving certificate of our own, for local runs and for clusters
// without cert-manager. No cluster CA key is ever needed: the API server trusts
// our CA through the webhook's caBundle.
import 'reflect-metadata'; // @peculiar/x509 needs it loaded first.
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { webcrypto, X509Certificate } from 'node:crypto';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

export interface ServingCertificate {
  /** PEM */
  cert: string;
  key: string;
  ca: string;
  caFile: string;
}

const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY = 86_400_000;
const RENEW_BEFORE_MS = 30 * DAY;

const pem = (label: string, der: ArrayBuffer) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').trim()}\n-----END ${label}-----\n`;

function serial(): string {
  // Positive, 16 random bytes.
  const b = webcrypto.getRandomValues(new Uint8Array(16));
  b[0] = (b[0] ?? 0) & 0x7f;
  return Buffer.from(b).toString('hex');
}

export interface CertificateAuthority {
  /** PEM */
  cert: string;
  key: string;
}

async function importKey(pemText: string): Promise<webcrypto.CryptoKey> {
  const der = Buffer.from(pemText.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  return webcrypto.subtle.importKey('pkcs8', der, ALG, true, ['sign']);
}

/** A new CA, valid ten years: the trust anchor the webhook's caBundle holds. */
export async function generateCa(now = new Date()): Promise<CertificateAuthority> {
  const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: 'CN=oversell-ca',
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + 3650 * DAY),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert: ca.toString('pem') + '\n', key: pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', keys.privateKey)) };
}

/** A serving certificate for hosts, signed by ca; valid validDays (default one year). */
export async function issueServingCertificate(
  ca: CertificateAuthority,
  hosts: string[],
  now = new Date(),
  validDays = 365,
  /** clientAuth: a client certificate (tests of the webhook's client-certificate check). */
  usage: 'serverAuth' | 'clientAuth' = 'serverAuth',
): Promise<{ cert: string; key: string }> {
  const caCert = new x509.X509Certificate(ca.cert);
  const caKey = await importKey(ca.key);
  const leafKeys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const isIp = (h: string) => /^[\d.]+$/.test(h) || h.includes(':');
  const leaf = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${hosts[0] ?? 'oversell-gateway'}`,
    issuer: caCert.subject,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + validDays * DAY),
    signingKey: caKey,
    publicKey: leafKeys.publicKey,
    signingAlgorithm: ALG,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage[usage]]),
      new x509.SubjectAlternativeNameExtension(hosts.map((h) => ({ type: isIp(h) ? 'ip' : 'dns', value: h }))),
      await x509.AuthorityKeyIdentifierExtension.create(caCert, false),
    ],
  });
  return { cert: leaf.toString('pem') + '\n', key: pem('PRIVATE KEY', await webcrypto.subtle.exportKey('pkcs8', leafKeys.privateKey)) };
}

export async function generateServingCertificate(hosts: string[], now = new Date()): Promise<Omit<ServingCertificate, 'caFile'>> {
  const ca = await generateCa(now);
  return { ca: ca.cert, ...(await issueServingCertificate(ca, hosts, now)) };
}

/** True while the certificate covers every host and has more than 30 days left. */
export function stillGood(certPem: string, hosts: string[], now: number): boolean {
  const cert = new X509Certificate(certPem);
  if (Date.parse(cert.validTo) - now < RENEW_BEFORE_MS) return false;
  return hosts.every((h) => (/^[\d.]+$/.test(h) ? cert.checkIP(h) !== undefined : cert.checkHost(h) !== undefined));
}

/** Reuses ca.crt/tls.crt/tls.key in dir while valid for the hosts; otherwise writes new ones. */
export async function ensureServingCertificate(dir: string, hosts: string[]): Promise<ServingCertificate & { created: boolean }> {
  const files = { ca: join(dir, 'ca.crt'), cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key') };
  if (existsSync(files.ca) && existsSync(files.cert) && existsSync(files.key)) {
    const existing = {
      ca: readFileSync(files.ca, 'utf8'),
      cert: readFileSync(files.cert, 'utf8'),
      key: readFileSync(files.key, 'utf8'),
    };
    try {
      if (stillGood(existing.cert, hosts, Date.now())) return { ...existing, caFile: files.ca, created: false };
    } catch {
      // Unreadable certificate: replace it below.
    }
  }
  const fresh = await generateServingCertificate(hosts);
  mkdirSync(dir, { recursive: true });
  writeFileSync(files.ca, fresh.ca);
  writeFileSync(files.cert, fresh.cert);
  writeFileSync(files.key, fresh.key, { mode: 0o600 });
  return { ...fresh, caFile: files.ca, created: true };
}
